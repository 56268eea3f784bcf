"""The emulator as a box of several models (sjf_lab.box): real HTTP, Ollama's and OpenAI's APIs.

Every check is on order, counts and listings: a request is held (the ``hold`` fault) to make
a runner busy, and the tests wait for states, never for time.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import datetime, timezone

import httpx
import openai
import pytest

from sjf_lab.box import BoxConfig, ModelSpec

from waits import wait_until

# the box's own tests send it more than a runner's slots on purpose (no admission in front):
# its pending queue and runner queues are what they test
pytestmark = pytest.mark.backend_may_exceed_slots(reason="the box emulator's own tests, no admission in front")

TRACE = [
    {"prompt": "hold a", "answer_tokens": 5, "fault": "hold"},
    {"prompt": "hold b", "answer_tokens": 5, "fault": "hold"},
    {"prompt": "short", "answer_tokens": 12},
    {"prompt": "medium", "answer_tokens": 60},
]


def _box(*models, **kw) -> BoxConfig:
    return BoxConfig(models=tuple(ModelSpec(**m) if isinstance(m, dict) else ModelSpec(m) for m in models), **kw)


def _root(emu) -> str:
    return f"http://127.0.0.1:{emu.port}"


def _chat(model: str, text: str, **extra) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}], "stream": False, **extra}


async def _ollama(client: httpx.AsyncClient, emu, model: str, text: str, **extra) -> httpx.Response:
    return await client.post(_root(emu) + "/api/chat", json=_chat(model, text, **extra))


def _box_stats(emu) -> dict:
    return emu.stats()["box"]


def _order(emu) -> list[tuple[str, str]]:
    """(model, prompt hash) of each request, in the order it got its runner's slot."""
    return [(r["model"], r["hash"]) for r in emu.stats()["order"]]


async def test_each_model_has_its_own_runner_and_slots(emulator_factory):
    emu = await emulator_factory(trace_records=TRACE, tokens_per_s=2000,
                                 box=_box({"name": "chat", "slots": 2}, "auto", max_loaded=2, preload=("chat", "auto")))
    async with httpx.AsyncClient(timeout=30) as c:
        held = [asyncio.ensure_future(_ollama(c, emu, "chat", text)) for text in ("hold a", "hold a", "medium")]
        await wait_until(lambda: emu.held == 2 and _box_stats(emu)["models"]["chat"]["waiting_slot"] == 1)
        # the chat runner is full (2 slots held, 1 waiting): autocomplete runs beside it
        r = await c.post(_root(emu) + "/v1/chat/completions", json=_chat("auto", "short"))
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 12
        assert emu.held == 2
        st = _box_stats(emu)["models"]
        assert st["chat"]["in_flight"] == 3 and st["chat"]["max_in_flight"] == 3 and st["chat"]["slots"] == 2
        assert st["auto"]["requests"] == 1 and st["auto"]["slots"] == 1
        emu.release_holds()
        assert all(x.status_code == 200 for x in await asyncio.gather(*held))
    order = emu.stats()["order"]
    assert [r["model"] for r in order] == ["chat", "chat", "auto", "chat"]
    assert _box_stats(emu)["loads"] == 0  # both preloaded


async def test_a_load_is_paid_once_and_reported_in_ollama_durations(emulator_factory):
    emu = await emulator_factory(trace_records=TRACE, tokens_per_s=2000,
                                 box=_box({"name": "chat", "load_s": 0.3}, max_loaded=1))
    async with httpx.AsyncClient(timeout=30) as c:
        first = (await _ollama(c, emu, "chat", "medium")).json()
        second = (await _ollama(c, emu, "chat:latest", "short")).json()
    assert first["done"] is True and first["eval_count"] == 60 and second["eval_count"] == 12
    for d in (first, second):
        for k in ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration"):
            assert isinstance(d[k], int) and d[k] >= 0
        assert d["total_duration"] >= d["load_duration"] + d["eval_duration"]
    # Ollama's load_duration: arrival until a loaded runner took it (the 0.3 s load included)
    assert first["load_duration"] >= 300_000_000
    recs = emu.stats()["order"]
    assert recs[0]["load"] is True and recs[0]["load_s"] >= 0.3 and recs[0]["t_sched"] >= recs[0]["t_in"] + 0.3
    assert recs[1]["load"] is False and recs[1]["load_s"] == 0.0
    st = _box_stats(emu)
    assert st["loads"] == 1 and st["models"]["chat"]["loads"] == 1 and st["max_loaded"] == 1


