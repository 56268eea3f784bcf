"""Issue 12, LiteLLM side: a slot is free exactly when the backend is, on every path.

A real LiteLLM proxy subprocess with the plugin, real clients (openai SDK, httpx) and the
emulator (a real HTTP server) as backends. Every figure comes from the emulator's own
per-request records (``t_in`` / ``t_out``): :func:`sjf_lab.emulator.max_overlap` is the
backend's real concurrency of user requests, and the idle gap is the time between an
orphaned answer's end and the next request's arrival at the backend. The gap bound
(≤ 1 s) is an outcome check of "no idle backend with a full queue" (the retired
estimate left it idle 2–20 s), not a latency micro-assertion.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import openai
import pytest

from sjf_lab.emulator import EmulatorThread, max_overlap, short_hash
from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config
from sjf_core._scheduler import backend_key

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

UNDER = "Hi!"  # the shipped model predicts ~24 answer tokens; this backend answers 1000
OVER = ("Write a complete chess engine in C++ with move generation, alpha-beta search, a transposition table "
        "and a UCI interface.")  # predicted ~900 tokens; this backend answers 300
HOLD = "Please hold the backend for a moment."
BURST = [
    "What is the boiling point of water at sea level?",
    "Who wrote the novel Pride and Prejudice?",
    "Explain how a hash table handles collisions.",
    "Summarize the main causes of the First World War in a few paragraphs.",
    "Write a long short story of at least 2000 words about a lighthouse keeper who discovers a message in a bottle.",
    "Define photosynthesis in one sentence.",
]
TRACE = ([{"prompt": UNDER, "answer_tokens": 1000}, {"prompt": OVER, "answer_tokens": 300},
          {"prompt": "ok short", "answer_tokens": 30}, {"prompt": HOLD, "answer_tokens": 5, "fault": "hold"},
          {"prompt": "fail 500", "answer_tokens": 10, "fault": "500"},
          {"prompt": "a long stream", "answer_tokens": 1000}]
         + [{"prompt": p, "answer_tokens": 12} for p in BURST])
GAP_MAX_S = 1.0


async def until(pred, timeout=60.0, every=0.02):
    """Poll ``pred`` until true or ``timeout`` s (a wait, not a timing assertion)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                return True
        except (httpx.HTTPError, KeyError, IndexError):
            pass
        await asyncio.sleep(every)
    return pred()


class H:
    def __init__(self, proxy, status_port, emus, bases):
        self.proxy, self.status_port, self.emus, self.bases = proxy, status_port, emus, bases

    def status(self) -> dict:
        return httpx.get(f"http://127.0.0.1:{self.status_port}/sjf/status", timeout=10).json()

    def queue(self, group: str) -> dict:
        return self.status()["backends"].get(self.key(group), {"in_flight": 0, "waiting": 0, "stats": {}})

    def key(self, group: str) -> str:
        return backend_key(self.bases[group])

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.proxy.openai_base_url, api_key=self.proxy.master_key, max_retries=0,
                                  timeout=120, http_client=openai.DefaultAsyncHttpxClient())

    async def chat(self, group, prompt, stream=False, **kw):
        async with self.client() as c:
            r = await c.chat.completions.create(model=group, messages=[{"role": "user", "content": prompt}],
                                                stream=stream, **kw)
            if not stream:
                return r.usage.completion_tokens
            return sum([len((ch.choices[0].delta.content or "").split()) async for ch in r if ch.choices])

    async def raw(self, group, body, timeout=120):
        async with httpx.AsyncClient(timeout=timeout) as hc:
            return await hc.post(self.proxy.openai_base_url + "/chat/completions",
                                 headers={"Authorization": f"Bearer {self.proxy.master_key}"},
                                 json={"model": group, **body})

    def idle(self, group: str, emu: str) -> bool:
        q = self.queue(group)
        st = self.emus[emu].stats()
        return q["in_flight"] == 0 and q["waiting"] == 0 and st["in_flight"] == 0 and st["probes_in_flight"] == 0

    def dump(self) -> str:
        return json.dumps({"plugin": self.status(), "emulators": {k: e.stats() for k, e in self.emus.items()}},
                          indent=1, default=str)[:8000]


