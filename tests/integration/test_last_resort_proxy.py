"""Issue 20, LiteLLM side: an admission fault never sends a request unscheduled.

A real LiteLLM proxy subprocess with the plugin (its scheduler from
``tests/failsafe_factory.py``: the Redis store on a real redis-server of this module, and a
predictor whose prediction raises when read for prompts starting "BOOM"), real clients
(httpx) and the emulator (a real HTTP server, 1 slot) as backends. Every bound is counted at
the backend (the emulator's ``max_in_flight`` of user requests) and asserted here
explicitly. Both tests fail on the code before the last-resort gate: 8 and 2 in flight.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx
import pytest
from waits import wait_until as until

from redis_server import RedisServer
from sjf_lab.emulator import EmulatorThread
from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

N = 8
HOLD = "hold the backend"  # the emulator holds its slot until told (trace fault "hold")
TESTS_DIR = str(Path(__file__).resolve().parents[1])


class H:
    def __init__(self, proxy, status_port, emus, redis):
        self.proxy, self.status_port, self.emus, self.redis = proxy, status_port, emus, redis

    def status(self) -> dict:
        return httpx.get(f"http://127.0.0.1:{self.status_port}/sjf/status", timeout=10).json()

    async def chat(self, group: str, prompt: str, check: bool = True, **body) -> int:
        async with httpx.AsyncClient(timeout=120) as c:
            r = await c.post(self.proxy.openai_base_url + "/chat/completions",
                             headers={"Authorization": f"Bearer {self.proxy.master_key}"},
                             json={"model": group, "messages": [{"role": "user", "content": prompt}],
                                   "max_tokens": 20, **body})
            if not check:
                return r.status_code
            r.raise_for_status()
            return r.json()["usage"]["completion_tokens"]

    async def stream(self, group: str, prompt: str, chunks: int | None = None) -> int:
        """Read a streamed answer to its end (or leave after ``chunks`` chunks); the chunks read."""
        n = 0
        async with httpx.AsyncClient(timeout=120) as c:
            async with c.stream("POST", self.proxy.openai_base_url + "/chat/completions",
                                headers={"Authorization": f"Bearer {self.proxy.master_key}"},
                                json={"model": group, "messages": [{"role": "user", "content": prompt}],
                                      "stream": True}) as r:
                async for line in r.aiter_lines():
                    n += line.startswith("data: ")
                    if chunks is not None and n >= chunks:
                        break
        return n

    def gate(self, emu) -> dict:
        return next(v for k, v in self.status()["last_resort"]["backends"].items() if str(emu.port) in k)


@pytest.fixture(scope="module")
def gp():
    hold = [{"prompt": HOLD, "answer_tokens": 20, "fault": "hold"}]
    paths = [{"prompt": "BOOM fails", "answer_tokens": 20, "fault": "500"}, {"prompt": "BOOM long", "answer_tokens": 400},
             {"prompt": "BOOM stream", "answer_tokens": 60}, {"prompt": "BOOM hold", "answer_tokens": 20, "fault": "hold"},
             {"prompt": HOLD, "answer_tokens": 20, "fault": "hold"}]
    emus = {"boom": EmulatorThread(tokens_per_s=400, on_disconnect="continue", trace_records=paths),
            "kill": EmulatorThread(tokens_per_s=400, trace_records=hold)}
    srv = RedisServer().start()
    proxy = None
    try:
        cfg = proxy_config({g: e.base_url for g, e in emus.items()}, plugin=True)
        status_port = free_port()
        proxy = LiteLLMProxy(cfg, env={
            "SJF_SCHEDULER_FACTORY": "failsafe_factory:make", "SJF_TEST_FAILSAFE_REDIS": srv.url,
            "SJF_STATUS_PORT": str(status_port), "SJF_PLUGINS": "none",
            "PYTHONPATH": os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")])})
        proxy.start()
        yield H(proxy, status_port, emus, srv)
    finally:
        if proxy is not None:
            proxy.stop()
        srv.close()
        for e in emus.values():
            e.stop()


async def test_a_predictor_fault_on_a_burst_keeps_one_in_flight_and_answers_all(gp):
    emu = gp.emus["boom"]
    got = await asyncio.wait_for(asyncio.gather(*[gp.chat("boom", f"BOOM question {i}") for i in range(N)]), 120)
    assert got == [20] * N
    st = emu.stats()
    assert st["max_in_flight"] == 1 and st["served"] == N, st["max_in_flight"]
    c = gp.status()["counters"]
    assert c["gated"] == N and c["admitted"] >= N


async def test_redis_killed_mid_burst_keeps_one_in_flight_and_loses_nothing(gp):
    emu = gp.emus["kill"]
    holder = asyncio.ensure_future(gp.chat("kill", HOLD))
    await until(lambda: emu.stats()["held"] == 1, timeout=60)
    rest = asyncio.ensure_future(asyncio.gather(*[gp.chat("kill", f"question {i}") for i in range(N - 1)]))
    key = next(k for k in gp.status()["backends"] if str(emu.port) in k)
    await until(lambda: gp.status()["backends"][key]["waiting"] >= N - 1, timeout=60)
    await asyncio.get_running_loop().run_in_executor(None, gp.redis.stop, signal.SIGKILL)
    await until(lambda: gp.status()["backends"][key]["stats"]["failopen"] >= N - 1, timeout=60)
    await asyncio.sleep(0.3)  # time enough for a local queue to (wrongly) dispatch beside the holder
    assert emu.stats()["in_flight"] == 1
    emu.release_holds()
    assert await asyncio.wait_for(holder, 60) == 20
    assert await asyncio.wait_for(rest, 120) == [20] * (N - 1)
    st = emu.stats()
    assert st["max_in_flight"] == 1 and st["served"] == N, st["max_in_flight"]
    await asyncio.get_running_loop().run_in_executor(None, gp.redis.start)  # back for later requests
    assert await gp.chat("kill", "after the restart") == 20
    await until(lambda: gp.status()["backends"][key]["in_flight"] == 0, timeout=30)
    assert emu.stats()["max_in_flight"] == 1


async def test_a_gated_request_releases_exactly_once_on_every_path(gp):
    """Success, a backend error, a stream read to its end, a stream left after its first chunk, a
    client that leaves a non-streamed answer mid-way (the idle probe): each through the gate."""
    emu = gp.emus["boom"]
    before = gp.gate(emu)["gate_granted"] if any(str(emu.port) in k for k in
                                                 gp.status()["last_resort"]["backends"]) else 0
    assert await gp.chat("boom", "BOOM ok") == 20
    assert await gp.chat("boom", "BOOM fails", check=False) >= 500
    assert await gp.stream("boom", "BOOM stream") > 2  # read to its end
    assert await gp.stream("boom", "BOOM stream", chunks=2) == 2
    left = asyncio.ensure_future(gp.chat("boom", "BOOM long", max_tokens=400))
    await until(lambda: emu.stats()["generating"] == 1 and emu.stats()["order"][-1]["tokens"] == 400)
    left.cancel()  # the client leaves mid-answer: the slot is kept until the backend is idle
    await asyncio.gather(left, return_exceptions=True)
    assert await gp.chat("boom", "BOOM after") == 20
    await until(lambda: gp.gate(emu)["gate_in_flight"] == 0 and gp.status()["tracked_calls"] == 0, timeout=60)
    g = gp.gate(emu)
    assert g["gate_granted"] - before == 6 and g["gate_released"] == g["gate_granted"], g
    assert g["held"] == 0 and g["gate_expired"] == 0, g  # released by the paths, never by the lease
    assert emu.stats()["max_in_flight"] == 1  # the orphan and the next one never at once


async def test_gated_and_queued_requests_share_the_backends_one_slot(gp):
    """Requests at the last-resort gate and requests of the normal queue on one backend: the gate
    counts the backend's slots (its ledger), not slots of its own. A normal request holds the slot
    while gated and queued ones arrive; then a gated one holds it while a normal one arrives.
    Neither ever runs beside the other (fails when the gate keeps its own slot count: 2 in flight)."""
    emu = gp.emus["boom"]

    def shared(n: int) -> bool:
        """``n`` wait: at the backend's ledger (the gate's, or a Redis grant's) or in its queue."""
        if emu.stats()["max_in_flight"] > 1:
            return True  # the bound broke: the assertion below says so
        st = gp.status()
        key = next(k for k in st["backends"] if str(emu.port) in k)
        return gp.gate(emu)["waiting"] + st["backends"][key]["waiting"] == n

    holder = asyncio.ensure_future(gp.chat("boom", HOLD))  # normal queue: holds the slot
    await until(lambda: emu.stats()["held"] == 1, timeout=60)
    gated = [asyncio.ensure_future(gp.chat("boom", f"BOOM shared {i}")) for i in range(3)]
    queued = [asyncio.ensure_future(gp.chat("boom", f"shared question {i}")) for i in range(2)]
    await until(lambda: shared(5), timeout=60)
    assert emu.stats()["max_in_flight"] == 1 and emu.stats()["in_flight"] == 1
    emu.release_holds()
    assert await asyncio.wait_for(asyncio.gather(holder, *gated, *queued), 120) == [20] * 6
    gate_holder = asyncio.ensure_future(gp.chat("boom", "BOOM hold"))  # the gate holds the slot
    await until(lambda: emu.stats()["held"] == 1, timeout=60)
    queued = [asyncio.ensure_future(gp.chat("boom", f"shared question {i}")) for i in range(2, 4)]
    await until(lambda: shared(2), timeout=60)
    assert emu.stats()["max_in_flight"] == 1 and emu.stats()["in_flight"] == 1
    emu.release_holds()
    assert await asyncio.wait_for(asyncio.gather(gate_holder, *queued), 120) == [20] * 3
    assert emu.stats()["max_in_flight"] == 1
