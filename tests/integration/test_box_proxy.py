"""One box, many models (issue 28), through a real LiteLLM proxy: an emulated Ollama-like box
(``sjf_lab.box``: a runner per model, loads) behind the plugin, with the ``openai/`` and the
``ollama_chat/`` provider. Every check is on states, order and counts (a request is held with
the emulator's ``hold`` fault to make a runner busy); the emulator counts what each runner
really held (tests/backend_truth.py fails a test whose runner got more than its slots)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from sjf_lab.box import BoxConfig, ModelSpec
from sjf_lab.emulator import EmulatorConfig, EmulatorThread, short_hash
from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config
from waits import wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

HOLD = "Hold the chat runner for a moment, please."
HOLD_A = "Hold model a for a moment, please."
AUTO = [f"def f{i}(x):\n    return" for i in range(4)]
BURST = [f"Question {i} for the model that does not fit: what is {i} plus {i}?" for i in range(10)]
LONG = [f"Write a detailed essay of several paragraphs about topic {i}, with examples." for i in range(8)]
SHORT = [f"What is {i} plus {i}? One number." for i in range(8)]
TRACE = ([{"prompt": p, "answer_tokens": 300} for p in LONG] + [{"prompt": p, "answer_tokens": 20} for p in SHORT]
         + [{"prompt": HOLD, "answer_tokens": 3, "fault": "hold"}, {"prompt": HOLD_A, "answer_tokens": 3, "fault": "hold"}]
         + [{"prompt": p, "answer_tokens": 16} for p in AUTO]
         + [{"prompt": p, "answer_tokens": 30} for p in BURST]
         + [{"prompt": "warm", "answer_tokens": 2}])


class Box:
    def __init__(self, proxy: LiteLLMProxy, status_port: int, emu: EmulatorThread, provider: str):
        self.proxy, self.status_port, self.emu, self.provider = proxy, status_port, emu, provider

    def status(self) -> dict:
        return httpx.get(f"http://127.0.0.1:{self.status_port}/sjf/status", timeout=10).json()

    def box(self) -> dict:
        return self.emu.stats()["box"]

    async def chat(self, model: str, prompt: str) -> int:
        async with httpx.AsyncClient(timeout=180) as c:
            r = await c.post(self.proxy.openai_base_url + "/chat/completions",
                             headers={"Authorization": f"Bearer {self.proxy.master_key}"},
                             json={"model": model, "messages": [{"role": "user", "content": prompt}]})
            return r.status_code

    async def embed(self, model: str, text: str) -> int:
        async with httpx.AsyncClient(timeout=60) as c:
            r = await c.post(self.proxy.openai_base_url + "/embeddings",
                             headers={"Authorization": f"Bearer {self.proxy.master_key}"},
                             json={"model": model, "input": text})
            return r.status_code


def _config(url_root: str, models, provider: str) -> dict:
    base = url_root + ("/v1" if provider == "openai" else "")
    cfg = proxy_config({}, plugin=True)
    cfg["model_list"] = [{"model_name": m, "litellm_params": {"model": f"{provider}/{m}", "api_base": base,
                                                             "api_key": "none"}} for m in models]
    return cfg


@pytest.fixture(scope="module", params=["openai", "ollama_chat"])
def side(request):
    """A box holding a chat, an autocomplete and an embedding model side by side."""
    box = BoxConfig(models=(ModelSpec("chat", tokens_per_s=400), ModelSpec("auto", tokens_per_s=400),
                            ModelSpec("embed", kind="embedding")), max_loaded=3, preload=("chat", "auto", "embed"))
    emu = EmulatorThread(EmulatorConfig(box=box, trace_records=TRACE, on_disconnect="stop"))
    port = free_port()
    # box settings a user gets wrong (said at start-up, else harmless): a models entry with a typo
    # on the box's URL in another spelling, and an entry on a port that no deployment uses
    wrong = f"http://localhost:{emu.port + 1}/v1/"
    boxes = f'{{"http://localhost:{emu.port}/v1/": {{"models": {{"chta": {{"slots": 1}}}}}}, "{wrong}": {{"cap": 1}}}}'
    proxy = LiteLLMProxy(_config(f"http://127.0.0.1:{emu.port}", ("chat", "auto", "embed"), request.param),
                         env={"SJF_STATUS_PORT": str(port), "SJF_BACKEND_BOX": boxes})
    try:
        proxy.start()
        yield Box(proxy, port, emu, request.param)
    finally:
        proxy.stop()
        emu.stop()


async def test_autocomplete_and_embeddings_never_wait_for_a_chat_answer_the_box_runs_beside_them(side):
    """Before issue 28 the URL was one queue of 1 slot: everything waited for the held chat."""
    side.emu.reset()
    held = asyncio.create_task(side.chat("chat", HOLD))
    await wait_until(lambda: side.emu.stats()["held"] == 1, timeout=60)
    codes = await asyncio.gather(*(side.chat("auto", p) for p in AUTO))
    assert codes == [200] * len(AUTO)
    if side.provider == "openai":  # LiteLLM's embeddings route for the OpenAI provider
        assert await side.embed("embed", "a sentence to embed") == 200
    assert side.emu.stats()["held"] == 1  # all of it while the chat answer was still running
    side.emu.release_holds()
    assert await held == 200
    models = side.box()["models"]
    assert all(models[m]["max_in_flight"] <= models[m]["slots"] for m in models)
    st = side.status()
    boxes = {b["box"]: b for b in st["boxes"]}
    assert len(boxes) == 1
    (b,) = boxes.values()
    assert b["kind"] == "ollama" and b["cap"] is None
    assert {r["model"] for r in b["runners"]} >= {"chat", "auto"}
    assert all(r["in_flight"] == 0 and r["waiting"] == 0 for r in b["runners"])


def test_box_settings_that_can_take_no_effect_are_warned_at_start_up(side):
    """A box setting keyed on a port no deployment uses, and a models entry naming no model of the
    box, were silently ignored: each is one WARNING of the proxy's start-up, naming the setting;
    the box's own URL written as http://localhost:PORT/v1/ is its URL (no warning about it)."""
    warned = [x for x in side.proxy.log_lines() if "SJF_BACKEND_BOX" in x]
    assert len(warned) == 2 and all(x.startswith("WARNING") for x in warned), warned
    port = side.emu.port
    (url,) = [x for x in warned if "matches no deployment's api_base" in x]
    assert f"SJF_BACKEND_BOX: backend http://localhost:{port + 1}/v1/ matches no" in url, url
    assert f"(the model list's: http://127.0.0.1:{port}/v1)" in url, url
    (model,) = [x for x in warned if "models entry" in x]
    assert f"SJF_BACKEND_BOX: backend http://localhost:{port}/v1/: models entry 'chta' names no model" in model
    assert "did you mean 'chat'?" in model, model


