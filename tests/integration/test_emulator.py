"""The serial backend emulator: a real HTTP server, exercised with the real openai SDK and aiohttp."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time

import aiohttp
import httpx
import openai
import pytest

from sjf_lab.emulator import EmulatorThread, Trace, prompt_hash, request_text, short_hash

# the emulator's own tests send it requests directly (no admission in front): its FIFO queue
# and counters are what they test, so it sees more than its slots on purpose
pytestmark = pytest.mark.backend_may_exceed_slots(reason="the emulator's own tests, no admission in front")

TRACE = [
    {"prompt": "short one", "answer_tokens": 20},
    {"prompt": "medium one", "answer_tokens": 120},
    {"prompt": "long one", "answer_tokens": 400},
    {"prompt": "very long one", "answer_tokens": 4000},
    {"prompt": "fails", "answer_tokens": 30, "fault": "500"},
    {"prompt": "drops", "answer_tokens": 30, "fault": "drop"},
    {"prompt": "drops midway", "answer_tokens": 200, "fault": "drop-mid"},
]


def _client(emu) -> openai.AsyncOpenAI:
    # a fresh HTTP client per test, closed with the test's event loop
    return openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0,
                              http_client=openai.DefaultAsyncHttpxClient())


def _msg(text):
    return [{"role": "user", "content": text}]


async def _until(pred, timeout=10.0):
    """Poll ``pred`` until true (a wait, not a timing assertion)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        await asyncio.sleep(0.02)
    return pred()


async def test_chat_non_stream_length_usage_and_cap(emulator_factory):
    emu = await emulator_factory(tokens_per_s=2000, trace_records=TRACE)
    c = _client(emu)
    r = await c.chat.completions.create(model="m", messages=_msg("medium one"))
    assert r.usage.completion_tokens == 120
    assert len(r.choices[0].message.content.split()) == 120
    assert r.choices[0].finish_reason == "stop"
    r = await c.chat.completions.create(model="m", messages=_msg("medium one"), max_tokens=7)
    assert r.usage.completion_tokens == 7 and r.choices[0].finish_reason == "length"
    r = await c.chat.completions.create(model="m", messages=_msg("medium one"), max_completion_tokens=9)
    assert r.usage.completion_tokens == 9


async def test_chat_stream_emits_ticks_and_usage(emulator_factory):
    emu = await emulator_factory(tokens_per_s=1000, tick_s=0.02, trace_records=TRACE)
    c = _client(emu)
    stream = await c.chat.completions.create(model="m", messages=_msg("long one"), stream=True,
                                             stream_options={"include_usage": True})
    text, deltas, usage, finish = "", 0, None, None
    async for chunk in stream:
        if chunk.choices:
            d = chunk.choices[0].delta.content
            if d:
                text += d
                deltas += 1
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    assert len(text.split()) == 400
    assert usage.completion_tokens == 400 and finish == "stop"
    # tokens are emitted in ticks (~20 per chunk at 1000 tok/s, 20 ms), not one write per token
    assert 1 <= deltas < 400 / 2


async def test_other_endpoints(emulator_factory):
    emu = await emulator_factory(tokens_per_s=5000, trace_records=TRACE)
    c = _client(emu)
    r = await c.completions.create(model="m", prompt="short one")
    assert r.usage.completion_tokens == 20 and len(r.choices[0].text.split()) == 20
    s = await c.completions.create(model="m", prompt="short one", stream=True, max_tokens=5)
    parts = [ch.choices[0].text async for ch in s if ch.choices]
    assert len("".join(parts).split()) == 5
    r = await c.responses.create(model="m", input="medium one")
    assert r.usage.output_tokens == 120 and len(r.output_text.split()) == 120
    r = await c.responses.create(model="m", input=[{"role": "user", "content": "short one"}], max_output_tokens=3)
    assert r.usage.output_tokens == 3
    models = await c.models.list()
    assert [m.id for m in models.data] == ["emulator"]
    # /chat/completions without /v1 is accepted too
    async with aiohttp.ClientSession() as s:
        async with s.post(f"http://127.0.0.1:{emu.port}/chat/completions",
                          json={"model": "m", "messages": _msg("short one")}) as resp:
            assert resp.status == 200
            assert (await resp.json())["usage"]["completion_tokens"] == 20
        async with s.post(f"http://127.0.0.1:{emu.port}/v1/chat/completions", data=b"not json") as resp:
            assert resp.status == 400


