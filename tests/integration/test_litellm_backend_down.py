"""A backend that is down (nothing listens) must not take the queue with it: through a real
LiteLLM proxy with an ``ollama_chat/`` deployment on a closed port, every request fails on its
own (HTTP 500) instead of the next one waiting for the first one's slot lease (900 s), and
each failure went through admission: queued, granted the one slot in turn, released once."""

from __future__ import annotations

import asyncio
import socket

import httpx

from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config
from waits import wait_until

N = 4  # concurrent requests to the down backend (1 slot: they must take turns)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_requests_to_a_down_ollama_fail_one_by_one_and_leave_no_slot_taken():
    status_port = free_port()
    cfg = proxy_config({"llama3": f"http://127.0.0.1:{_closed_port()}"})
    cfg["model_list"][0]["litellm_params"]["model"] = "ollama_chat/llama3"
    proxy = LiteLLMProxy(cfg, env={"SJF_STATUS_PORT": str(status_port), "SJF_SLOTS": "1"}, startup_timeout_s=180)
    await proxy.astart()
    try:
        async with httpx.AsyncClient(timeout=60) as c:
            async def status() -> dict:
                return (await c.get(f"http://127.0.0.1:{status_port}/sjf/status")).json()

            async def post(i: int) -> int:
                r = await c.post(proxy.openai_base_url + "/chat/completions",
                                 headers={"Authorization": f"Bearer {proxy.master_key}"},
                                 json={"model": "llama3", "messages": [{"role": "user", "content": f"hi {i}"}]})
                return r.status_code

            # all at once: the old behaviour held the first one's slot for the whole lease
            # (900 s), so the others time out here
            codes = await asyncio.gather(*(post(i) for i in range(N)))
            assert codes == [500] * N

            async def settled() -> bool:
                st = await status()
                return all(q["in_flight"] == 0 and q["waiting"] == 0 for q in st["backends"].values())

            await wait_until(settled, timeout=30)  # hang guard: no slot stays taken
            st = await status()
        # admission happened: one queue for the down backend, every request queued, granted
        # the only slot in turn (never two at once) and released exactly once; none failed open
        assert len(st["backends"]) == 1, f"no admission queue for the down backend: {st}"
        [q] = st["backends"].values()
        assert q["slots"] == 1, st
        qs = q["stats"]
        assert (qs["enqueued"], qs["dispatched"], qs["released"]) == (N, N, N), st
        assert qs["max_in_flight"] == 1, st
        c = st["counters"]
        assert c["admitted"] == N and c["fail_open"] == 0, c
        assert c["released_failure"] + c["released_backup"] == N, c
    finally:
        await proxy.astop()