@pytest.mark.parametrize("evict, gone", [("lru", "b"), ("name", "a")])
async def test_an_idle_model_is_evicted_least_recently_used_or_by_name(emulator_factory, evict, gone):
    emu = await emulator_factory(trace_records=TRACE, tokens_per_s=5000,
                                 box=_box("a", "b", "c", max_loaded=2, evict=evict))
    async with httpx.AsyncClient(timeout=30) as c:
        for model in ("a", "b", "a", "c"):  # a used after b: b is the least recently used
            assert (await _ollama(c, emu, model, "short")).status_code == 200
        ps = (await c.get(_root(emu) + "/api/ps")).json()["models"]
    loaded = sorted(m["name"] for m in ps)
    assert loaded == sorted(f"{x}:latest" for x in {"a", "b", "c"} - {gone})
    st = _box_stats(emu)
    assert st["loads"] == 3 and st["evictions"] == 1 and st["max_loaded"] == 2


@pytest.mark.parametrize("pending, order, loads", [
    ("fifo", ["a", "b", "a"], 2),  # Ollama: the request for the loaded a waits behind b's load
    ("skip", ["a", "a", "b"], 1),  # llama-swap: a request for the loaded a passes b
])
async def test_the_pending_queue_is_fifo_like_ollama_or_skips_like_llama_swap(emulator_factory, pending, order, loads):
    emu = await emulator_factory(trace_records=TRACE, tokens_per_s=5000,
                                 box=_box("a", "b", max_loaded=1, preload=("a",), pending=pending))
    async with httpx.AsyncClient(timeout=30) as c:
        held = asyncio.ensure_future(_ollama(c, emu, "a", "hold a"))
        await wait_until(lambda: emu.held == 1)
        for_b = asyncio.ensure_future(_ollama(c, emu, "b", "short"))
        await wait_until(lambda: _box_stats(emu)["pending"] == 1)  # b needs the room a holds
        again_a = asyncio.ensure_future(_ollama(c, emu, "a", "medium"))
        if pending == "fifo":
            await wait_until(lambda: _box_stats(emu)["pending"] == 2)
        else:
            await wait_until(lambda: _box_stats(emu)["models"]["a"]["waiting_slot"] == 1)
        emu.release_holds()
        assert all(r.status_code == 200 for r in await asyncio.gather(held, for_b, again_a))
    assert [m for m, _ in _order(emu)] == order
    assert _box_stats(emu)["loads"] == loads


async def test_a_busy_model_is_unloaded_only_when_its_requests_end(emulator_factory):
    emu = await emulator_factory(trace_records=TRACE, tokens_per_s=5000,
                                 box=_box("a", "b", max_loaded=1, preload=("a",)))
    async with httpx.AsyncClient(timeout=30) as c:
        held = asyncio.ensure_future(_ollama(c, emu, "a", "hold a"))
        await wait_until(lambda: emu.held == 1)
        for_b = asyncio.ensure_future(_ollama(c, emu, "b", "short"))
        await wait_until(lambda: _box_stats(emu)["pending"] == 1)
        ps = (await c.get(_root(emu) + "/api/ps")).json()["models"]
        assert [m["name"] for m in ps] == ["a:latest"]  # still loaded: its request runs
        emu.release_holds()
        await asyncio.gather(held, for_b)
        ps = (await c.get(_root(emu) + "/api/ps")).json()["models"]
    assert [m["name"] for m in ps] == ["b:latest"]
    assert _box_stats(emu)["evictions"] == 1