async def test_serial_fifo_and_concurrency_counters(emulator_factory):
    emu = await emulator_factory(tokens_per_s=2000, trace_records=TRACE)
    c = _client(emu)
    prompts = ["long one", "short one", "medium one", "short one"]
    tasks = []
    for p in prompts:  # staggered so that arrival order is well defined
        tasks.append(asyncio.create_task(c.chat.completions.create(model="m", messages=_msg(p))))
        await asyncio.sleep(0.03)
    await asyncio.gather(*tasks)
    st = emu.stats()
    assert [o["hash"] for o in st["order"]] == [short_hash(p) for p in prompts]
    assert st["max_generating"] == 1
    assert st["max_in_flight"] == 4  # all four were inside the emulator at once
    assert st["served"] == 4 and st["in_flight"] == 0 and st["waiting"] == 0
    assert st["completion_tokens"] == 400 + 20 + 120 + 20


async def test_slots_two(emulator_factory):
    emu = await emulator_factory(tokens_per_s=2000, slots=2, trace_records=TRACE)
    c = _client(emu)
    await asyncio.gather(*[c.chat.completions.create(model="m", messages=_msg("medium one")) for _ in range(5)])
    st = emu.stats()
    assert st["max_generating"] == 2 and st["served"] == 5


async def test_fallback_lengths_are_seeded_and_deterministic():
    a, b, c = Trace(seed=1), Trace(seed=1), Trace(seed=2)
    hashes = [prompt_hash(f"unknown prompt {i}") for i in range(400)]
    la = [a.lookup(h).tokens for h in hashes]
    assert la == [b.lookup(h).tokens for h in hashes]
    assert la != [c.lookup(h).tokens for h in hashes]
    assert all(t >= 1 for t in la)
    # the default mixture has Short, Medium and Long answers
    assert min(la) < 200 and max(la) >= 800 and any(200 <= t < 800 for t in la)


async def test_faults(emulator_factory):
    emu = await emulator_factory(tokens_per_s=2000, trace_records=TRACE)
    c = _client(emu)
    with pytest.raises(openai.InternalServerError):
        await c.chat.completions.create(model="m", messages=_msg("fails"))
    with pytest.raises(openai.APIConnectionError):
        await c.chat.completions.create(model="m", messages=_msg("drops"))
    with pytest.raises(openai.APIConnectionError):
        await c.chat.completions.create(model="m", messages=_msg("drops midway"))
    got = 0
    # the SDK passes a mid-stream drop through as the transport's error (no retry mid-stream)
    with pytest.raises((httpx.RemoteProtocolError, openai.APIConnectionError)):
        stream = await c.chat.completions.create(model="m", messages=_msg("drops midway"), stream=True)
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                got += len(chunk.choices[0].delta.content.split())
    assert 0 < got <= 100  # half of the answer arrived before the drop
    # the header injects a fault for any prompt
    with pytest.raises(openai.RateLimitError):
        await c.chat.completions.create(model="m", messages=_msg("short one"), extra_headers={"x-emulator-fault": "429"})
    st = emu.stats()
    assert st["errors"] == 2 and st["dropped"] == 3 and st["in_flight"] == 0 and st["generating"] == 0
    # and the server still serves
    r = await c.chat.completions.create(model="m", messages=_msg("short one"))
    assert r.usage.completion_tokens == 20


