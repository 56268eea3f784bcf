"""Privacy (DESIGN.md invariant 6): a canary prompt never reaches logs at any level,
metric labels or the text exposition, exception messages, or any file written.

Core level here; the LiteLLM proxy and the OpenAI wrapper are covered end to end in
the sections below (real proxy subprocess, real SDK, real emulator on 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import uuid
from pathlib import Path

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

from sjf_core import Prediction, Scheduler
from sjf_core.ext._hooks import hookimpl
from sjf_core.ext._metrics import PrometheusMetrics

CANARY_ID = uuid.uuid4().hex
CANARY = f"ZEBRA-CANARY-{CANARY_ID} please write a very long essay about privacy"
BACKEND = "http://127.0.0.1:9/v1"


def leaks(blob) -> bool:
    """True if ``blob`` (str or bytes) holds the canary or a recognisable piece of it."""
    if isinstance(blob, bytes):
        blob = blob.decode("utf-8", "replace")
    low = blob.lower()
    return CANARY_ID[:16] in low or CANARY_ID[16:] in low or "zebra-canary" in low


def canary_bodies(c: str = CANARY):
    """(endpoint, body) pairs carrying the canary in every scored position."""
    return [
        ("chat/completions", {"model": "m", "messages": [{"role": "user", "content": c}]}),
        ("chat/completions", {"model": "m", "messages": [
            {"role": "system", "content": c}, {"role": "user", "content": [{"type": "text", "text": c},
                                                                           {"type": "image_url", "image_url": {"url": c}}]}]}),
        ("chat/completions", {"model": "m", "messages": [{"role": "user", "content": c + " \ud800 lone surrogate"}]}),
        ("chat/completions", {"model": "m", "messages": [{"role": "user", "content": c * 20_000}]}),  # > 1 MB
        ("completions", {"model": "m", "prompt": [c, c]}),
        ("responses", {"model": "m", "input": c}),
        ("responses", {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": c}]}]}),
        ("embeddings", {"model": "m", "input": c}),
    ]


class TextEchoingPredictor:
    """A predictor whose errors quote the prompt (a badly written third-party model)."""

    def predict(self, text: str) -> Prediction:
        raise ValueError(f"cannot score {text!r}")


class TextEchoingPlugin:
    @hookimpl
    def sjf_predict(self, text):
        raise RuntimeError(f"plugin failed on {text}")


def list_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def assert_files_clean(files, label):
    for p in files:
        try:
            data = p.read_bytes()
        except OSError:
            continue
        assert not leaks(data), f"canary found in file written during the test ({label}): {p}"


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """cwd and the temp dir point into tmp_path; yields the directory to scan afterwards."""
    work = tmp_path / "cwd"
    tmp = tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp_path


async def test_core_never_leaks_the_prompt(sandbox, caplog):
    caplog.set_level(logging.DEBUG)  # root: every logger, every level
    for name in ("sjf_core", "litellm_sjf", "openai_sjf"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    reg = CollectorRegistry()
    metrics = PrometheusMetrics(reg)
    schedulers = [
        Scheduler(predictor="default", listeners=[metrics], plugins=False),
        Scheduler(predictor=TextEchoingPredictor(), listeners=[metrics], plugins=False),
        Scheduler(predictor="default", listeners=[metrics], plugins=[TextEchoingPlugin()]),
        Scheduler(predictor="/nonexistent/" + CANARY_ID[:8] + ".onnx", listeners=[metrics], plugins=False),
    ]
    errors: list[BaseException] = []
    for s in schedulers:
        for endpoint, body in canary_bodies():
            t = s.ticket(BACKEND, body, endpoint, headers={"x-sjf-priority": CANARY})
            try:
                await asyncio.wait_for(t.acquire(), 5)
                t.release(900)
            except BaseException as exc:  # noqa: BLE001 - collected and checked below
                errors.append(exc)
            # a waiter that times out
            holder = s.ticket(BACKEND, body, endpoint)
            await holder.acquire()
            waiter = s.ticket(BACKEND, body, endpoint)
            try:
                await waiter.acquire(timeout=0.001)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
            holder.release()
            assert s.queue(BACKEND).in_flight == 0 and s.queue(BACKEND).waiting == 0
    assert schedulers[1].predictor_errors > 0 and schedulers[2].predictor_errors > 0  # the error paths ran

    records = caplog.records
    assert records, "expected some log records (predictor errors are logged)"
    for r in records:
        text = r.getMessage() + (r.exc_text or "") + repr(r.args)
        if r.exc_info:
            text += logging.Formatter().formatException(r.exc_info)
        assert not leaks(text), f"canary in a log record of {r.name} at {r.levelname}"
    for exc in errors:
        assert not leaks(str(exc)) and not leaks(repr(exc))
    assert not leaks(generate_latest(reg)) and not leaks(generate_latest(REGISTRY))
    assert_files_clean(list_files(sandbox), "core")


OUR_LOGGERS = ("sjf_core", "litellm_sjf", "openai_sjf", "sjf_plugin_example")


def our_records(records):
    return [r for r in records if r.name.split(".")[0] in OUR_LOGGERS]


def assert_records_clean(records, label):
    for r in records:
        text = r.getMessage() + (r.exc_text or "") + repr(r.args)
        if r.exc_info:
            text += logging.Formatter().formatException(r.exc_info)
        assert not leaks(text), f"canary in a log record of {r.name} at {r.levelname} ({label})"


async def test_openai_wrapper_never_leaks_the_prompt(sandbox, caplog, emulator_factory):
    import openai

    import openai_sjf

    caplog.set_level(logging.DEBUG)
    for name in OUR_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG)
    emu = await emulator_factory(tokens_per_s=5000)
    reg = CollectorRegistry()
    sched = Scheduler(predictor="default", listeners=[PrometheusMetrics(reg)], plugins=False)
    raw = openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0)
    client = openai_sjf.wrap(raw, scheduler=sched)
    errors: list[BaseException] = []

    async def call(coro_fn):
        try:
            return await coro_fn()
        except Exception as exc:  # noqa: BLE001 - checked below
            errors.append(exc)

    msgs = [{"role": "user", "content": CANARY}]
    calls = [
        lambda: client.chat.completions.create(model="m", messages=msgs),
        lambda: client.chat.completions.create(model="m", messages=msgs, max_tokens=5),
        lambda: client.completions.create(model="m", prompt=[CANARY, CANARY]),
        lambda: client.responses.create(model="m", input=CANARY),
        lambda: client.post("/chat/completions", cast_to=object, body={"model": "m", "messages": msgs},
                            options={"timeout": 0.0001}),  # a timeout error path
        lambda: client.post("/chat/completions", cast_to=object, content=b'{"model": "m", "messages": ' + CANARY.encode(),
                            options={"headers": {"Content-Type": "application/json"}}),  # malformed JSON
    ]

    async def stream():
        s = await client.chat.completions.create(model="m", messages=msgs, stream=True)
        async for _ in s:
            break  # abort the stream early
        await s.close()

    await asyncio.gather(*(call(c) for c in calls), call(stream))

    def q_ok():
        return all(q.in_flight == 0 and q.waiting == 0 for q in sched.queues.values())

    # an orphan (the early-closed stream, a timed-out call) holds its slot until the wrapper's
    # idle probe of the backend returns (openai_sjf._orphans): wait for that, event-based
    for _ in range(3000):
        if q_ok():
            break
        await asyncio.sleep(0.005)
    assert q_ok() and sched.queues, "queues must be empty afterwards"
    assert errors, "the error paths (timeout, malformed JSON) must have run"
    for exc in errors:
        assert not leaks(str(exc)) and not leaks(repr(exc)), f"canary in {type(exc).__name__}"
    assert_records_clean(our_records(caplog.records), "wrapper")
    assert not leaks(generate_latest(reg)) and not leaks(generate_latest(REGISTRY))
    assert not leaks(json.dumps(emu.stats()))
    assert_files_clean(list_files(sandbox), "wrapper")
    await client.close()


SITECUSTOMIZE = '''
import logging, sys
_h = logging.StreamHandler(sys.stderr)
_h.setFormatter(logging.Formatter("SJFLOG %(name)s %(levelname)s %(message)s"))
for _n in ("sjf_core", "litellm_sjf", "openai_sjf"):
    _l = logging.getLogger(_n)
    _l.setLevel(logging.DEBUG)
    _l.addHandler(_h)
logging.getLogger("sjf_core").debug("debug logging of our packages is on")
'''


async def test_litellm_proxy_never_leaks_the_prompt(sandbox):
    """A real proxy with the plugin (our loggers at DEBUG to its stderr) and the prometheus
    callback; canary requests on every path (success, stream, aborted stream, queued
    disconnect, backend 500, mid-stream drop, malformed JSON, embeddings)."""
    import httpx

    from sjf_lab.emulator import EmulatorConfig, EmulatorThread, short_hash
    from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config

    site = sandbox / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    trace = [{"prompt": CANARY + " fault", "answer_tokens": 50, "fault": "500"},
             {"prompt": CANARY + " drop", "answer_tokens": 400, "fault": "drop-mid"},
             {"prompt": CANARY + " long", "answer_tokens": 3000},
             {"prompt": CANARY + " hold", "answer_tokens": 5, "fault": "hold"},
             {"prompt": CANARY + " queued", "answer_tokens": 50},
             {"prompt": CANARY, "answer_tokens": 120}]
    emu = EmulatorThread(EmulatorConfig(tokens_per_s=3000, trace_records=trace))
    status_port = free_port()
    cfg = proxy_config({"emu": [emu.base_url]}, plugin=True,
                       litellm_settings={"callbacks": ["prometheus", "litellm_sjf.proxy_handler_instance"]})
    proxy = LiteLLMProxy(cfg, env={"PYTHONPATH": str(site), "TMPDIR": str(sandbox / "tmp"), "SJF_PLUGINS": "none",
                                   "SJF_STATUS_PORT": str(status_port)})
    bodies: list[bytes] = []
    try:
        await asyncio.get_running_loop().run_in_executor(None, proxy.start)
        url = proxy.openai_base_url
        auth = {"Authorization": f"Bearer {proxy.master_key}"}

        def chat(text, **kw):
            return {"model": "emu", "messages": [{"role": "user", "content": text}], **kw}

        async with httpx.AsyncClient(timeout=60, headers=auth) as c:
            async def post(path, **kw):
                try:
                    r = await c.post(url + path, **kw)
                    bodies.append(r.content)
                except httpx.HTTPError as exc:
                    bodies.append(str(exc).encode())

            async def aborted_stream():
                async with c.stream("POST", url + "/chat/completions", json=chat(CANARY + " long", stream=True)) as r:
                    async for _ in r.aiter_raw():
                        break  # client goes away mid-stream

            async def queue_status():
                st = json.loads((await c.get(f"http://127.0.0.1:{status_port}/sjf/status")).text)
                return st["backends"].get(emu.base_url, {"waiting": 0, "stats": {}})

            async def until(cond, what):
                for _ in range(1200):  # an event-based wait (up to 60 s), not a timing assertion
                    got = cond()
                    if await got if asyncio.iscoroutine(got) else got:
                        return
                    await asyncio.sleep(0.05)
                raise AssertionError(f"never happened: {what}")

            async def waiting():
                return (await queue_status())["waiting"] >= 1

            async def cancelled():
                return (await queue_status())["stats"].get("cancelled", 0) >= 1

            # a queued disconnect: the backend is held, a request queues, its client leaves
            holder = asyncio.create_task(post("/chat/completions", json=chat(CANARY + " hold")))
            await until(lambda: emu.stats()["held"] == 1, "the holder took the slot")
            queued = asyncio.create_task(c.post(url + "/chat/completions", json=chat(CANARY + " queued")))
            await until(waiting, "a request queued behind the holder")
            queued.cancel()  # the client leaves while queued
            await until(cancelled, "the queued request left the queue")
            emu.release_holds()
            await holder

            await asyncio.gather(
                post("/chat/completions", json=chat(CANARY + " long")),
                post("/chat/completions", json=chat(CANARY)),
                post("/chat/completions", json=chat(CANARY, stream=True)),
                aborted_stream(),
                post("/chat/completions", json=chat(CANARY + " fault")),
                post("/chat/completions", json=chat(CANARY + " drop", stream=True)),
                post("/completions", json={"model": "emu", "prompt": [CANARY, CANARY]}),
                post("/responses", json={"model": "emu", "input": [{"role": "user", "content": CANARY}]}),
                post("/embeddings", json={"model": "emu", "input": CANARY}),
                post("/chat/completions", content=b'{"model": "emu", "messages": [' + CANARY.encode(),
                     headers={"content-type": "application/json"}),
                post("/chat/completions", json=chat(CANARY * 15_000)),  # ~1 MB
            )
            # let drains and release hooks finish, then read everything the proxy exposes
            for _ in range(100):
                if emu.stats()["in_flight"] == 0:
                    break
                await asyncio.sleep(0.1)
            metrics = (await c.get(proxy.base_url + "/metrics/")).text
            status = (await c.get(f"http://127.0.0.1:{status_port}/sjf/status")).text
        assert emu.stats()["received"] >= 8
        # the paths above really ran: the queued client left before the backend saw it, and
        # the aborted stream was cut off at the backend before its answer was done
        order = emu.stats()["order"]
        assert short_hash(CANARY + " queued") not in [o["hash"] for o in order]
        long_streams = [o for o in order if o["hash"] == short_hash(CANARY + " long") and o["stream"]]
        assert [o["outcome"] for o in long_streams] == ["disconnected"], long_streams
        st = json.loads(status)
        assert st["backends"][emu.base_url]["stats"]["cancelled"] >= 1
        assert "sjf_admissions_total" in metrics and not leaks(metrics)
        assert status and not leaks(status)
        log = proxy.log_text()
        assert "SJFLOG sjf_core DEBUG debug logging of our packages is on" in log  # DEBUG capture really on
        for line in log.splitlines():
            assert not leaks(line), f"canary in the proxy's stdout/stderr: {line[:200]}"
        assert_files_clean(list_files(proxy.workdir), "proxy workdir")
        assert_files_clean(list_files(sandbox), "proxy TMPDIR")
        assert not leaks(json.dumps(emu.stats()))
        # error bodies the plugin proxy sent (500 from the backend, malformed JSON) name no prompt text
        errors = [b for b in bodies if b.startswith(b'{"error"')]
        assert errors, "the backend-500 and malformed-JSON paths must have produced error bodies"
        for b in errors:
            assert not leaks(b), b[:300]
    finally:
        await asyncio.get_running_loop().run_in_executor(None, proxy.stop)
        emu.stop()


def test_training_log_stores_features_and_token_counts_only(sandbox, caplog):
    """The opt-in training log (sjf_lab.training_log) never stores prompt text."""
    from sjf_core import load_predictor
    from sjf_lab.training_log import TrainingLogWriter

    caplog.set_level(logging.DEBUG)
    predictor = load_predictor()
    path = sandbox / "cwd" / "logs" / "train.jsonl"
    with TrainingLogWriter(path) as w:
        assert w.write_observation(predictor, CANARY, 812, model="llama3")
        assert w.write_observation(predictor, CANARY + " \ud800" + "x" * 100_000, 7)
        # misuse: text where features belong, or as the token count, is refused, not written
        assert not w.write(CANARY, predictor.info.layout, 5)
        assert not w.write(predictor.layout.extract(CANARY), predictor.info.layout, CANARY)
        assert not w.write(predictor.layout.extract(CANARY), CANARY, 5)
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    allowed = {"v", "ts", "layout", "completion_tokens", "features", "features_sparse", "source", "model"}
    for line, tokens in zip(lines, (812, 7)):
        rec = json.loads(line)
        assert set(rec) <= allowed
        assert rec["completion_tokens"] == tokens
        feats = rec.get("features") or rec["features_sparse"]["val"]
        assert all(isinstance(v, (int, float)) for v in feats)
    assert not leaks(path.read_bytes())
    assert (path.stat().st_mode & 0o777) == 0o600
    assert_records_clean(caplog.records, "training log")
    assert_files_clean(list_files(sandbox), "training log")


async def test_length_memory_keeps_no_prompt_text(sandbox, caplog, redis_url, monkeypatch):
    """The online length memory (issue 14): its local store, neighbour ring, persisted file and
    Redis keys hold digests and numbers only; the canary (as prompt, system prompt, model
    name and API key hash) is in none of them, nor in the logs."""
    import numpy as np
    import redis

    from sjf_core.memory import LengthMemory

    caplog.set_level(logging.DEBUG)
    path = sandbox / "memory.npz"
    monkeypatch.setenv("SJF_MEMORY_PATH", str(path))
    prefix = "priv-" + uuid.uuid4().hex[:8]
    from sjf_core.config import SchedulerConfig

    schedulers = [Scheduler(SchedulerConfig.from_env(), plugins=False),  # default memory, persistence on through the env
                  Scheduler(plugins=False, redis_url=redis_url, redis_options={"prefix": prefix})]
    bodies = [b for _, b in canary_bodies()] + [
        {"model": CANARY, "metadata": {"user_api_key_hash": CANARY}, "max_tokens": 7,
         "messages": [{"role": "system", "content": CANARY}, {"role": "user", "content": CANARY + "\n>" + CANARY}]}]
    for s in schedulers:
        assert s.memory is not None
        for i, body in enumerate(bodies):
            for tokens in (12, 900):
                t = s.ticket(BACKEND + s.memory.store.__class__.__name__, body)
                await asyncio.wait_for(t.acquire(), 10)
                if hasattr(t, "arelease"):
                    await t.arelease(tokens)
                else:
                    t.release(tokens)
            s.predict(body)
        assert s.memory.counters["observed"] > 0 and s.memory.flush(10)
        mem = s.memory
        local = getattr(mem.store, "local", mem.store)
        for k, v in local.items():
            assert isinstance(k, bytes) and len(k) == 16 and all(isinstance(x, float) for x in v)
            assert not leaks(k)
        for arr in (mem.ring.points, mem.ring.groups, mem.ring.resid):
            assert arr.dtype.kind in "fi" and not leaks(arr.tobytes())
        assert not leaks(json.dumps(mem.status()))
        assert not leaks(repr(list(mem.window)))
    schedulers[0].memory.save()
    assert path.is_file()
    with np.load(path, allow_pickle=False) as z:
        assert all(z[f].dtype.kind in "uif" for f in z.files)
    r = redis.Redis.from_url(redis_url)
    keys = list(r.scan_iter(match="{" + prefix + ":mem}*"))
    assert keys, "the Redis memory wrote nothing"
    for k in keys:
        assert not leaks(k)
        if r.type(k) == b"hash":
            for f, v in r.hgetall(k).items():
                assert f.decode() in ("n", "sz", "sd", "szz", "szd", "sdd") and float(v) == float(v)
        else:
            for _id, fields in r.xrange(k):
                assert set(fields) == {b"w", b"g", b"r", b"p"} and len(fields[b"p"]) == 128
                assert not any(leaks(v) for v in fields.values())
    for rec in caplog.records:
        assert not leaks(rec.getMessage() + (rec.exc_text or "") + repr(rec.args))
    assert_files_clean(list_files(sandbox), "memory")
