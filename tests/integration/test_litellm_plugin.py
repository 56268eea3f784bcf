"""litellm_sjf end to end: a real LiteLLM proxy subprocess with the plugin, the real
openai SDK and httpx as clients, and the serial backend emulator as the backend.

One proxy serves the module's main tests (τ off, so the order is pure predicted SJF);
a second one, with a short fixed τ, serves the τ-promotion test. Ordering is checked
against the shipped predictor, evaluated in the test itself.
"""

from __future__ import annotations

import asyncio
import json
import time

from pathlib import Path

import httpx
import openai
import pytest
import yaml

from sjf_lab.emulator import EmulatorThread, short_hash
from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# SJF burst prompts (our own words). Their true answers are short so the burst drains fast;
# only their *predicted* order matters, and it is computed below with the shipped model.
BURST = [
    "What is the boiling point of water at sea level?",
    "Who wrote the novel Pride and Prejudice?",
    "Explain how a hash table handles collisions.",
    "Summarize the main causes of the First World War in a few paragraphs.",
    "Write a detailed step-by-step tutorial on building a web scraper in Python, with complete code and "
    "explanations for each part.",
    "Write a long short story of at least 2000 words about a lighthouse keeper who discovers a message in a bottle.",
    "Define photosynthesis in one sentence.",
    "Implement a full-featured command line todo application in Rust with persistent storage, unit tests and "
    "documentation.",
]
HOLD = "Please hold the backend for a moment."  # fault "hold": occupies the slot until released
TRACE = (
    [{"prompt": p, "answer_tokens": 12} for p in BURST]
    + [{"prompt": HOLD, "answer_tokens": 5, "fault": "hold"},
       {"prompt": "ok short", "answer_tokens": 30},
       {"prompt": "ok long stream", "answer_tokens": 300},
       {"prompt": "fail 500", "answer_tokens": 10, "fault": "500"},
       {"prompt": "drop now", "answer_tokens": 10, "fault": "drop"},
       {"prompt": "drop midway", "answer_tokens": 200, "fault": "drop-mid"},
       {"prompt": "abandoned stream", "answer_tokens": 600},
       {"prompt": "abandoned while queued", "answer_tokens": 10},
       {"prompt": "abandoned non-stream", "answer_tokens": 2400},
       {"prompt": "two slots", "answer_tokens": 150},
       {"prompt": "a very long stream", "answer_tokens": 2000}]
)


def _predicted_keys(prompts, policy: str):
    """Each prompt's ordering key under the plugin's policy, from the shipped predictor
    (the same model file the proxy loads); lower is served sooner."""
    from sjf_core.predict._meta import request_meta
    from sjf_core.policy._policies import make_policy
    from sjf_core.predict._predictor import load_predictor

    p, pol = load_predictor(), make_policy(policy)
    return {t: pol.key(p.predict(t), request_meta({"messages": [{"role": "user", "content": t}]})) for t in prompts}