async def test_openai_and_ollama_routes_go_to_the_model_they_name(emulator_factory):
    emu = await emulator_factory(trace_records=TRACE, tokens_per_s=5000,
                                 box=_box("chat", "code", {"name": "embed", "kind": "embedding"}, max_loaded=3))
    oa = openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0,
                            http_client=openai.DefaultAsyncHttpxClient())
    r = await oa.chat.completions.create(model="chat", messages=[{"role": "user", "content": "short"}])
    assert r.usage.completion_tokens == 12 and r.model == "chat"
    r = await oa.completions.create(model="code", prompt="medium")
    assert r.usage.completion_tokens == 60
    e = await oa.embeddings.create(model="embed", input=["one", "two"])
    assert len(e.data) == 2 and len(e.data[0].embedding) == 8
    async with httpx.AsyncClient(timeout=30) as c:
        root = _root(emu)
        g = (await c.post(root + "/api/generate", json={"model": "code:latest", "prompt": "short", "stream": False})).json()
        assert g["response"].split() and g["eval_count"] == 12 and g["done_reason"] == "stop"
        lines = [json.loads(x) for x in (await c.post(root + "/api/chat", json={
            "model": "chat", "messages": [{"role": "user", "content": "short"}]})).text.splitlines()]
        assert lines[-1]["done"] is True and lines[-1]["eval_count"] == 12 and "load_duration" in lines[-1]
        emb = (await c.post(root + "/api/embed", json={"model": "embed", "input": ["a", "b", "c"]})).json()
        assert len(emb["embeddings"]) == 3 and emb["model"] == "embed" and "load_duration" in emb
        legacy = (await c.post(root + "/api/embeddings", json={"model": "embed", "prompt": "a"})).json()
        assert len(legacy["embedding"]) == 8
        lms = (await c.post(root + "/api/v0/chat/completions", json=_chat("chat", "short"))).json()
        assert lms["stats"]["stop_reason"] == "eosFound" and lms["usage"]["completion_tokens"] == 12
        # a model the box does not have: Ollama's 404 and OpenAI's 404
        miss = await c.post(root + "/api/chat", json=_chat("nope", "short"))
        assert miss.status_code == 404 and "not found" in miss.json()["error"]
        miss = await c.post(root + "/v1/chat/completions", json=_chat("nope", "short"))
        assert miss.status_code == 404 and miss.json()["error"]["code"] == 404
    await oa.close()
    models = [r["model"] for r in emu.stats()["order"]]
    assert models == ["chat", "code", "embed", "code", "chat", "embed", "embed", "chat"]
    assert _box_stats(emu)["models"]["embed"]["slots"] == 1


async def test_listings_say_what_is_loaded_as_each_server_does(emulator_factory):
    emu = await emulator_factory(trace_records=TRACE, tokens_per_s=5000, box=_box(
        {"name": "chat", "size_gb": 4.5, "slots": 2}, "qwen2.5:0.5b", {"name": "embed", "kind": "embedding"},
        max_loaded=3, preload=("chat",), keep_alive_s=600))
    async with httpx.AsyncClient(timeout=30) as c:
        root = _root(emu)
        ps = (await c.get(root + "/api/ps")).json()["models"]
        assert len(ps) == 1
        m = ps[0]
        assert m["name"] == m["model"] == "chat:latest" and m["size"] == m["size_vram"] == 4_500_000_000
        assert len(m["digest"]) == 64 and m["details"]["format"] == "gguf" and m["context_length"] == 4096
        expires = datetime.fromisoformat(m["expires_at"].replace("Z", "+00:00"))
        assert expires > datetime.now(timezone.utc)
        tags = sorted(t["name"] for t in (await c.get(root + "/api/tags")).json()["models"])
        assert tags == ["chat:latest", "embed:latest", "qwen2.5:0.5b"]
        ids = sorted(d["id"] for d in (await c.get(root + "/v1/models")).json()["data"])
        assert ids == ["chat", "embed", "qwen2.5:0.5b"]
        v0 = {d["id"]: d for d in (await c.get(root + "/api/v0/models")).json()["data"]}
        assert v0["chat"]["state"] == "loaded" and v0["qwen2.5:0.5b"]["state"] == "not-loaded"
        assert v0["embed"]["type"] == "embeddings"
        one = (await c.get(root + "/api/v0/models/qwen2.5:0.5b")).json()
        assert one["state"] == "not-loaded"
        v1 = {d["key"]: d for d in (await c.get(root + "/api/v1/models")).json()["models"]}
        assert v1["chat"]["loaded_instances"][0]["config"]["parallel"] == 2 and v1["embed"]["loaded_instances"] == []
        running = (await c.get(root + "/running")).json()["running"]
        assert running == [{"model": "chat", "state": "ready", "cmd": "", "proxy": "", "ttl": 600, "name": "",
                            "description": ""}]
        assert (await c.get(root + "/props")).status_code == 404  # a box is not a llama.cpp server
        assert (await c.get(root + "/unload")).text == "OK"
        assert (await c.get(root + "/api/ps")).json()["models"] == []