def _v1(e, host="127.0.0.1"):
    return f"http://{host}:{e.port}/v1"


def _start(emus, deps, sjf_config=None, tmp=None):
    """A proxy with the plugin over ``deps``: group -> (emulator name, provider, api_base)."""
    env = {"SJF_TAU": "off", "SJF_PROMOTION": "strict", "SJF_LEASE_TTL_S": "900"}
    if sjf_config is not None:
        f = tmp / "sjf.yaml"
        f.write_text(json.dumps(sjf_config))
        env["SJF_CONFIG"] = str(f)
    cfg = proxy_config({}, plugin=True, router_settings={"disable_cooldowns": True})
    cfg["model_list"] = [{"model_name": g, "litellm_params": {"model": f"{prov}/m-{g}", "api_base": base,
                                                               "api_key": "sk-deployment"}}
                         for g, (_, prov, base) in deps.items()]
    status_port = free_port()
    proxy = LiteLLMProxy(cfg, env={"SJF_STATUS_PORT": str(status_port), **env})
    proxy.start()
    return H(proxy, status_port, emus, {g: base for g, (_, _, base) in deps.items()})


@pytest.fixture(scope="module")
def bt():
    """Default plugin settings (no SJF_CONFIG: these tests also run against the code before
    issue 12, where they fail). keep: generates on after a disconnect; stop: stops;
    lcp: llama-cpp-python (streams stop, non-streamed calls go on); oll: reached through
    ``ollama_chat/`` at its root URL; oai: the same through ``openai/``; dup: one emulator
    named twice (``localhost`` and ``127.0.0.1``); held: for rejections and errors."""
    emus = {
        "keep": EmulatorThread(tokens_per_s=200, on_disconnect="continue", trace_records=TRACE),
        "stop": EmulatorThread(tokens_per_s=200, on_disconnect="stop", trace_records=TRACE),
        "lcp": EmulatorThread(tokens_per_s=200, on_disconnect="stop-streams", trace_records=TRACE),
        "oll": EmulatorThread(tokens_per_s=400, on_disconnect="continue", trace_records=TRACE),
        "oai": EmulatorThread(tokens_per_s=400, on_disconnect="continue", trace_records=TRACE),
        "dup": EmulatorThread(tokens_per_s=400, trace_records=TRACE),
        "held": EmulatorThread(tokens_per_s=400, trace_records=TRACE),
    }
    h = None
    try:
        h = _start(emus, {
            "keep": ("keep", "openai", _v1(emus["keep"])),
            "stop": ("stop", "openai", _v1(emus["stop"])),
            "lcp": ("lcp", "openai", _v1(emus["lcp"])),
            "oll": ("oll", "ollama_chat", f"http://localhost:{emus['oll'].port}"),
            "oai": ("oai", "openai", _v1(emus["oai"])),
            "lh": ("dup", "openai", _v1(emus["dup"], "localhost")),
            "ip": ("dup", "openai", _v1(emus["dup"])),
            "held": ("held", "openai", _v1(emus["held"])),
        })
        yield h
    finally:
        if h is not None:
            h.proxy.stop()
        for e in emus.values():
            e.stop()


@pytest.fixture(scope="module")
def bt_cfg(tmp_path_factory):
    """The new SJF_CONFIG keys: a named queue over two emulators, ``slots: auto`` (one
    emulator answers /props with 2, one cannot say), and one backend spelled twice with
    different slots (a start-up warning; the fewest win)."""
    emus = {"boxa": EmulatorThread(tokens_per_s=400, trace_records=TRACE),
            "boxb": EmulatorThread(tokens_per_s=400, trace_records=TRACE),
            "auto2": EmulatorThread(tokens_per_s=400, slots=2, trace_records=TRACE),
            "autonone": EmulatorThread(tokens_per_s=400, slots=1, props=False, trace_records=TRACE),
            "dup": EmulatorThread(tokens_per_s=400, slots=2, trace_records=TRACE)}
    deps = {g: (g, "openai", _v1(emus[g])) for g in ("boxa", "boxb", "auto2", "autonone")}
    deps["lh"] = ("dup", "openai", _v1(emus["dup"], "localhost"))
    deps["ip"] = ("dup", "openai", _v1(emus["dup"]))
    h = None
    try:
        h = _start(emus, deps, {"backends": {
            deps["boxa"][2]: {"queue": "gpu-box-1"}, deps["boxb"][2]: {"queue": "gpu-box-1"},
            deps["auto2"][2]: {"slots": "auto"}, deps["autonone"][2]: {"slots": "auto"},
            deps["lh"][2]: {"slots": 2}, deps["ip"][2]: {"slots": 1}}}, tmp_path_factory.mktemp("sjf"))
        yield h
    finally:
        if h is not None:
            h.proxy.stop()
        for e in emus.values():
            e.stop()