@pytest.mark.parametrize("stream", [False, True])
async def test_disconnect_stop_frees_slot_and_drops_queued(emulator_factory, stream):
    emu = await emulator_factory(tokens_per_s=500, on_disconnect="stop", trace_records=TRACE)
    c = _client(emu)
    body = dict(model="m", messages=_msg("very long one"))

    async def call(**kw):
        r = await c.chat.completions.create(**body, **kw)
        if kw.get("stream"):
            async for _ in r:
                pass
        return r

    running = asyncio.create_task(call(stream=stream))
    assert await _until(lambda: emu.stats()["generating"] == 1)
    queued = asyncio.create_task(call())
    assert await _until(lambda: emu.stats()["waiting"] == 1)
    queued.cancel()
    running.cancel()
    assert await _until(lambda: emu.stats()["in_flight"] == 0)
    st = emu.stats()
    assert st["disconnects"] == 2 and st["disconnects_queued"] == 1 and st["served"] == 0
    assert [o["outcome"] for o in st["order"]] == ["disconnected"]  # the queued one never started
    assert st["completion_tokens"] < 4000


async def test_disconnect_continue_keeps_generating(emulator_factory):
    emu = await emulator_factory(tokens_per_s=4000, on_disconnect="continue", trace_records=TRACE)
    c = _client(emu)

    async def consume():
        async for _ in await c.chat.completions.create(model="m", messages=_msg("very long one"), stream=True):
            pass

    running = asyncio.create_task(consume())
    assert await _until(lambda: emu.stats()["generating"] == 1)
    queued = asyncio.create_task(c.chat.completions.create(model="m", messages=_msg("long one")))
    assert await _until(lambda: emu.stats()["waiting"] == 1)
    running.cancel()
    queued.cancel()
    await asyncio.sleep(0.1)
    st = emu.stats()
    assert st["generating"] == 1 and st["in_flight"] == 2  # the orphan still holds the slot
    assert await _until(lambda: emu.stats()["in_flight"] == 0, timeout=20)
    st = emu.stats()
    # both orphans were generated in full, for nobody
    assert [o["outcome"] for o in st["order"]] == ["disconnected", "disconnected"]
    assert st["completion_tokens"] == 4000 + 400 and st["disconnects"] == 2


async def test_stats_reset_and_privacy(emulator_factory):
    emu = await emulator_factory(tokens_per_s=5000, trace_records=TRACE)
    c = _client(emu)
    await c.chat.completions.create(model="m", messages=_msg("short one"),
                                    extra_headers={"x-emulator-request-id": "req-7"})
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{emu.port}/emulator/stats") as r:
            st = await r.json()
        (rec,) = st["order"]
        assert rec["t_out"] >= rec["t_in"]
        assert {k: v for k, v in rec.items() if k not in ("t_in", "t_start", "t_out")} == {
            "seq": 1, "hash": short_hash("short one"), "id": "req-7", "tokens": 20, "outcome": "ok", "probe": False,
                "stream": False, "api": "chat", "sjf_headers": [],
            "keys": ["messages", "model"]}
        assert "short one" not in json.dumps(st)
        async with s.post(f"http://127.0.0.1:{emu.port}/emulator/reset") as r:
            assert r.status == 200
        async with s.get(f"http://127.0.0.1:{emu.port}/emulator/stats") as r:
            st = await r.json()
    assert st["served"] == 0 and st["order"] == [] and st["max_in_flight"] == 0


def test_request_text_shapes():
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "b"}]
    assert request_text({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}, "chat") == "x"
    assert request_text({"messages": [{"role": "user", "content": parts}]}, "chat") == "a\nb"
    assert request_text({"messages": [{"role": "user", "content": None}]}, "chat") == ""
    assert request_text({"prompt": ["p", "q"]}, "completions") == "p"
    assert request_text({"input": "i"}, "responses") == "i"
    assert request_text("junk", "chat") == ""


