"""A backend that is down (nothing listens) must not take the queue with it: through a real
LiteLLM proxy with an ``ollama_chat/`` deployment on a closed port, every request fails on its
own (HTTP 500) instead of the next one waiting for the first one's slot lease (900 s)."""

from __future__ import annotations

import socket

import httpx

from sjf_lab.proxy_runner import LiteLLMProxy, proxy_config


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_requests_to_a_down_ollama_fail_one_by_one_and_leave_no_slot_taken():
    cfg = proxy_config({"llama3": f"http://127.0.0.1:{_closed_port()}"})
    cfg["model_list"][0]["litellm_params"]["model"] = "ollama_chat/llama3"
    proxy = LiteLLMProxy(cfg, startup_timeout_s=180)
    await proxy.astart()
    try:
        # the old behaviour held the first one's slot for the whole lease (900 s): the second
        # request then times out here
        async with httpx.AsyncClient(timeout=60) as c:
            codes = []
            for i in range(3):
                r = await c.post(proxy.openai_base_url + "/chat/completions",
                                 headers={"Authorization": f"Bearer {proxy.master_key}"},
                                 json={"model": "llama3", "messages": [{"role": "user", "content": f"hi {i}"}]})
                codes.append(r.status_code)
        assert codes == [500, 500, 500]
    finally:
        await proxy.astop()