async def _orphan_then_next(h: H, group: str, emu_name: str, prompt: str, stream: bool):
    """A client leaves ``prompt`` mid-answer while a short request waits for the slot.
    Returns (orphan record, next record, all records)."""
    emu = h.emus[emu_name]
    assert await until(lambda: h.idle(group, emu_name)), h.dump()
    emu.reset()
    assert await h.chat(group, "ok short") == 30  # a measured speed, as the retired estimate used
    body = {"messages": [{"role": "user", "content": prompt}], "stream": stream}
    orphan = asyncio.create_task(h.raw(group, body))
    assert await until(lambda: emu.stats()["generating"] == 1 and emu.stats()["order"][-1]["hash"]
                       == short_hash(prompt)), h.dump()
    nxt = asyncio.create_task(h.chat(group, "ok short"))
    assert await until(lambda: h.queue(group)["waiting"] == 1), h.dump()
    orphan.cancel()  # the client leaves mid-answer
    with pytest.raises(asyncio.CancelledError):
        await orphan
    assert await asyncio.wait_for(nxt, 120) == 30
    assert await until(lambda: h.idle(group, emu_name) and h.status()["draining"] == 0), h.dump()
    recs = emu.stats()["order"]
    users = [r for r in recs if not r["probe"]]
    o = next(r for r in users if r["hash"] == short_hash(prompt))
    n = [r for r in users if r["hash"] == short_hash("ok short") and r["t_in"] > o["t_in"]][0]
    assert o["outcome"] == "disconnected", "the client must have left before the answer was done"
    return o, n, recs


@pytest.mark.parametrize("emu_name", ["keep", "stop", "lcp"])
@pytest.mark.parametrize("prompt", [UNDER, OVER], ids=["under-predicted", "over-predicted"])
async def test_orphaned_non_streamed_call_frees_the_slot_exactly_when_the_backend_is_idle(bt, emu_name, prompt):
    o, n, recs = await _orphan_then_next(bt, emu_name, emu_name, prompt, stream=False)
    gap = n["t_in"] - o["t_out"]
    print(f"{emu_name} {'under' if prompt == UNDER else 'over'}: max_in_flight={max_overlap(recs)} "
          f"orphan_tokens={o['tokens']} gap_s={gap:.3f}")
    assert max_overlap(recs) == 1, bt.dump()  # never the orphan and the next request at once
    assert 0 <= gap <= GAP_MAX_S, (gap, bt.dump())  # and no idle backend while a request waits
    assert max_overlap(recs, probes=True) <= 2  # the probe queued behind the orphan, at most one
    assert bt.emus[emu_name].stats()["max_probes_in_flight"] == 1


@pytest.mark.parametrize("emu_name", ["keep", "lcp"])
async def test_orphaned_stream_frees_the_slot_exactly_when_the_backend_is_idle(bt, emu_name):
    """keep: generates on for nobody; lcp (llama-cpp-python): a stream stops at its next chunk."""
    o, n, recs = await _orphan_then_next(bt, emu_name, emu_name, "a long stream", stream=True)
    gap = n["t_in"] - o["t_out"]
    print(f"{emu_name} stream: max_in_flight={max_overlap(recs)} gap_s={gap:.3f}")
    assert max_overlap(recs) == 1 and 0 <= gap <= GAP_MAX_S, (gap, bt.dump())
    if emu_name == "lcp":  # it stopped: nothing was generated for nobody to its end
        assert bt.emus[emu_name].stats()["completion_tokens"] < 30 + 1000 + 30


