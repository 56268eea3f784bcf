"""sjf_core.admission._probe and sjf_core.settings._backend_url: the idle probe and one key per backend.

The probe is sent over real sockets to the emulator (a real HTTP server); a request
held by the emulator's "hold" fault keeps the backend busy, so the probe can only return
after the test lets the held request go.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from sjf_core.admission._probe import PROBE_HEADER, http_probe, probe_gate, probe_request, probe_stats
from sjf_core.settings import normalise
from sjf_core._scheduler import Scheduler, backend_key


@pytest.mark.parametrize("a, b", [
    ("http://localhost:8001/v1", "http://127.0.0.1:8001/v1"),
    ("http://[::1]:8001/v1/", "http://127.0.0.1:8001"),
    ("HTTP://LocalHost:8001/", "http://127.0.0.1:8001/v1"),
    ("http://gpu-box:80/v1", "http://gpu-box"),
    ("https://gpu-box:443", "https://gpu-box/v1/"),
    ("http://0.0.0.0:11434", "http://localhost:11434/v1"),
])
def test_one_key_per_real_backend(a, b):
    assert backend_key(a) == backend_key(b) == normalise(b)


@pytest.mark.parametrize("a, b", [
    ("http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"),
    ("http://gpu-box/v1", "https://gpu-box/v1"),
    ("http://gpu-box:8080/v1", "http://gpu-box/v1"),
    ("http://h:1/a/v1", "http://h:1/b/v1"),
])
def test_different_backends_keep_different_keys(a, b):
    assert backend_key(a) != backend_key(b)


def test_keys_of_non_urls_and_garbage_never_raise():
    assert backend_key(None) == "default" and backend_key("") == "default"
    assert backend_key("model:gpt/") == "model:gpt"
    assert backend_key("http://h:notaport/v1") == "http://h:notaport/v1"
    assert backend_key(12) == "12"


def test_scheduler_gives_aliases_one_queue():
    s = Scheduler(predictor=None, plugins=False)
    assert s.queue("http://localhost:9/v1") is s.queue("http://127.0.0.1:9/")
    s2 = Scheduler(predictor=None, plugins=False, backend_slots={"http://localhost:9": 3})
    assert s2.queue("http://127.0.0.1:9/v1").slots == 3


def test_probe_request_bodies_carry_no_user_text():
    url, body = probe_request("http://127.0.0.1:9/v1/", "openai", "m")
    assert url == "http://127.0.0.1:9/v1/chat/completions"
    assert body == {"model": "m", "messages": [{"role": "user", "content": "."}], "max_tokens": 1, "stream": False}
    url, body = probe_request("http://127.0.0.1:11434", "ollama", "llama3")
    assert url == "http://127.0.0.1:11434/api/generate"
    assert body == {"model": "llama3", "prompt": ".", "stream": False, "options": {"num_predict": 1}}
    with pytest.raises(ValueError, match="ollama"):
        probe_request("http://x", "grpc")


def test_one_gate_per_normalised_backend():
    assert probe_gate("http://localhost:7/v1") is probe_gate("http://127.0.0.1:7")
    assert probe_gate("http://127.0.0.1:7/v1") is not probe_gate("http://127.0.0.1:8/v1")


async def _held(emu, client: httpx.AsyncClient) -> asyncio.Task:
    task = asyncio.create_task(client.post(emu.base_url + "/chat/completions", headers={"x-emulator-fault": "hold"},
                                           json={"model": "m", "messages": [{"role": "user", "content": "busy"}]}))
    while emu.held < 1:
        await asyncio.sleep(0.01)
    return task


async def test_concurrent_callers_share_one_probe_that_returns_after_the_backend_is_free(emulator_factory):
    emu = await emulator_factory(tokens_per_s=2000, slots=1)
    gate = probe_gate(emu.base_url)
    send = http_probe(emu.base_url, "openai", "m")
    async with httpx.AsyncClient(timeout=60) as c:
        holder = await _held(emu, c)
        waiters = [asyncio.create_task(gate.wait_idle(send, 60)) for _ in range(3)]
        while emu.stats()["received"] < 2:  # the probe reached the backend and waits there
            await asyncio.sleep(0.01)
        assert gate.in_flight and not any(w.done() for w in waiters)
        emu.release_holds()
        assert await asyncio.gather(*waiters) == [True, True, True]
        assert (await holder).status_code == 200
    st = emu.stats()
    assert st["received"] == 2  # the held request and ONE probe
    probe = st["order"][1]
    assert probe["probe"] is True and probe["tokens"] == 1 and probe["t_in"] < st["order"][0]["t_out"]
    assert probe["t_out"] >= st["order"][0]["t_out"]  # answered only after the busy request ended
    assert gate.counters == {"sent": 1, "ok": 1, "timeout": 0, "error": 0, "unreachable": 0, "shared": 2,
                             "retry": 0, "estimate": 0}
    assert probe_stats()[backend_key(emu.base_url)] == gate.counters
    assert not gate.in_flight


async def test_probe_timeout_and_error_return_false(emulator_factory):
    emu = await emulator_factory(tokens_per_s=2000, slots=1)
    gate = probe_gate(emu.base_url)
    async with httpx.AsyncClient(timeout=60) as c:
        holder = await _held(emu, c)
        assert await gate.wait_idle(http_probe(emu.base_url, "openai", "m"), 0.3) is False
        assert gate.counters["timeout"] == 1 and not gate.in_flight
        emu.release_holds()
        await holder
    # an HTTP error answer (404: a wrong path) is not "the backend is free"
    bad = probe_gate("http://127.0.0.1:%d/nope" % emu.port)
    assert await bad.wait_idle(http_probe(f"http://127.0.0.1:{emu.port}/nope", "openai", "m"), 30) is False
    assert bad.counters["error"] == 1
    # nothing listening: the backend cannot be running anything of ours, so the slot is free
    # (holding it would stall the queue for the whole lease: an Ollama that is down)
    closed = probe_gate("http://127.0.0.1:9/v1")
    before = closed.counters["unreachable"]
    assert await closed.wait_idle(http_probe("http://127.0.0.1:9/v1"), 30) is True
    assert closed.counters["unreachable"] == before + 1

    async def boom():
        raise RuntimeError("x")

    assert await closed.wait_idle(boom, 30) is False


async def test_probe_header_marks_the_request(emulator_factory):
    emu = await emulator_factory(tokens_per_s=2000)
    assert await probe_gate(emu.base_url).wait_idle(http_probe(emu.base_url, "openai", "m"), 30) is True
    async with httpx.AsyncClient() as c:
        await c.post(emu.base_url + "/chat/completions", json={"model": "m", "max_tokens": 1,
                                                               "messages": [{"role": "user", "content": "."}]})
    assert [o["probe"] for o in emu.stats()["order"]] == [True, False]
    assert PROBE_HEADER == "x-sjf-probe"