async def test_api_ps_waits_for_a_load_in_progress_as_ollama_does(emulator_factory):
    emu = await emulator_factory(trace_records=TRACE, tokens_per_s=5000,
                                 box=_box({"name": "chat", "load_s": 0.3}, "auto", max_loaded=2, preload=("auto",)))
    async with httpx.AsyncClient(timeout=30) as c:
        asking = asyncio.ensure_future(_ollama(c, emu, "chat", "short"))
        await wait_until(lambda: _box_stats(emu)["models"]["chat"]["state"] == "loading")
        ps = (await c.get(_root(emu) + "/api/ps")).json()["models"]
        assert _box_stats(emu)["models"]["chat"]["state"] == "ready"  # it answered after the load
        assert sorted(m["name"] for m in ps) == ["auto:latest", "chat:latest"]
        assert (await asking).status_code == 200


async def test_keep_alive_zero_unloads_after_the_answer(emulator_factory):
    emu = await emulator_factory(trace_records=TRACE, tokens_per_s=5000, box=_box("a", "b"))
    async with httpx.AsyncClient(timeout=30) as c:
        await _ollama(c, emu, "a", "short")
        await _ollama(c, emu, "b", "short", keep_alive=0)
        ps = (await c.get(_root(emu) + "/api/ps")).json()["models"]
    assert [m["name"] for m in ps] == ["a:latest"]
    assert _box_stats(emu)["expiries"] == 1


async def test_a_full_pending_queue_answers_503(emulator_factory):
    emu = await emulator_factory(trace_records=TRACE, tokens_per_s=5000,
                                 box=_box("a", "b", max_loaded=1, preload=("a",), max_queue=1))
    async with httpx.AsyncClient(timeout=30) as c:
        held = asyncio.ensure_future(_ollama(c, emu, "a", "hold a"))
        await wait_until(lambda: emu.held == 1)
        queued = asyncio.ensure_future(_ollama(c, emu, "b", "short"))
        await wait_until(lambda: _box_stats(emu)["pending"] == 1)
        refused = await _ollama(c, emu, "b", "medium")
        assert refused.status_code == 503 and "busy" in refused.json()["error"]
        emu.release_holds()
        assert [r.status_code for r in await asyncio.gather(held, queued)] == [200, 200]
    assert _box_stats(emu)["refused"] == 1


async def test_a_client_that_leaves_the_pending_queue_leaves_nothing_behind(emulator_factory):
    emu = await emulator_factory(trace_records=TRACE, tokens_per_s=5000,
                                 box=_box("a", "b", max_loaded=1, preload=("a",)))
    async with httpx.AsyncClient(timeout=30) as c:
        held = asyncio.ensure_future(_ollama(c, emu, "a", "hold a"))
        await wait_until(lambda: emu.held == 1)
        leaver = asyncio.ensure_future(_ollama(c, emu, "b", "short"))
        await wait_until(lambda: _box_stats(emu)["pending"] == 1)
        leaver.cancel()
        await wait_until(lambda: _box_stats(emu)["pending"] == 0 and _box_stats(emu)["models"]["b"]["in_flight"] == 0)
        emu.release_holds()
        assert (await held).status_code == 200
        # as in Ollama, the model chosen to make room unloads once idle, though the request
        # that wanted the room has left
        await wait_until(lambda: _box_stats(emu)["loaded"] == [])
    st = _box_stats(emu)
    assert st["loads"] == 0 and st["evictions"] == 1 and [m for m, _ in _order(emu)] == ["a"]
    assert emu.stats()["disconnects_queued"] == 1