async def test_probes_are_counted_and_never_reach_users(bt):
    await _orphan_then_next(bt, "keep", "keep", OVER, stream=False)
    st = bt.status()
    assert st["counters"]["orphan_probes"] >= 1 and st["counters"]["released_probe"] >= 1
    assert st["counters"]["probe_failed"] == 0
    probes = st["probes"][bt.key("keep")]
    assert probes["sent"] >= 1 and probes["ok"] == probes["sent"] and probes["error"] == probes["timeout"] == 0
    # the probe is our own fixed 1-token request with the deployment's model, never a user's prompt
    recs = [r for r in bt.emus["keep"].stats()["order"] if r["probe"]]
    assert recs and all(r["tokens"] == 1 and r["hash"] == short_hash(".") for r in recs)


# ---- Ollama's native API vs OpenAI-compatible: same order, never above slots ------------------
async def _burst(h: H, group: str, emu_name: str, ordered: list[str]) -> list[str]:
    emu = h.emus[emu_name]
    assert await until(lambda: h.idle(group, emu_name)), h.dump()
    emu.reset()
    holder = asyncio.create_task(h.chat(group, HOLD))
    assert await until(lambda: emu.stats()["held"] == 1), h.dump()
    tasks = []
    for i, p in enumerate(reversed(ordered)):  # FCFS would serve them in this (descending) order
        tasks.append(asyncio.create_task(h.chat(group, p, stream=(i % 2 == 0))))
        await asyncio.sleep(0.05)
    assert await until(lambda: h.queue(group)["waiting"] == len(ordered)), h.dump()
    emu.release_holds()
    results = await asyncio.gather(holder, *tasks)
    assert results == [5] + [12] * len(ordered)
    st = emu.stats()
    assert st["max_in_flight"] == 1 and max_overlap(st["order"]) == 1, h.dump()
    return [o["hash"] for o in st["order"] if not o["probe"]]


async def test_same_burst_through_ollama_chat_and_openai_same_order(bt):
    from sjf_core.predict._meta import request_meta
    from sjf_core.policy._policies import make_policy
    from sjf_core.predict._predictor import load_predictor

    p, pol = load_predictor(), make_policy("sjf-tokens")
    keys = {t: pol.key(p.predict(t), request_meta({"messages": [{"role": "user", "content": t}]})) for t in BURST}
    ordered = sorted(BURST, key=keys.get)
    served_ollama = await _burst(bt, "oll", "oll", ordered)
    served_openai = await _burst(bt, "oai", "oai", ordered)
    expect = [short_hash(HOLD)] + [short_hash(t) for t in ordered]
    print("ollama_chat order == openai order:", served_ollama == served_openai)
    assert served_ollama == served_openai == expect
    assert {o["api"] for o in bt.emus["oll"].stats()["order"]} == {"ollama-chat"}
    assert {o["api"] for o in bt.emus["oai"].stats()["order"]} == {"chat"}


async def test_ollama_orphans_are_probed_through_api_generate(bt):
    for stream in (False, True):
        o, n, recs = await _orphan_then_next(bt, "oll", "oll", UNDER, stream=stream)
        assert max_overlap(recs) == 1 and 0 <= n["t_in"] - o["t_out"] <= GAP_MAX_S, bt.dump()
        probes = [r for r in recs if r["probe"]]
        assert probes and all(r["api"] == "ollama-generate" and r["tokens"] == 1 for r in probes)
        assert o["api"] == "ollama-chat" and o["stream"] is stream


# ---- one queue per real backend ---------------------------------------------------------------
async def test_localhost_and_127_spellings_share_one_queue(bt):
    emu = bt.emus["dup"]
    emu.reset()
    got = await asyncio.gather(*[bt.chat("lh" if i % 2 else "ip", "ok short", stream=(i % 3 == 0)) for i in range(6)])
    assert got == [30] * 6
    st = emu.stats()
    print("localhost + 127.0.0.1, 6 concurrent: max_in_flight =", st["max_in_flight"])
    assert st["served"] == 6 and st["max_in_flight"] == 1 and max_overlap(st["order"]) == 1
    assert bt.key("lh") == bt.key("ip") and bt.status()["backends"][bt.key("ip")]["slots"] == 1