async def until(pred, timeout=60.0, every=0.05):
    """Poll ``pred`` until true or ``timeout`` s (a wait, not a timing assertion)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                return True
        except (httpx.HTTPError, KeyError):
            pass
        await asyncio.sleep(every)
    return pred()


class Harness:
    def __init__(self, proxy: LiteLLMProxy, status_port: int, emus: dict[str, EmulatorThread]):
        self.proxy = proxy
        self.status_port = status_port
        self.emus = emus

    def status(self) -> dict:
        return httpx.get(f"http://127.0.0.1:{self.status_port}/sjf/status", timeout=10).json()

    def queue(self, name: str) -> dict:
        return self.status()["backends"].get(self.emus[name].base_url, {"in_flight": 0, "waiting": 0, "stats": {}})

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.proxy.openai_base_url, api_key=self.proxy.master_key,
                                  max_retries=0, timeout=120, http_client=openai.DefaultAsyncHttpxClient())

    async def chat(self, model, prompt, stream=False, **kw):
        async with self.client() as c:
            r = await c.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                                stream=stream, **kw)
            if not stream:
                return r.usage.completion_tokens
            n = 0
            async for chunk in r:
                if chunk.choices and chunk.choices[0].delta.content:
                    n += len(chunk.choices[0].delta.content.split())
            return n

    def idle(self, name: str) -> bool:
        q = self.queue(name)
        st = self.emus[name].stats()
        return q["in_flight"] == 0 and q["waiting"] == 0 and st["in_flight"] == 0

    def dump(self) -> str:
        return json.dumps({"plugin": self.status(), "emulators": {k: e.stats() for k, e in self.emus.items()}},
                          indent=1)[:6000]


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "litellm_config.yaml"


def _example_settings() -> dict:
    """The settings sections of examples/litellm_config.yaml (the proxies below use them)."""
    ex = yaml.safe_load(EXAMPLE.read_text())
    assert ex["litellm_settings"]["callbacks"] == ["litellm_sjf.proxy_handler_instance"]
    assert ex["general_settings"]["cancel_on_disconnect"] is True
    return {k: ex[k] for k in ("litellm_settings", "general_settings", "router_settings")}


def _start(emus: dict[str, EmulatorThread], env: dict, router_settings=None) -> tuple[LiteLLMProxy, int]:
    status_port = free_port()
    ex = _example_settings()
    cfg = proxy_config({name: [e.base_url] for name, e in emus.items()}, plugin=True,
                       litellm_settings=ex["litellm_settings"], general_settings=ex["general_settings"],
                       router_settings={**ex["router_settings"], **(router_settings or {})})
    proxy = LiteLLMProxy(cfg, env={"SJF_STATUS_PORT": str(status_port), "SJF_LEASE_TTL_S": "900", **env})
    proxy.start()
    return proxy, status_port


@pytest.fixture(scope="module")
def main():
    """Proxy with the plugin (τ off: pure predicted SJF) over three emulators:
    a: 1 slot, keeps generating after a disconnect (llama-cpp-python style);
    b: 1 slot, stops on disconnect; c: 2 slots (SJF_BACKEND_SLOTS)."""
    emus = {
        "a": EmulatorThread(tokens_per_s=400, slots=1, on_disconnect="continue", trace_records=TRACE),
        "b": EmulatorThread(tokens_per_s=400, slots=1, on_disconnect="stop", trace_records=TRACE),
        "c": EmulatorThread(tokens_per_s=400, slots=2, on_disconnect="stop", trace_records=TRACE),
        # f fails "fall back" with a 500; the proxy then re-runs it on "b" (fallbacks)
        "f": EmulatorThread(tokens_per_s=400, slots=1, trace_records=[
            {"prompt": "fall back", "answer_tokens": 10, "fault": "500"}]),
    }
    proxy = None
    try:
        proxy, port = _start(emus, {"SJF_TAU": "off", "SJF_PROMOTION": "strict",
                                    "SJF_BACKEND_SLOTS": json.dumps({emus["c"].base_url: 2})},
                             router_settings={"fallbacks": [{"f": ["b"]}]})
        yield Harness(proxy, port, emus)
    finally:
        if proxy is not None:
            proxy.stop()
        for e in emus.values():
            e.stop()


async def _hold(h: Harness, name: str) -> asyncio.Task:
    """Occupy backend ``name`` with a held request; returns its task."""
    task = asyncio.create_task(h.chat(name, HOLD))
    assert await until(lambda: h.emus[name].stats()["held"] == 1), h.dump()
    return task


# ---- SJF order --------------------------------------------------------------------------------
async def test_sjf_order_on_held_burst(main):
    h = main
    policy = h.status()["settings"]["policy"]
    assert policy in ("sjf", "sjf-tokens")  # the default: a length-ordered policy
    keys = _predicted_keys(BURST, policy)
    ordered = sorted(BURST, key=keys.get)
    gaps = [keys[b] - keys[a] for a, b in zip(ordered, ordered[1:])]
    assert min(gaps) > 1e-6 * max(1.0, abs(keys[ordered[-1]])), f"burst prompts need distinct predicted keys: {keys}"
    h.emus["a"].reset()
    holder = await _hold(h, "a")
    # submit in DESCENDING predicted key, staggered: FCFS would serve them in that order
    tasks = []
    for p in reversed(ordered):
        tasks.append(asyncio.create_task(h.chat("a", p)))
        await asyncio.sleep(0.05)
    assert await until(lambda: h.queue("a")["waiting"] == len(BURST)), h.dump()
    h.emus["a"].release_holds()
    results = await asyncio.gather(holder, *tasks)
    assert results == [5] + [12] * len(BURST)
    served = [o["hash"] for o in h.emus["a"].stats()["order"]]
    assert served[0] == short_hash(HOLD)
    assert served[1:] == [short_hash(p) for p in ordered], f"service order must ascend in the {policy} key"
    assert h.emus["a"].stats()["max_in_flight"] == 1


# ---- never more than slots in flight ------------------------------------------------------------
async def test_slots_bound_at_the_emulator(main):
    h = main
    for name in ("b", "c"):
        h.emus[name].reset()
    await asyncio.gather(*[h.chat(name, "two slots", stream=(i % 2 == 0)) for i in range(6) for name in ("b", "c")])
    b, c = h.emus["b"].stats(), h.emus["c"].stats()
    assert b["max_in_flight"] == 1 and b["served"] == 6
    assert c["max_in_flight"] == 2 and c["max_generating"] == 2 and c["served"] == 6  # work-conserving: both used
    assert h.queue("c")["slots"] == 2 and h.queue("c")["stats"]["max_in_flight"] == 2


# ---- release on every path ----------------------------------------------------------------------
async def test_zero_leaked_slots_after_mixed_outcomes(main):
    h = main
    h.emus["a"].reset()
    h.emus["b"].reset()
    before = {n: dict(h.queue(n)["stats"]) for n in ("a", "b")}

    # 1. a client that leaves while queued: leaves the queue, never reaches the backend
    holder = await _hold(h, "a")
    async def leave_queued(stream):
        async with httpx.AsyncClient(timeout=1.5) as hc:
            with pytest.raises(httpx.ReadTimeout):
                await hc.post(h.proxy.openai_base_url + "/chat/completions",
                              headers={"Authorization": f"Bearer {h.proxy.master_key}"},
                              json={"model": "a", "stream": stream,
                                    "messages": [{"role": "user", "content": "abandoned while queued"}]})

    await asyncio.gather(leave_queued(False), leave_queued(True))
    assert await until(lambda: h.queue("a")["waiting"] == 0), h.dump()
    assert h.queue("a")["stats"]["cancelled"] - before["a"].get("cancelled", 0) == 2
    h.emus["a"].release_holds()
    assert await holder == 5

    # 2. a mix at once: successes, backend 500s, dropped connections, a mid-stream drop,
    #    a client that leaves mid-stream (a keeps generating for nobody), and one that
    #    leaves a non-streamed answer mid-generation (b stops generating).
    async def leave_mid_stream(model, prompt, after_chunks=3):
        async with h.client() as c:
            s = await c.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                                stream=True)
            n = 0
            async for _ in s:
                n += 1
                if n >= after_chunks:
                    break
            await s.close()
            return "left"

    async def leave_non_stream(model, prompt):
        async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=0.8)) as hc:
            try:
                await hc.post(h.proxy.openai_base_url + "/chat/completions",
                              headers={"Authorization": f"Bearer {h.proxy.master_key}"},
                              json={"model": model, "messages": [{"role": "user", "content": prompt}]})
            except httpx.ReadTimeout:
                return "left"
            return "finished"

    async def expect_error(coro):
        try:
            await coro
        except (openai.APIError, httpx.HTTPError) as exc:
            return type(exc).__name__
        return "no error"

    jobs = [
        h.chat("a", "ok short"), h.chat("a", "ok long stream", stream=True),
        expect_error(h.chat("a", "fail 500")), expect_error(h.chat("b", "fail 500")),
        expect_error(h.chat("a", "drop now")), expect_error(h.chat("b", "drop midway", stream=True)),
        leave_mid_stream("a", "abandoned stream"),
        leave_non_stream("b", "abandoned non-stream"),
        h.chat("b", "ok short"), h.chat("b", "ok short", stream=True),
    ]
    results = await asyncio.gather(*jobs)
    assert results[0] == 30 and results[1] == 300 and results[8] == 30 and results[9] == 30
    assert "no error" not in results[2:6], results
    assert results[6] == "left" and results[7] == "left"

    # 3. a client that leaves a non-streamed answer that a goes on generating for nobody,
    #    while a request waits for the slot (on b, which stops, "never 2 in flight" could
    #    not fail: issue 15)
    async def running_then_cancelled(prompt):
        async with httpx.AsyncClient(timeout=120) as hc:
            await hc.post(h.proxy.openai_base_url + "/chat/completions",
                          headers={"Authorization": f"Bearer {h.proxy.master_key}"},
                          json={"model": "a", "messages": [{"role": "user", "content": prompt}]})

    orphan = asyncio.create_task(running_then_cancelled("abandoned non-stream"))
    assert await until(lambda: h.emus["a"].stats()["generating"] == 1
                       and h.emus["a"].stats()["order"][-1]["hash"] == short_hash("abandoned non-stream")), h.dump()
    follow = asyncio.create_task(h.chat("a", "ok short"))
    assert await until(lambda: h.queue("a")["waiting"] == 1), h.dump()
    orphan.cancel()
    assert await follow == 30

    # everything settles: no slot held, nothing queued, no call tracked, both backends idle
    assert await until(lambda: h.idle("a") and h.idle("b") and h.status()["draining"] == 0, timeout=60), h.dump()
    st = h.status()
    assert st["tracked_calls"] == 0
    for n in ("a", "b"):
        q = h.queue(n)["stats"]
        dispatched = q["dispatched"] - before[n].get("dispatched", 0)
        assert dispatched > 0
        assert q["released"] - before[n].get("released", 0) == dispatched, h.dump()
        assert q["expired"] == before[n].get("expired", 0), "a slot was freed by the lease safety net, not a hook"
    # the queued client that left never reached the backend
    assert short_hash("abandoned while queued") not in [o["hash"] for o in h.emus["a"].stats()["order"]]
    # a keeps generating for a client that left: the plugin held the slot until its idle probe
    # returned before admitting more (the stream on a, the non-streamed answer on b)
    ea = h.emus["a"].stats()
    assert ea["max_in_flight"] == 1 and ea["max_probes_in_flight"] <= 1, h.dump()
    orphan = [o for o in ea["order"] if o["hash"] == short_hash("abandoned non-stream")]
    assert [o["outcome"] for o in orphan] == ["disconnected"], h.dump()  # it was generated for nobody
    assert st["counters"]["orphan_probes"] >= 2 and st["counters"]["released_probe"] >= 2, h.dump()
    assert h.emus["b"].stats()["max_in_flight"] == 1, h.dump()
    # and a follow-up request on each backend is served at once
    assert await h.chat("a", "ok short") == 30 and await h.chat("b", "ok short") == 30


async def test_stream_holds_its_slot_until_the_end(main):
    h = main
    h.emus["a"].reset()
    stream = asyncio.create_task(h.chat("a", "a very long stream", stream=True))  # ~5 s at 400 tok/s
    assert await until(lambda: h.emus["a"].stats()["generating"] == 1)
    other = asyncio.create_task(h.chat("a", "ok short"))
    assert await until(lambda: h.queue("a")["waiting"] == 1), h.dump()
    assert await stream == 2000 and await other == 30
    order = h.emus["a"].stats()["order"]
    assert [o["hash"] for o in order] == [short_hash("a very long stream"), short_hash("ok short")]
    assert h.emus["a"].stats()["max_in_flight"] == 1


async def test_fallback_rerun_releases_both_attempts(main):
    h = main
    h.emus["b"].reset()
    h.emus["f"].reset()
    assert await h.chat("f", "fall back") > 0  # served by b after f's 500
    assert await until(lambda: h.idle("f") and h.idle("b") and h.status()["tracked_calls"] == 0), h.dump()
    assert h.emus["f"].stats()["errors"] == 1 and h.emus["b"].stats()["served"] == 1
    for n in ("f", "b"):
        q = h.queue(n)["stats"]
        assert q["released"] == q["dispatched"] and q["expired"] == 0, h.dump()


async def test_completions_and_responses_endpoints_are_scheduled_and_released(main):
    h = main
    before = dict(h.queue("b")["stats"])
    async with h.client() as c:
        r = await c.completions.create(model="b", prompt="ok short")
        assert r.usage.completion_tokens == 30
        s = await c.completions.create(model="b", prompt="ok short", stream=True)
        assert len("".join([ch.choices[0].text or "" async for ch in s if ch.choices]).split()) == 30
        r = await c.responses.create(model="b", input="ok short")
        assert r.usage.output_tokens == 30
        s = await c.responses.create(model="b", input="ok short", stream=True)
        kinds = [ev.type async for ev in s]
        assert "response.completed" in kinds
    assert await until(lambda: h.idle("b") and h.status()["tracked_calls"] == 0), h.dump()
    q = h.queue("b")["stats"]
    assert q["dispatched"] - before.get("dispatched", 0) == 4
    assert q["released"] - before.get("released", 0) == 4 and q["expired"] == before.get("expired", 0)


# ---- pass-through ---------------------------------------------------------------------------
async def test_unscorable_calls_pass_through_unharmed(main):
    """An embedding call holds a slot of its backend like any call (an Ollama box's embedding
    model is a runner, docs/boxes.md), unscored; a chat body with no text is admitted unscored."""
    h = main
    before = h.status()
    async with h.client() as c:
        emb = await c.embeddings.create(model="b", input=["hello", "world"])
        assert len(emb.data) == 2
        # a chat body with no text to score: admitted unscored (FCFS key) and served
        r = await c.chat.completions.create(
            model="b", max_tokens=4,
            messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}])
        assert r.usage.completion_tokens == 4
    after = h.status()
    assert after["counters"]["passthrough"] == before["counters"]["passthrough"]
    assert after["counters"]["unscored"] == before["counters"]["unscored"] + 2
    assert after["counters"]["fail_open"] == 0
    assert await until(lambda: h.idle("b"))


async def test_plugin_adds_no_fields_to_the_backend_request(main):
    h = main
    h.emus["b"].reset()
    await h.chat("b", "ok short")
    await h.chat("b", "ok short", stream=True)
    keys = [set(o["keys"]) for o in h.emus["b"].stats()["order"]]
    assert keys[0] == {"model", "messages"}
    assert keys[1] - {"stream_options"} == {"model", "messages", "stream"}


# ---- τ promotion ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tau_proxy(tmp_path_factory):
    """Proxy with τ = 1 s (strict promotion); backend "o" has overload control
    (at most 1 waiter), set per backend in an SJF_CONFIG file."""
    emus = {"t": EmulatorThread(tokens_per_s=400, slots=1, trace_records=TRACE),
            "o": EmulatorThread(tokens_per_s=400, slots=1, trace_records=TRACE)}
    cfg = tmp_path_factory.mktemp("sjf") / "sjf.yaml"
    cfg.write_text(json.dumps({"backends": {emus["o"].base_url: {"overload": {"max_queue_depth": 1}}}}))
    proxy = None
    try:
        proxy, port = _start(emus, {"SJF_TAU": "1.0", "SJF_PROMOTION": "strict", "SJF_CONFIG": str(cfg)})
        yield Harness(proxy, port, emus)
    finally:
        if proxy is not None:
            proxy.stop()
        for e in emus.values():
            e.stop()


async def test_tau_promotes_a_long_request(tau_proxy, main):
    h = tau_proxy
    # the prompt the predictor ranks longest, and the three it ranks shortest (checked here,
    # with the shipped model): SJF alone would serve the long one last
    keys = _predicted_keys(BURST, h.status()["settings"]["policy"])
    ranked = sorted(BURST, key=keys.get)
    long_prompt, short_prompts = ranked[-1], ranked[:3]
    assert keys[long_prompt] > max(keys[s] for s in short_prompts), keys
    holder = await _hold(h, "t")
    long_task = asyncio.create_task(h.chat("t", long_prompt))
    assert await until(lambda: h.queue("t")["waiting"] == 1), h.dump()
    await asyncio.sleep(1.5)  # the long request is now older than τ = 1 s
    shorts = [asyncio.create_task(h.chat("t", s)) for s in short_prompts]
    assert await until(lambda: h.queue("t")["waiting"] == 1 + len(short_prompts)), h.dump()
    h.emus["t"].release_holds()
    await asyncio.gather(holder, long_task, *shorts)
    served = [o["hash"] for o in h.emus["t"].stats()["order"]]
    assert served[:2] == [short_hash(HOLD), short_hash(long_prompt)], "the aged long request goes first"
    assert h.queue("t")["stats"]["promoted"] >= 1
    # control: on the τ-off proxy the same long request waits behind the shorts
    m = main
    m.emus["a"].reset()
    holder = await _hold(m, "a")
    long_task = asyncio.create_task(m.chat("a", long_prompt))
    assert await until(lambda: m.queue("a")["waiting"] == 1)
    await asyncio.sleep(1.5)
    shorts = [asyncio.create_task(m.chat("a", s)) for s in short_prompts]
    assert await until(lambda: m.queue("a")["waiting"] == 1 + len(short_prompts)), m.dump()
    m.emus["a"].release_holds()
    await asyncio.gather(holder, long_task, *shorts)
    served = [o["hash"] for o in m.emus["a"].stats()["order"]]
    assert served[-1] == short_hash(long_prompt)


async def test_overload_rejection_is_http_429_with_retry_after(tau_proxy):
    h = tau_proxy
    holder = await _hold(h, "o")
    queued = asyncio.create_task(h.chat("o", "ok short"))
    assert await until(lambda: h.queue("o")["waiting"] == 1), h.dump()
    async with httpx.AsyncClient(timeout=30) as hc:
        r = await hc.post(h.proxy.openai_base_url + "/chat/completions",
                          headers={"Authorization": f"Bearer {h.proxy.master_key}"},
                          json={"model": "o", "messages": [{"role": "user", "content": "ok short"}]})
    assert r.status_code == 429, r.text
    assert int(r.headers["retry-after"]) >= 1
    h.emus["o"].release_holds()
    assert await holder == 5 and await queued == 30
    assert await until(lambda: h.idle("o")), h.dump()
    assert h.status()["counters"]["rejected_429"] == 1
    assert h.emus["o"].stats()["received"] == 2  # the refused request never reached the backend


def test_no_emulator_ever_saw_more_than_its_slots(main):
    # peak_in_flight spans the module's every test (reset() zeroes max_in_flight, not it)
    for name, emu in main.emus.items():
        st = emu.stats()
        assert st["peak_in_flight"] <= st["slots"], (name, st)


# ---- settings (no proxy) --------------------------------------------------------------------
def test_settings_from_env_and_file(tmp_path):
    from litellm_sjf.settings import load_settings
    from sjf_core.admission._overload import OverloadConfig

    f = tmp_path / "sjf.yaml"
    f.write_text("policy: sjf-tokens\ntau: 4\nslots: 2\nbackends:\n"
                 "  http://h:1/v1/: {slots: 3, on_disconnect: release, overload: {max_queue_depth: 5}}\n")
    s = load_settings({"SJF_CONFIG": str(f), "SJF_TAU": "off", "SJF_BACKEND_SLOTS": "http://h:2/v1=4,http://h:3/v1=1"})
    assert (s.policy, s.tau, s.slots) == ("sjf-tokens", "off", 2)  # env beats the file
    assert s.backend_slots == {"http://h:1/v1": 3, "http://h:2/v1": 4, "http://h:3/v1": 1}
    assert s.on_disconnect_for("http://h:1/v1/") == "release" and s.on_disconnect_for("http://h:2/v1") == "probe"
    assert s.backend_overload == {"http://h:1/v1": OverloadConfig(max_queue_depth=5)}
    s = load_settings({"SJF_BACKEND_SLOTS": '{"http://x/v1": 2}', "SJF_PREDICTOR": "none"})
    assert s.backend_slots == {"http://x/v1": 2} and s.predictor is None


@pytest.mark.parametrize("env, word", [
    ({"SJF_POLICY": "lifo"}, "policy"), ({"SJF_TAU": "soon"}, "tau"), ({"SJF_SLOTS": "0"}, "slots"),
    ({"SJF_SLOTS": "two"}, "SJF_"), ({"SJF_ON_DISCONNECT": "ignore"}, "on_disconnect"),
    ({"SJF_BACKEND_SLOTS": "nonsense"}, "SJF_BACKEND_SLOTS"), ({"SJF_OVERLOAD": "{"}, "SJF_OVERLOAD"),
    ({"SJF_OVERLOAD": '{"bogus": 1}'}, "overload"), ({"SJF_CONFIG": "/nonexistent/sjf.yaml"}, "SJF_CONFIG"),
])
def test_bad_settings_raise_a_clear_error(env, word):
    from litellm_sjf.settings import load_settings

    with pytest.raises(ValueError, match=word):
        load_settings(env)


def test_hooks_are_defined_on_the_instance_class():
    """LiteLLM skips inherited hooks silently (DESIGN.md): each must be in vars(cls)."""
    import litellm_sjf
    from litellm.integrations.custom_logger import CustomLogger

    inst = litellm_sjf.proxy_handler_instance
    assert isinstance(inst, CustomLogger)
    for hook in ("async_pre_call_hook", "async_pre_call_deployment_hook", "async_post_call_success_hook",
                 "async_post_call_failure_hook", "async_post_call_streaming_iterator_hook",
                 "async_log_success_event", "async_log_failure_event"):
        assert hook in vars(type(inst)), hook


# ---- fail-open, hook by hook (no proxy: the hooks called directly with LiteLLM-shaped data) ----
async def test_hooks_fail_open_on_garbage_and_a_broken_predictor(tmp_path):
    from litellm_sjf.handler import SJFHandler
    from litellm_sjf.settings import PluginSettings

    bad_model = tmp_path / "broken.onnx"
    bad_model.write_bytes(b"not a model")
    h = SJFHandler(PluginSettings(predictor=str(bad_model), tau="off"))
    # garbage in every hook: nothing raises, nothing is tracked
    assert await h.async_pre_call_hook(None, None, None, "acompletion") is None
    assert await h.async_pre_call_hook(None, None, {"litellm_call_id": 5}, "acompletion") is None
    assert await h.async_pre_call_hook(None, None, {"litellm_call_id": "e", "prompt": "x"}, "aimage_generation") is None
    assert await h.async_pre_call_deployment_hook({"api_base": "http://x/v1"}, None) is None
    assert await h.async_post_call_success_hook(None, None, None) is None
    assert await h.async_post_call_failure_hook("junk", RuntimeError("x"), None) is None
    await h.async_log_success_event(None, None, None, None)
    await h.async_log_failure_event({"litellm_call_id": ["x"]}, None, None, None)
    assert h.status()["tracked_calls"] == 0 and h.counters["passthrough"] >= 2
    # a real request shape with an unloadable predictor: admitted unscored (FCFS key), released on success
    psr = {"headers": {"x-sjf-priority": "1"}}
    data = {"litellm_call_id": "c1", "model": "m", "messages": [{"role": "user", "content": "hi"}],
            "proxy_server_request": psr}
    await h.async_pre_call_hook(None, None, data, "acompletion")
    assert h.counters["unscored"] == 1
    await h.async_pre_call_deployment_hook({**data, "api_base": "http://x/v1/"}, None)
    q = h.status()["backends"]["http://x/v1"]
    assert q["in_flight"] == 1 and q["stats"]["fallback"] == 1

    class Usage:
        completion_tokens = 7

    class Resp:
        usage = Usage()

    await h.async_post_call_success_hook(data, None, Resp())
    q = h.status()["backends"]["http://x/v1"]
    assert q["in_flight"] == 0 and q["stats"]["released"] == 1
    assert h.status()["tracked_calls"] == 0
    # duplicate release paths are harmless
    await h.async_post_call_failure_hook(data, RuntimeError("late"), None)
    await h.async_log_success_event(data, Resp(), None, None)
    assert h.status()["backends"]["http://x/v1"]["stats"]["released"] == 1


def test_proxy_runner_reports_a_failed_start_with_the_log_tail():
    from sjf_lab.proxy_runner import ProxyStartError

    cfg = proxy_config({"m": ["http://127.0.0.1:9/v1"]}, plugin=False,
                       litellm_settings={"callbacks": ["no_such_module_sjf.handler"]})
    proxy = LiteLLMProxy(cfg, startup_timeout_s=120)
    with pytest.raises(ProxyStartError, match="no_such_module_sjf"):
        proxy.start()
    assert not proxy.running() and proxy.workdir is None  # stopped and cleaned up