@pytest.fixture(scope="module", params=["openai", "ollama_chat"])
def nofit(request):
    """A box that holds one model at a time (0.5 s per load), model a loaded."""
    box = BoxConfig(models=(ModelSpec("a", tokens_per_s=2000, load_s=0.5), ModelSpec("b", tokens_per_s=2000, load_s=0.5)),
                    max_loaded=1, preload=("a",))
    emu = EmulatorThread(EmulatorConfig(box=box, trace_records=TRACE, on_disconnect="stop"))
    port = free_port()
    proxy = LiteLLMProxy(_config(f"http://127.0.0.1:{emu.port}", ("a", "b"), request.param),
                         env={"SJF_STATUS_PORT": str(port), "SJF_TAU": "off"})
    try:
        proxy.start()
        yield Box(proxy, port, emu, request.param)
    finally:
        proxy.stop()
        emu.stop()


async def test_a_burst_for_two_models_that_do_not_fit_together_is_grouped_by_model(nofit):
    """Interleaved requests a, b, a, b… of equal predicted length: one queue per URL in
    shortest-first order alternates the models (a load each); the box turn groups them."""
    assert await nofit.chat("b", "warm") == 200  # the box evicts a to load b: the plugin learns what fits
    await wait_until(lambda: any(b["max_loaded"] == 1 for b in nofit.status()["boxes"]), timeout=30)
    assert await nofit.chat("a", "warm") == 200
    nofit.emu.reset()
    held = asyncio.create_task(nofit.chat("a", HOLD_A))
    await wait_until(lambda: nofit.emu.stats()["held"] == 1, timeout=60)
    tasks = []
    for i, p in enumerate(BURST):
        tasks.append(asyncio.create_task(nofit.chat("a" if i % 2 == 0 else "b", p)))
        await asyncio.sleep(0.05)
    await wait_until(lambda: sum(r["waiting"] for b in nofit.status()["boxes"] for r in b["runners"]) == len(BURST),
                     timeout=60)
    nofit.emu.release_holds()
    assert await held == 200
    assert await asyncio.gather(*tasks) == [200] * len(BURST)
    order = [r["model"] for r in nofit.emu.stats()["order"]]
    assert order == ["a"] * 6 + ["b"] * 5  # the held one, a's four, then b's five: one switch
    st = nofit.box()
    assert st["loads"] == 1 and st["max_loaded"] == 1
    assert all(m["max_in_flight"] <= m["slots"] for m in st["models"].values())
    hashes = [r["hash"] for r in nofit.emu.stats()["order"]]
    assert hashes[0] == short_hash(HOLD_A)