async def test_one_backend_with_two_slot_settings_warns_and_takes_the_fewest(bt_cfg):
    emu = bt_cfg.emus["dup"]  # really 2 slots, but the config says 2 and 1 for its two spellings
    got = await asyncio.gather(*[bt_cfg.chat("lh" if i % 2 else "ip", "ok short") for i in range(4)])
    assert got == [30] * 4 and emu.stats()["max_in_flight"] == 1
    assert "set different slots" in bt_cfg.proxy.log_text()  # the start-up warning


async def test_a_named_queue_is_shared_by_two_backends(bt_cfg):
    bt = bt_cfg
    a, b = bt.emus["boxa"], bt.emus["boxb"]
    a.reset()
    b.reset()
    got = await asyncio.gather(*[bt.chat("boxa" if i % 2 else "boxb", "ok short") for i in range(6)])
    assert got == [30] * 6
    assert max_overlap(a.stats()["order"] + b.stats()["order"]) == 1
    assert bt.status()["backends"]["queue:gpu-box-1"]["stats"]["dispatched"] >= 6


# ---- slots: auto --------------------------------------------------------------------------------
async def test_slots_auto_asks_the_backend_and_falls_back_to_one(bt_cfg):
    bt = bt_cfg
    e2, e1 = bt.emus["auto2"], bt.emus["autonone"]
    got = await asyncio.gather(*[bt.chat(g, "ok short") for g in ("auto2", "autonone") for _ in range(4)])
    assert got == [30] * 8
    backends = bt.status()["backends"]
    assert backends[bt.key("auto2")]["slots"] == 2 and backends[bt.key("autonone")]["slots"] == 1
    assert e2.stats()["max_in_flight"] == 2 and e1.stats()["max_in_flight"] == 1
    assert "slots: auto for" in bt.proxy.log_text() and "using 1 slot" in bt.proxy.log_text()


# ---- a slot only for what can reach the backend -------------------------------------------------
@pytest.mark.parametrize("messages", ["hi", [{"role": "user", "content": [1, 2]}], [{"role": "user", "content": 5}],
                                      [{"role": "user", "content": [{"type": "text", "text": "x"}, "y"]}]],
                         ids=["string", "list-of-numbers", "number", "part-not-object"])
async def test_requests_litellm_rejects_take_no_slot(bt, messages):
    h, emu = bt, bt.emus["held"]
    assert await until(lambda: h.idle("held", "held")), h.dump()
    before = h.status()["counters"].get("rejected_early", 0)
    received = emu.stats()["received"]
    holder = asyncio.create_task(h.chat("held", HOLD))
    assert await until(lambda: emu.stats()["held"] == 1), h.dump()
    bad = asyncio.create_task(h.raw("held", {"messages": messages}))
    done, _ = await asyncio.wait({bad}, timeout=30)  # generous: it is answered at once, or only after the hold
    assert done, "a request LiteLLM rejects must not wait behind the busy backend"
    assert 400 <= bad.result().status_code < 600
    assert emu.stats()["held"] == 1  # answered while the backend was still busy
    assert h.status()["counters"]["rejected_early"] == before + 1
    emu.release_holds()
    assert await holder == 5
    assert emu.stats()["received"] == received + 1  # only the held request reached the backend