async def test_a_client_that_leaves_during_its_models_load_gives_the_runner_back(emulator_factory):
    emu = await emulator_factory(trace_records=TRACE, tokens_per_s=5000,
                                 box=_box({"name": "b", "load_s": 0.5}, max_loaded=1, keep_alive_s=-1))
    async with httpx.AsyncClient(timeout=30) as c:
        leaver = asyncio.ensure_future(_ollama(c, emu, "b", "short"))
        await wait_until(lambda: _box_stats(emu)["models"]["b"]["state"] == "loading")
        leaver.cancel()
        await wait_until(lambda: _box_stats(emu)["models"]["b"]["state"] == "ready")
        st = _box_stats(emu)["models"]["b"]
        assert st["refs"] == 0 and st["in_flight"] == 0  # nothing holds the runner: it can go
        assert (await c.post(_root(emu) + "/emulator/unload")).json() == {"unloaded": 1}
    assert _box_stats(emu)["loaded"] == [] and emu.stats()["order"] == []


def test_sjf_emulate_serves_a_box_from_flags():
    from sjf_lab.proxy_runner import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "sjf_lab.cli", "emulate", "--port", str(port), "--trace", "demo",
                             "--box-model", "chat,tps=300,load=0.2", "--box-model", "embed,kind=embedding",
                             "--max-loaded", "1", "--share", "0.5", "--preload", "chat"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = [""]
        while "box on" not in lines[-1]:
            lines.append(proc.stdout.readline())
            assert lines[-1], "sjf emulate exited before it listened"
        line = lines[-1]
        assert "chat (300 tok/s, 1 slot(s), load 0.2 s)" in line and "max_loaded=1, share=0.5" in line
        # the headers name the box's models, not a speed and slots of the whole emulator ("200.0 tok/s,
        # 1 slot(s)": the defaults of a model that sets none, shown with each model)
        (logged,) = [x for x in lines if "INFO emulator on http" in x]
        (printed,) = [x for x in lines if x.startswith("emulator listening on")]
        before_models = logged.split("(box: ", 1)[0]
        assert "tok/s" not in before_models and "slot(s)" not in before_models, logged
        assert "chat (300 tok/s, 1 slot(s), load 0.2 s), embed (" in logged, logged
        assert "tok/s" not in printed and "slots=" not in printed and "a box of 2 models: chat, embed" in printed, printed
        with httpx.Client(timeout=30) as c:
            ps = c.get(f"http://127.0.0.1:{port}/api/ps").json()["models"]
            assert [m["name"] for m in ps] == ["chat:latest"]
            r = c.post(f"http://127.0.0.1:{port}/api/embed", json={"model": "embed", "input": "x"})
            assert r.status_code == 200
            st = c.get(f"http://127.0.0.1:{port}/emulator/stats").json()["box"]
            assert st["loads"] == 1 and st["loaded"] == ["embed"] and st["settings"]["share"] == 0.5
    finally:
        proc.terminate()
        proc.wait(15)


@pytest.mark.parametrize("flag, named", [
    (["--box-model", "chat,tps=-1"], "tokens_per_s"),
    (["--box-model", "chat,speed=3"], "bad part"),
    (["--box-model", "chat", "--max-loaded", "0"], "max_loaded"),
    (["--box-model", "chat", "--preload", "nope"], "preload"),
])
def test_sjf_emulate_refuses_a_bad_box_setting_by_name(flag, named):
    r = subprocess.run([sys.executable, "-m", "sjf_lab.cli", "emulate", "--port", "0", *flag],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and named in r.stdout