async def test_three_workers_in_redis_mode_keep_runners_side_by_side(redis_url):
    """Autocomplete runs beside a held chat answer whichever of three workers it reaches: each
    runner's slots are its own Redis queue's, shared by the workers."""
    import uuid

    box = BoxConfig(models=(ModelSpec("chat", tokens_per_s=2000), ModelSpec("auto", tokens_per_s=2000)),
                    max_loaded=2, preload=("chat", "auto"))
    emu = EmulatorThread(EmulatorConfig(box=box, trace_records=TRACE, on_disconnect="stop"))
    proxy = LiteLLMProxy(_config(f"http://127.0.0.1:{emu.port}", ("chat", "auto"), "openai"), num_workers=3,
                         startup_timeout_s=600, env={"SJF_REDIS_URL": redis_url,
                                                     "SJF_REDIS_PREFIX": "boxproxy-" + uuid.uuid4().hex[:8]})
    try:
        await proxy.astart()
        h = Box(proxy, 0, emu, "openai")
        held = asyncio.create_task(h.chat("chat", HOLD))
        await wait_until(lambda: emu.stats()["held"] == 1, timeout=60)
        assert await asyncio.gather(*(h.chat("auto", p) for p in AUTO * 3)) == [200] * 12
        assert emu.stats()["held"] == 1  # all twelve while the chat answer was still running
        emu.release_holds()
        assert await held == 200
    finally:
        proxy.stop()
        emu.stop()


async def test_three_workers_in_redis_mode_serve_a_no_fit_box_one_model_at_a_time(redis_url):
    """Once one worker learned that the box holds one model (shared in Redis), the box's shared
    queue serves the three workers' burst in turn, one model's requests together."""
    import uuid

    import redis

    prefix = "boxproxy-" + uuid.uuid4().hex[:8]
    box = BoxConfig(models=(ModelSpec("a", tokens_per_s=2000, load_s=0.3), ModelSpec("b", tokens_per_s=2000, load_s=0.3)),
                    max_loaded=1, preload=("a",))
    emu = EmulatorThread(EmulatorConfig(box=box, trace_records=TRACE, on_disconnect="stop"))
    proxy = LiteLLMProxy(_config(f"http://127.0.0.1:{emu.port}", ("a", "b"), "openai"), num_workers=3,
                         startup_timeout_s=600, env={"SJF_REDIS_URL": redis_url, "SJF_REDIS_PREFIX": prefix,
                                                     "SJF_TAU": "off"})
    r = redis.Redis.from_url(redis_url)
    try:
        await proxy.astart()
        h = Box(proxy, 0, emu, "openai")
        for m in ("b", "a") * 3:  # warm-up: the box evicts a model, a worker learns it, all read it
            assert await h.chat(m, "warm") == 200
        await wait_until(lambda: r.hvals(f"{prefix}:boxes:max_loaded") == [b"1"], timeout=30)
        emu.reset()
        held = asyncio.create_task(h.chat("a", HOLD_A))
        await wait_until(lambda: emu.stats()["held"] == 1, timeout=60)
        tasks = [asyncio.create_task(h.chat("a" if i % 2 == 0 else "b", p)) for i, p in enumerate(BURST)]
        await asyncio.sleep(1.0)  # the burst reaches the workers (nothing asserted on time)
        emu.release_holds()
        assert await held == 200
        assert await asyncio.gather(*tasks) == [200] * len(BURST)
        order = [x["model"] for x in emu.stats()["order"]]
        switches = sum(1 for x, y in zip(order, order[1:]) if x != y)
        st = emu.stats()["box"]
        assert st["loads"] <= 3 and switches <= 2, order
        assert all(m["max_in_flight"] <= m["slots"] for m in st["models"].values())
    finally:
        proxy.stop()
        emu.stop()
        r.close()