async def test_a_backend_error_frees_the_slot_from_the_request_path(bt):
    h, emu = bt, bt.emus["held"]
    assert await until(lambda: h.idle("held", "held")), h.dump()
    c0 = h.status()["counters"]
    holder = asyncio.create_task(h.chat("held", HOLD))
    assert await until(lambda: emu.stats()["held"] == 1), h.dump()
    failing = asyncio.create_task(h.raw("held", {"messages": [{"role": "user", "content": "fail 500"}]}))
    assert await until(lambda: h.queue("held")["waiting"] == 1), h.dump()
    nxt = asyncio.create_task(h.chat("held", "ok short"))
    assert await until(lambda: h.queue("held")["waiting"] == 2), h.dump()
    emu.release_holds()
    assert await holder == 5 and (await failing).status_code >= 500 and await nxt == 30
    assert await until(lambda: h.idle("held", "held")), h.dump()
    c1 = h.status()["counters"]
    assert c1["released_failure"] == c0["released_failure"] + 1, h.dump()
    assert c1["released_backup"] == c0["released_backup"], "the background logger must not be the one that frees it"


# ---- start-up checks (pure) ---------------------------------------------------------------------
def test_startup_warnings():
    from litellm_sjf.settings import PluginSettings
    from litellm_sjf._startup import config_warnings

    s = PluginSettings(backend_on_disconnect={"http://127.0.0.1:11434/v1": "drain"}).validate()
    cfg = {"model_list": [
        {"model_name": "a", "litellm_params": {"model": "anthropic/claude", "api_base": "http://localhost:11434"}},
        {"model_name": "o", "litellm_params": {"model": "ollama_chat/llama3", "api_base": "http://localhost:11434"}},
        {"model_name": "b", "litellm_params": {"model": "openai/x", "api_base": "http://127.0.0.1:8001/v1",
                                               "max_parallel_requests": 1}},
        {"model_name": "c", "litellm_params": {"model": "openai/y", "api_base": "http://localhost:8001",
                                               "max_parallel_requests": 4}}],
        "general_settings": {}}
    w = config_warnings(s, cfg)
    assert len(w) == 3, w
    assert "cancel_on_disconnect" in w[0]
    assert "drain" in w[1] and "anthropic" in w[1]
    assert "max_parallel_requests" in w[2]
    cfg["general_settings"] = {"cancel_on_disconnect": True}
    cfg["model_list"] = cfg["model_list"][1:2]
    assert config_warnings(PluginSettings().validate(), cfg) == []
    assert config_warnings(PluginSettings().validate(), None) == []


def test_settings_queue_slots_auto_and_retired_keys(tmp_path):
    from litellm_sjf.settings import load_settings

    f = tmp_path / "sjf.yaml"
    f.write_text("slots: auto\norphan_grace_s: 2\nbackends:\n"
                 "  http://localhost:1/v1: {queue: box, slots: 2}\n  http://127.0.0.2:9: {queue: box, slots: 3}\n")
    s = load_settings({"SJF_CONFIG": str(f)})
    assert s.slots == "auto" and s.retired == ["orphan_grace_s"]
    assert s.queue_key("http://127.0.0.1:1") == s.queue_key("http://127.0.0.2:9/v1/") == "queue:box"
    assert s.slots_for("http://127.0.0.2:9") == 2 and any("different slots" in w for w in s.warnings)
    assert s.slots_for("http://elsewhere:5/v1") == "auto"
    with pytest.raises(ValueError, match="slots"):
        load_settings({"SJF_SLOTS": "many"})


def test_startup_warnings_in_a_real_proxy(tmp_path):
    """A proxy started without cancel_on_disconnect and with a drain backend behind a
    provider not known to be drainable logs one clear warning for each at start-up."""
    sjf = tmp_path / "sjf.yaml"
    sjf.write_text(json.dumps({"backends": {"http://127.0.0.1:9/v1": {"on_disconnect": "drain"}}}))
    cfg = proxy_config({}, plugin=True, cancel_on_disconnect=False)
    cfg["model_list"] = [{"model_name": "x", "litellm_params": {"model": "anthropic/claude-x",
                                                                "api_base": "http://localhost:9", "api_key": "k"}}]
    with LiteLLMProxy(cfg, env={"SJF_CONFIG": str(sjf)}) as proxy:
        log = proxy.log_text()
    lines = [ln for ln in log.splitlines() if "litellm_sjf:" in ln]
    assert sum("cancel_on_disconnect is not true" in ln for ln in lines) == 1, log[-3000:]
    assert sum("not known to be drainable" in ln for ln in lines) == 1, log[-3000:]