def test_trace_file_errors(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"prompt": "a", "answer_tokens": 3}\n\n{"sha256": "%s", "response_tokens": 5}\n' % prompt_hash("b"))
    t = Trace.load(p)
    assert t.lookup(prompt_hash("a")).tokens == 3 and t.lookup(prompt_hash("b")).tokens == 5
    p.write_text('{"prompt": "a", "answer_tokens": 3}\nnot json\n')
    with pytest.raises(ValueError, match=r":2:"):
        Trace.load(p)
    with pytest.raises(ValueError, match="fault"):
        Trace.from_records([{"prompt": "a", "answer_tokens": 1, "fault": "explode"}])
    with pytest.raises(ValueError):
        Trace.from_records([{"prompt": "a"}])
    with pytest.raises(FileNotFoundError):
        Trace.load(tmp_path / "missing.jsonl")


def test_thread_runner_sync_use():
    import httpx

    with EmulatorThread(tokens_per_s=5000, trace_records=TRACE) as emu:
        r = httpx.post(emu.base_url + "/chat/completions", json={"model": "m", "messages": _msg("short one")})
        assert r.json()["usage"]["completion_tokens"] == 20
        assert emu.stats()["served"] == 1
        emu.reset()
        assert emu.stats()["served"] == 0


def test_cli_emulate_serves(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"prompt": "hello", "answer_tokens": 11}) + "\n")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "sjf_lab.cli", "emulate", "--port", "0", "--trace", str(trace),
                             "--tokens-per-s", "5000", "--slots", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    try:
        line = ""
        for line in proc.stdout:
            if "listening on" in line:
                break
        m = re.search(r"http://127\.0\.0\.1:(\d+)/v1", line)
        assert m, line
        import httpx

        base = f"http://127.0.0.1:{m.group(1)}/v1"
        r = httpx.post(base + "/chat/completions", json={"model": "m", "messages": _msg("hello")}, timeout=30)
        assert r.json()["usage"]["completion_tokens"] == 11
        assert httpx.get(base + "/models").json()["data"][0]["id"] == "emulator"
    finally:
        proc.terminate()
        assert proc.wait(30) == 0


async def test_hold_fault_and_release(emulator_factory):
    emu = await emulator_factory(tokens_per_s=5000, trace_records=[{"prompt": "holder", "answer_tokens": 5, "fault": "hold"}])
    c = _client(emu)
    held = asyncio.create_task(c.chat.completions.create(model="m", messages=_msg("holder")))
    assert await _until(lambda: emu.stats()["held"] == 1)
    queued = asyncio.create_task(c.chat.completions.create(model="m", messages=_msg("after")))
    assert await _until(lambda: emu.stats()["waiting"] == 1)
    assert not held.done() and not queued.done()
    assert emu.release_holds() == 1
    r1, r2 = await asyncio.gather(held, queued)
    assert r1.usage.completion_tokens == 5
    st = emu.stats()
    assert [o["hash"] for o in st["order"]] == [short_hash("holder"), short_hash("after")]
    assert st["order"][0]["keys"] == ["messages", "model"] and st["held"] == 0


# ---- disconnect modes, records, Ollama's native API, /props ---------------------------------
@pytest.mark.parametrize("stream, keeps_going", [(False, True), (True, False)])
async def test_disconnect_stop_streams_mode(emulator_factory, stream, keeps_going):
    """llama-cpp-python: a non-streamed orphan is generated to its end, a stream stops."""
    emu = await emulator_factory(tokens_per_s=2000, on_disconnect="stop-streams", trace_records=TRACE)
    c = _client(emu)

    async def call():
        r = await c.chat.completions.create(model="m", messages=_msg("very long one"), stream=stream)
        if stream:
            async for _ in r:
                pass

    running = asyncio.create_task(call())
    assert await _until(lambda: emu.stats()["generating"] == 1)
    running.cancel()
    assert await _until(lambda: emu.stats()["in_flight"] == 0, timeout=30)
    st = emu.stats()
    assert st["order"][0]["outcome"] == "disconnected" and st["disconnects"] == 1
    assert (st["completion_tokens"] == 4000) is keeps_going, st["completion_tokens"]