async def test_three_workers_in_redis_mode_keep_a_serial_box_to_one_answer_at_a_time(redis_url):
    """A box set to ``kind: serial`` (cap 1) that would itself run its two loaded models side by
    side: three workers share its one slot in Redis, so while a chat answer is held nothing
    else reaches the box, and the burst (both models, spread over the workers) goes one at a
    time. The box-wide cap is the bound here, not a runner's slots: with the box queue's slots
    taken from anything but the cap, each runner's own queue lets one answer in beside the other."""
    import uuid

    import redis

    from sjf_lab.emulator import max_overlap

    prefix = "boxproxy-" + uuid.uuid4().hex[:8]
    box = BoxConfig(models=(ModelSpec("chat", tokens_per_s=2000), ModelSpec("auto", tokens_per_s=2000)),
                    max_loaded=2, preload=("chat", "auto"))
    emu = EmulatorThread(EmulatorConfig(box=box, trace_records=TRACE, on_disconnect="stop"))
    root = f"http://127.0.0.1:{emu.port}"
    proxy = LiteLLMProxy(_config(root, ("chat", "auto"), "openai"), num_workers=3, startup_timeout_s=600,
                         env={"SJF_REDIS_URL": redis_url, "SJF_REDIS_PREFIX": prefix, "SJF_TAU": "off",
                              "SJF_BACKEND_BOX": json.dumps({root + "/v1": {"kind": "serial"}})})
    r = redis.Redis.from_url(redis_url)

    def box_enqueued() -> int:  # tickets taken on the box's shared queue (its counters hash)
        keys = r.scan_iter(match="{" + prefix + ":box:*")
        return sum(int(r.hget(k, "enqueued") or 0) for k in keys if r.type(k) == b"hash")

    burst = [("chat" if i % 2 else "auto", p) for i, p in enumerate(AUTO * 3)]
    held, tasks = None, []
    try:
        await proxy.astart()
        h = Box(proxy, 0, emu, "openai")
        assert await h.chat("auto", "warm") == 200  # the box is read; its queue exists
        emu.reset()
        before = box_enqueued()
        held = asyncio.create_task(h.chat("chat", HOLD))
        await wait_until(lambda: emu.stats()["held"] == 1, timeout=60)
        tasks = [asyncio.create_task(h.chat(m, p)) for m, p in burst]
        await wait_until(lambda: box_enqueued() == before + 1 + len(burst), timeout=120)  # all took a ticket
        await asyncio.sleep(0.5)  # a granted one would reach the box now (nothing asserted on time)
        in_flight = emu.stats()["max_in_flight"]
        emu.release_holds()
        assert await held == 200
        assert await asyncio.gather(*tasks) == [200] * len(burst)
        records = emu.stats()["order"]
        assert in_flight == 1 and emu.stats()["max_in_flight"] == 1 and max_overlap(records) == 1, \
            [(x["model"], x["t_in"], x["t_out"]) for x in records]
        assert sorted(x["model"] for x in records) == sorted(["chat"] + [m for m, _ in burst])
    finally:
        emu.release_holds()
        for t in [held, *tasks]:
            if t is not None and not t.done():
                t.cancel()
        proxy.stop()
        emu.stop()
        r.close()


async def test_the_status_page_shows_each_box_model_loaded_and_its_runner_queue(side):
    """The page (headless chromium) draws the Boxes section from /sjf/status: the box, its kind,
    and a row per model runner with its slots, in flight and waiting."""
    from playwright.async_api import async_playwright

    from test_litellm_ops import CHROMIUM, CHROMIUM_ARGS, _browser_available

    assert _browser_available(), f"{CHROMIUM} (Debian's chromium package) is needed for the page test"
    side.emu.reset()
    assert await side.chat("auto", AUTO[0]) == 200  # both runners have been used
    held = asyncio.create_task(side.chat("chat", HOLD))
    await wait_until(lambda: side.emu.stats()["held"] == 1, timeout=60)
    p = side.proxy
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await (await browser.new_context()).new_page()
            assert (await page.goto(f"http://ops:{p.master_key}@{p.host}:{p.port}/sjf/")).status == 200
            await page.wait_for_function("document.querySelector('section[data-box] table.runners tr td')",
                                         timeout=30_000)
            rows = await page.evaluate("""() => [...document.querySelectorAll('section[data-box] table.runners tr')]
                .map(tr => [...tr.querySelectorAll('td')].map(td => td.textContent)).filter(r => r.length)""")
            title = await page.text_content("section[data-box] h3")
        finally:
            await browser.close()
    side.emu.release_holds()
    assert await held == 200
    by_model = {r[0]: r for r in rows}
    assert {"chat", "auto"} <= set(by_model) and "ollama" in title
    assert by_model["chat"][1] == "yes" and by_model["chat"][3] == "1"  # loaded, the held answer in flight


def overlapping_dispatches(records) -> list:
    """Requests the box got for one model while another model's answer ran there."""
    return [(r["model"], r["t_in"]) for r in records
            if any(o["model"] != r["model"] and o["t_in"] < r["t_in"] < o["t_out"] for o in records)]


async def test_a_box_set_to_hold_one_model_never_loads_another_beside_a_busy_one_from_its_first_burst():
    """Issue 28, a fresh user's stumble: ``max_loaded: 1`` set from the start, a fresh proxy, a burst
    a, b, a, b… (300- and 20-token answers, 50 ms apart). The box's first reading listed the loaded
    model twice (``model-a`` and Ollama's ``model-a:latest``); the second name looked like an idle model
    to evict, so model-b started a load while model-a answered, and a's next request came while b
    loaded (3-5 loads in that burst, 2 in later ones). Now: at most the one switch, and never a
    request for another model while one runs on this one-model box."""
    box = BoxConfig(models=(ModelSpec("model-a", tokens_per_s=400, load_s=1), ModelSpec("model-b", tokens_per_s=400,
                                                                                       load_s=1)),
                    max_loaded=1, preload=("model-a",))
    emu = EmulatorThread(EmulatorConfig(box=box, trace_records=TRACE))
    root = f"http://127.0.0.1:{emu.port}"
    proxy = LiteLLMProxy(_config(root, ("model-a", "model-b"), "ollama_chat"),
                         env={"SJF_BACKEND_BOX": json.dumps({root: {"max_loaded": 1}})})
    try:
        await proxy.astart()
        h = Box(proxy, 0, emu, "ollama_chat")
        tasks = []
        for i in range(8):  # a's first is a long answer: b arrives while it runs
            for model, prompts in (("model-a", (LONG, SHORT)), ("model-b", (SHORT, LONG))):
                tasks.append(asyncio.create_task(h.chat(model, prompts[i % 2][i])))
                await asyncio.sleep(0.05)
        assert await asyncio.gather(*tasks) == [200] * 16
        records = emu.stats()["order"]
        assert overlapping_dispatches(records) == [], [(r["model"], r["t_in"], r["t_out"]) for r in records]
        assert emu.stats()["box"]["loads"] <= 2, [r["model"] for r in records]
        # what the box is, once read, named as configured (issue 28's stumble D)
        read = [line for line in proxy.log_lines() if f"box {root} (on the status page: {root}/v1) read:" in line]
        assert len(read) == 1 and "kind ollama, holds 1 model(s) at once (set)" in read[0] \
            and "a queue per model runner" in read[0], read
    finally:
        proxy.stop()
        emu.stop()