def test_max_overlap_and_idle_gaps_from_records():
    from sjf_lab.emulator import idle_gaps, max_overlap

    recs = [{"seq": 1, "t_in": 0.0, "t_out": 2.0}, {"seq": 2, "t_in": 1.0, "t_out": 3.0},
            {"seq": 3, "t_in": 3.0, "t_out": 4.0}, {"seq": 4, "t_in": 3.5, "t_out": 5.0, "probe": True},
            {"seq": 5, "t_in": 4.5, "t_out": 6.0}]
    assert max_overlap(recs) == 2 and max_overlap(recs, probes=True) == 2
    assert max_overlap(recs[2:]) == 1 and max_overlap(recs[2:], probes=True) == 2
    assert idle_gaps(recs) == [(3, 0.0), (5, 0.5)]


async def _ndjson(session, url, body):
    async with session.post(url, json=body) as r:
        assert r.status == 200, await r.text()
        if body.get("stream") is False:
            return r.headers["Content-Type"], [await r.json()]
        lines = [json.loads(line) async for line in r.content if line.strip()]
        return r.headers["Content-Type"], lines


async def test_ollama_native_api(emulator_factory):
    emu = await emulator_factory(tokens_per_s=5000, trace_records=TRACE)
    root = f"http://127.0.0.1:{emu.port}"
    async with aiohttp.ClientSession() as s:
        # /api/chat streams NDJSON by default; the last line carries the counts
        ctype, lines = await _ndjson(s, root + "/api/chat", {"model": "llama3", "messages": _msg("short one")})
        assert ctype.startswith("application/x-ndjson")
        assert all(not ln["done"] for ln in lines[:-1]) and lines[-1]["done"] is True
        assert "".join(ln["message"]["content"] for ln in lines).split() == ["lorem", "ipsum", "dolor", "sit", "amet",
                                                                          "consectetur", "adipiscing", "elit", "sed",
                                                                          "do"] * 2
        assert lines[-1]["eval_count"] == 20 and lines[-1]["done_reason"] == "stop"
        assert lines[-1]["prompt_eval_count"] >= 1 and lines[-1]["model"] == "llama3"
        # "stream": false: one object; options.num_predict caps the answer
        _, (obj,) = await _ndjson(s, root + "/api/chat", {"model": "llama3", "messages": _msg("long one"),
                                                         "stream": False, "options": {"num_predict": 7}})
        assert obj["done"] is True and obj["eval_count"] == 7 and obj["done_reason"] == "length"
        assert obj["message"]["role"] == "assistant" and len(obj["message"]["content"].split()) == 7
        # /api/generate scores "prompt" and answers in "response"
        _, lines = await _ndjson(s, root + "/api/generate", {"model": "llama3", "prompt": "medium one"})
        assert "".join(ln["response"] for ln in lines).count(" ") == 120 and lines[-1]["eval_count"] == 120
        _, (obj,) = await _ndjson(s, root + "/api/generate", {"model": "llama3", "prompt": "medium one",
                                                             "stream": False, "options": {"num_predict": 1}})
        assert obj["eval_count"] == 1 and obj["response"] == " lorem"
        async with s.get(root + "/api/tags") as r:
            assert (await r.json())["models"][0]["name"] == "emulator"
    st = emu.stats()
    assert [o["api"] for o in st["order"]] == ["ollama-chat", "ollama-chat", "ollama-generate", "ollama-generate"]
    assert [o["stream"] for o in st["order"]] == [True, False, True, False]
    assert [o["hash"] for o in st["order"]] == [short_hash(t) for t in ("short one", "long one", "medium one",
                                                                         "medium one")]
    assert st["max_in_flight"] == 1 and st["served"] == 4


@pytest.mark.parametrize("props", [True, False])
async def test_props_reports_total_slots(emulator_factory, props):
    emu = await emulator_factory(slots=3, props=props)
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{emu.port}/props") as r:
            if props:
                assert r.status == 200 and (await r.json())["total_slots"] == 3
            else:
                assert r.status == 404
