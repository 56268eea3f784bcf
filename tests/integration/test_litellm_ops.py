"""What an operator sees of the plugin on a LiteLLM proxy: ``GET /sjf/status`` and the page
``/sjf/`` on the proxy's own port, and the proxy's log.

A real proxy with the README's one-line config and no ``SJF_*`` setting, the serial
emulator behind it, the real openai SDK as client; the page is loaded in a real headless
Chromium (Debian's, driven by Playwright). The backend is held busy by one request while 7
more queue, so that the status and the page can be read with a queue in place. Every prompt
carries a canary: neither the JSON nor the page may show it (DESIGN.md invariant 6). A
superseded request (409, ``x-sjf-supersede``) must not be logged by LiteLLM at ERROR.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
import uuid
from pathlib import Path

import httpx
import openai
import pytest

from sjf_lab.emulator import EmulatorThread, short_hash
from sjf_lab.proxy_runner import PLUGIN_CALLBACK, LiteLLMProxy
from waits import wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CANARY = f"OKAPI-CANARY-{uuid.uuid4().hex}"
HOLD = f"Hold the backend, please ({CANARY})."
BURST = [f"{q} ({CANARY})" for q in (
    "What is the capital of France?",
    "Define entropy in one sentence.",
    "Explain how a hash table handles collisions.",
    "Summarize the causes of the First World War in a few paragraphs.",
    "Write a detailed tutorial on building a web scraper in Python with complete code.",
    "Write a long short story of at least 2000 words about a lighthouse keeper.",
    "Who wrote Pride and Prejudice?",
)]
# true answer lengths the scheduler never sees: Short ones and two Long ones (>= 800 tokens)
ANSWERS = [30, 40, 120, 300, 900, 1200, 25]
KEYSTROKES = [f"def fib(n): return fib(n - 1) + fib(n - {i})  # {CANARY}" for i in (1, 2)]
TRACE = [{"prompt": HOLD, "answer_tokens": 5, "fault": "hold"}] + [
    {"prompt": p, "answer_tokens": n} for p, n in zip(BURST, ANSWERS)] + [
    {"prompt": k, "answer_tokens": 8} for k in KEYSTROKES]
CHROMIUM = os.environ.get("SJF_TEST_CHROMIUM", "/usr/bin/chromium")  # scripts/ensure_chromium.sh installs it
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "sjf-status-page.png"


def readme_config(api_base: str) -> dict:
    """The README's LiteLLM config: one model, the one callback line, cancel_on_disconnect."""
    return {"model_list": [{"model_name": "local",
                            "litellm_params": {"model": "openai/local", "api_base": api_base, "api_key": "none"}}],
            "litellm_settings": {"callbacks": [PLUGIN_CALLBACK]},
            "general_settings": {"cancel_on_disconnect": True}}


@pytest.fixture(scope="module")
def proxy():
    emu = EmulatorThread(tokens_per_s=2000, slots=1, trace_records=TRACE)
    p = None
    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith("SJF_")]:
            mp.delenv(name)  # no SJF_* setting at all: the defaults, as a new user has them
        try:
            p = LiteLLMProxy(readme_config(emu.base_url)).start()
            yield p, emu
        finally:
            if p is not None:
                p.stop()
            emu.stop()


def _get(p: LiteLLMProxy, path: str, key: str | None = None, basic: str | None = None) -> httpx.Response:
    headers = {}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if basic is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"ops:{basic}".encode()).decode()
    return httpx.get(p.base_url + path, headers=headers, timeout=30)


async def _chat(p: LiteLLMProxy, prompt: str, **kw) -> int:
    async with openai.AsyncOpenAI(base_url=p.openai_base_url, api_key=p.master_key, max_retries=0, timeout=120) as c:
        r = await c.chat.completions.create(model="local", messages=[{"role": "user", "content": prompt}], **kw)
        return r.usage.completion_tokens


async def _queue_burst(p: LiteLLMProxy, emu: EmulatorThread) -> list[asyncio.Task]:
    """Hold the backend with one request, then queue the 7 of the burst behind it."""
    tasks = [asyncio.create_task(_chat(p, HOLD))]
    await wait_until(lambda: emu.stats()["held"] == 1, timeout=120)
    tasks += [asyncio.create_task(_chat(p, q)) for q in BURST]
    return tasks


def _backend(doc: dict, emu: EmulatorThread) -> dict:
    return doc["backends"].get(emu.base_url, {"waiting": 0, "in_flight": 0})


async def test_status_and_page_on_the_proxy_port_answer_with_the_key_only(proxy):
    p, emu = proxy
    tasks = await _queue_burst(p, emu)
    try:
        await wait_until(lambda: _backend(_get(p, "/sjf/status", p.master_key).json(), emu)["waiting"] == 7, 60)
        r = _get(p, "/sjf/status", p.master_key)
        assert r.status_code == 200, r.text
        doc, text = r.json(), r.text
        b = _backend(doc, emu)
        assert (b["waiting"], b["in_flight"]) == (7, 1)
        q = b["queue"]
        assert q["store"] == "local" and len(q["waiters"]) == 7 and len(q["running"]) == 1
        for w in q["waiters"]:
            assert w["class"] in ("short", "medium", "long") and w["expected_tokens"] > 0
            assert w["waited_s"] >= 0 and w["priority"] == 0 and w["tenant"]  # fairness "key": a hashed id
            assert w["due_in_tokens"] > 0  # the default guard, work-bound: served work still to go
        keys = [w["expected_tokens"] for w in q["waiters"]]
        assert keys == sorted(keys), "waiters are listed in dispatch (SJF) order"
        assert all(k == round(k, 1) for k in keys), keys  # rounded for reading: no 146.65453422347304
        assert not re.search(r"\d\.\d{4,}", text), re.findall(r"\S{0,30}\d\.\d{4,}", text)[:5]
        assert doc["settings"]["promotion"] == "work-bound" and doc["settings"]["tau_used"] is False
        page = _get(p, "/sjf/", p.master_key)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert _get(p, "/sjf/status", basic=p.master_key).status_code == 200  # what a browser sends
        for path in ("/sjf/status", "/sjf/"):
            assert _get(p, path).status_code in (401, 403), path
        # a wrong key: LiteLLM's own check answers 400 "No connected db." without a database
        # (as on its own routes); both routes say 401 and that the key was refused, and the
        # page adds the Basic challenge so that a browser asks again
        for wrong in (_get(p, "/sjf/status", "sk-not-the-key"), _get(p, "/sjf/status", basic="sk-not-the-key")):
            assert wrong.status_code == 401, wrong.text
            assert "the key was refused" in wrong.json()["error"]["message"], wrong.text
            assert "www-authenticate" not in wrong.headers  # a fetch() never pops up a login
        assert _get(p, "/sjf/", "sk-not-the-key").status_code == 401
        assert _get(p, "/sjf/", basic="sk-not-the-key").status_code == 401
        assert "basic" in _get(p, "/sjf/").headers.get("www-authenticate", "").lower()  # the browser asks
        assert CANARY not in text and CANARY[-12:] not in text and CANARY not in page.text
    finally:
        emu.release_holds()
        done = await asyncio.gather(*tasks)
    assert done == [5, *ANSWERS]
    doc = _get(p, "/sjf/status", p.master_key).json()
    assert _backend(doc, emu)["waiting"] == 0
    recent = [r for r in doc["recent"] if r["answer_tokens"] in ANSWERS]
    assert len(recent) >= 7 and all(r["expected_tokens"] is not None and r["true_class"] for r in recent)
    assert CANARY[-12:] not in str(doc)


async def _check_page_words(page) -> None:
    """What the page says of a queue, in an operator's words (issue 29): the model name beside the
    backend, the tenant as LiteLLM's user id (the master key's), the guard's promotion in seconds,
    the fairness mode said in full, the request id under "request", the counters grouped."""
    col = lambda n: page.locator(f"section[data-backend] table.waiters tr td:nth-child({n})").all_inner_texts()  # noqa: E731
    assert set(await col(3)) == {"local"}, await col(3)  # the model group
    assert all(t.startswith("default_user_id") for t in await col(8)), await col(8)  # the tenant's LiteLLM user id
    assert all(re.fullmatch(r"≈ \d+\.\d s", t) for t in await col(9)), await col(9)  # expected start, seconds
    assert all(re.fullmatch(r"(in ≈ \d+\.\d (s|min)|due now)", t) for t in await col(10)), await col(10)
    assert "tok" not in " ".join(await col(10))
    card = await page.locator("section[data-backend]").first.inner_text()
    assert "models: local (openai/local)" in card and "answer tokens/s per slot" in card, card
    summary = await page.text_content("#summary")
    assert "fair shares per API key" in summary and "fairness key ·" not in summary, summary
    assert await page.locator("section[data-backend] table.running th").first.inner_text() == "request"
    running = await page.locator("section[data-backend] table.running tr td").first.inner_text()
    assert re.fullmatch(r"#\d+", running), running
    counters = await page.locator("#sec-counters").inner_text()
    for words in ("admission — what happened to requests as they arrived", "releases", "faults absorbed",
                  "requests granted a backend slot"):
        assert words in counters, counters


def _browser_available() -> bool:
    return shutil.which(CHROMIUM) is not None


async def test_page_in_a_headless_browser_updates_while_a_burst_is_queued(proxy, tmp_path):
    from playwright.async_api import async_playwright

    assert _browser_available(), f"{CHROMIUM} (Debian's chromium package) is needed for the page test"
    p, emu = proxy
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            anon = await browser.new_context()  # no credentials: refused (a navigation would stop at the prompt)
            r = await anon.request.get(p.base_url + "/sjf/")
            assert r.status == 401 and "basic" in r.headers.get("www-authenticate", "").lower()
            # a browser's own login: HTTP Basic, any user name, the master key as the password
            ctx = await browser.new_context(http_credentials={"username": "ops", "password": p.master_key},
                                            viewport={"width": 1280, "height": 900})
            page = await ctx.new_page()
            r = await page.goto(p.base_url + "/sjf/")
            assert r.status == 200
            await page.wait_for_function("document.getElementById('summary').textContent.includes('updated')")
            waiter_rows = "section[data-backend] table.waiters tr"
            assert await _chat(p, BURST[5]) == ANSWERS[5]  # one answer measures the backend's speed
            tasks = await _queue_burst(p, emu)
            try:
                # the page polls: it shows the queue once the 7 wait (header row + 7)
                await page.wait_for_function(f"document.querySelectorAll('{waiter_rows}').length === 8",
                                             timeout=60_000)
                classes = await page.locator(f"{waiter_rows} td:nth-child(4)").all_inner_texts()
                assert len(classes) == 7 and set(classes) <= {"short", "medium", "long"}
                await _check_page_words(page)
                html = await page.content()
                assert CANARY not in html and CANARY[-12:] not in html
                shot = tmp_path / "sjf-status-page.png"
                await page.screenshot(path=str(shot), full_page=True)
                if os.environ.get("SAVE_STATUS_SCREENSHOT"):  # refresh the one in docs/img
                    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(shot, SCREENSHOT)
            finally:
                emu.release_holds()
                await asyncio.gather(*tasks)
            # the next polls show the queue drained: one row saying "none"
            await page.wait_for_function(f"[...document.querySelectorAll('{waiter_rows}')].length === 2 && "
                                         f"document.querySelector('{waiter_rows}:last-child').textContent === 'none'",
                                         timeout=60_000)
            recent = await page.locator("#recent tr").count()
            assert recent >= 8  # header + the completions, predicted vs actual
            assert CANARY[-12:] not in await page.content()
        finally:
            await browser.close()


async def test_page_opened_with_the_key_in_its_url_polls_and_says_what_failed(proxy):
    """A page opened as ``http://any:KEY@host/sjf/`` (the README's way for a browser): fetch()
    refuses a URL carrying credentials, so the page must fetch from its origin (the browser
    sends the page's Basic credentials again) and its error line must name what failed."""
    from playwright.async_api import async_playwright

    assert _browser_available(), f"{CHROMIUM} (Debian's chromium package) is needed for the page test"
    p, emu = proxy
    url = f"http://ops:{p.master_key}@{p.host}:{p.port}/sjf/"
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ctx = await browser.new_context()  # no stored credentials: only those in the URL
            page = await ctx.new_page()
            r = await page.goto(url)
            assert r.status == 200
            await page.wait_for_function("document.getElementById('summary').textContent.includes('(#2)')",
                                         timeout=30_000)  # two polls answered
            assert await page.text_content("#error") == ""
            error = "document.getElementById('error').textContent"
            cases = [(lambda route: route.fulfill(status=503, content_type="application/json",
                                                  body='{"error": {"message": "overloaded"}}'),
                      "GET /sjf/status answered HTTP 503: overloaded"),
                     (lambda route: route.fulfill(status=401, content_type="application/json",
                                                  body='{"error": {"message": "no"}}'),
                      "the key was refused (HTTP 401)"),
                     (lambda route: route.abort("connectionrefused"), "got no answer (network error")]
            for handler, expected in cases:
                await page.route("**/sjf/status", handler)
                await page.wait_for_function(f"{error}.includes({expected!r})", timeout=15_000)
                await page.unroute("**/sjf/status")
            await page.wait_for_function(f"{error} === ''", timeout=15_000)  # polls answered again
            # the accuracy chart's legend sits below the plot, where no data line goes
            boxes = await page.evaluate("""() => {
                const svg = document.getElementById('acc'), H = +svg.getAttribute('height');
                return [...svg.querySelectorAll('text.legend')].map(t => [t.textContent, t.getBBox().y, H - 28]); }""")
            assert sorted(b[0] for b in boxes) == ["— base", "— memory"], boxes
            assert all(y >= bottom for _, y, bottom in boxes), boxes
        finally:
            await browser.close()


async def test_a_superseded_request_gets_409_is_never_sent_and_is_not_logged_at_error(proxy):
    """With the README's config LiteLLM's router retries a 409 (its default num_retries): the
    retry must get the 409 again, not reach the backend around the queue. And LiteLLM logs
    every failed request at ERROR but a client's disconnect; the plugin's filter turns the
    record of its own 409 into INFO (off at the proxy's default level)."""
    p, emu = proxy
    emu.reset()
    hold = asyncio.create_task(_chat(p, HOLD))
    await wait_until(lambda: emu.stats()["held"] == 1, timeout=120)
    supersede = {"extra_headers": {"x-sjf-supersede": "buffer-1"}}
    first = asyncio.create_task(_chat(p, KEYSTROKES[0], **supersede))
    await wait_until(lambda: _backend(_get(p, "/sjf/status", p.master_key).json(), emu)["waiting"] == 1, 60)
    second = asyncio.create_task(_chat(p, KEYSTROKES[1], **supersede))
    with pytest.raises(openai.ConflictError):
        await first
    emu.release_holds()
    assert await asyncio.gather(hold, second) == [5, 8]
    assert _get(p, "/sjf/status", p.master_key).json()["counters"]["superseded_409"] == 1
    st = emu.stats()
    assert [o["hash"] for o in st["order"]] == [short_hash(HOLD), short_hash(KEYSTROKES[1])]  # never sent
    assert st["max_in_flight"] == 1
    log = p.log_text()
    assert "superseded" not in log.lower(), [ln for ln in log.splitlines() if "uperseded" in ln]
    assert CANARY not in log


# ---- a pooled burst: one model group over two serial backends ------------------------------
POOL_HOLDS = [f"Hold box {b}, please ({CANARY})." for b in "AB"]
POOL_WARM = f"Warm up the pool ({CANARY})."
POOL_TRACE = ([{"prompt": h, "answer_tokens": 5, "fault": "hold"} for h in POOL_HOLDS]
              + [{"prompt": POOL_WARM, "answer_tokens": 300}]
              + [{"prompt": q, "answer_tokens": n} for q, n in zip(BURST, ANSWERS)])
POOL_SHOT = SCREENSHOT.with_name("sjf-status-pool.png")


@pytest.fixture(scope="module")
def pooled():
    """The README's pool config: model group "llama3" with two deployments, one per emulator
    (docs/pool.md "Using it"), no SJF_* setting; the page is read during a pooled burst."""
    emus = [EmulatorThread(tokens_per_s=400, slots=1, trace_records=POOL_TRACE) for _ in range(2)]
    cfg = {"model_list": [{"model_name": "llama3", "litellm_params": {"model": "openai/llama3-8b", "api_base": e.base_url,
                                                                     "api_key": "none"}} for e in emus],
           "litellm_settings": {"callbacks": [PLUGIN_CALLBACK]}, "general_settings": {"cancel_on_disconnect": True}}
    p = None
    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith("SJF_")]:
            mp.delenv(name)
        try:
            p = LiteLLMProxy(cfg).start()
            yield p, emus
        finally:
            if p is not None:
                p.stop()
            for e in emus:
                e.stop()


async def _pool_chat(p: LiteLLMProxy, prompt: str) -> int:
    async with openai.AsyncOpenAI(base_url=p.openai_base_url, api_key=p.master_key, max_retries=0, timeout=120) as c:
        r = await c.chat.completions.create(model="llama3", messages=[{"role": "user", "content": prompt}])
        return r.usage.completion_tokens


async def test_page_shows_the_pooled_waiters_and_the_model_names_during_a_pooled_burst(pooled, tmp_path):
    """Both backends of the group held busy, 7 more requests wait in the group's pool (not on
    either backend): the JSON lists them under ``pools[0].queue.waiters`` with the model group,
    and the page's Pools section shows them, in dispatch order, beside the backends' model names."""
    from playwright.async_api import async_playwright

    assert _browser_available(), f"{CHROMIUM} (Debian's chromium package) is needed for the page test"
    p, emus = pooled
    assert await asyncio.gather(*[_pool_chat(p, POOL_WARM) for _ in range(2)]) == [300, 300]  # speeds measured
    holds = [asyncio.create_task(_pool_chat(p, h)) for h in POOL_HOLDS]
    await wait_until(lambda: [e.stats()["held"] for e in emus] == [1, 1], timeout=120)
    tasks = [asyncio.create_task(_pool_chat(p, q)) for q in BURST]
    try:
        await wait_until(lambda: (_get(p, "/sjf/status", p.master_key).json()["pools"] or [{}])[0].get("waiting") == 7, 60)
        doc = _get(p, "/sjf/status", p.master_key).json()
        pool = doc["pools"][0]
        assert pool["model_group"] == "llama3" and len(pool["queue"]["waiters"]) == 7, pool
        assert all(w["model"] == "llama3" and w["tenant_label"] == "default_user_id" for w in pool["queue"]["waiters"])
        assert [b["waiting"] for b in doc["backends"].values()] == [0, 0]  # they wait in the pool, not on a backend
        assert all(b["models"] == [{"group": "llama3", "deployment": "openai/llama3-8b"}] for b in doc["backends"].values())
        keys = [w["expected_tokens"] for w in pool["queue"]["waiters"]]
        assert keys == sorted(keys), "pooled waiters are listed in dispatch (SJF) order"
        assert all(w["start_in_s"] is not None for w in pool["queue"]["waiters"])
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                ctx = await browser.new_context(http_credentials={"username": "ops", "password": p.master_key},
                                                viewport={"width": 1280, "height": 900})
                page = await ctx.new_page()
                assert (await page.goto(p.base_url + "/sjf/")).status == 200
                rows = "section[data-pool] table.pool-waiters tr"
                await page.wait_for_function(f"document.querySelectorAll('{rows}').length === 8", timeout=60_000)
                col = lambda n: page.locator(f"{rows} td:nth-child({n})").all_inner_texts()  # noqa: E731
                assert set(await col(3)) == {"llama3"} and set(await col(4)) <= {"short", "medium", "long"}
                card = await page.locator("section[data-pool]").inner_text()
                assert "model group llama3 · pool of 2 backends" in card and "waiting in the pool 7" in card, card
                for b in await page.locator("section[data-backend]").all_inner_texts():
                    assert "models: llama3 (openai/llama3-8b)" in b and "+ 7 waiting in the pool of model group llama3" in b
                html = await page.content()
                assert CANARY not in html and CANARY[-12:] not in html
                shot = tmp_path / POOL_SHOT.name
                await page.screenshot(path=str(shot), full_page=True)
                if os.environ.get("SAVE_STATUS_SCREENSHOT"):  # refresh the one in docs/img
                    shutil.copy(shot, POOL_SHOT)
                for e in emus:
                    e.release_holds()
                await asyncio.gather(*holds, *tasks)
                await page.wait_for_function(f"[...document.querySelectorAll('{rows}')].length === 2 && "
                                             f"document.querySelector('{rows}:last-child').textContent === 'none'",
                                             timeout=60_000)
            finally:
                await browser.close()
    finally:
        for e in emus:
            e.release_holds()
        await asyncio.gather(*holds, *tasks, return_exceptions=True)
    assert sum(e.stats()["max_in_flight"] for e in emus) == 2  # one at a time on each backend


# ---- tenants named by LiteLLM's key alias / user id ----------------------------------------
KEYED = [f"Keyed request {i} ({CANARY})" for i in range(4)]
KEYED_TRACE = [{"prompt": HOLD, "answer_tokens": 5, "fault": "hold"}] + [{"prompt": k, "answer_tokens": 20}
                                                                          for k in KEYED]


async def test_waiters_show_the_key_alias_or_the_user_id_of_their_litellm_key():
    """Virtual keys with an alias and a user id (LiteLLM's ``custom_auth``, no database): each
    waiter's tenant is shown as its key's alias, else its user id, beside the hashed id; the
    key itself and the prompt never."""
    emu = EmulatorThread(tokens_per_s=2000, slots=1, trace_records=KEYED_TRACE)
    cfg = readme_config(emu.base_url)
    cfg["general_settings"]["custom_auth"] = "custom_auth_keys.user_api_key_auth"
    tests_dir = str(Path(__file__).resolve().parents[1])
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [tests_dir, os.environ.get("PYTHONPATH")]))}
    p = LiteLLMProxy(cfg, env=env).start()
    try:
        async def ask(key: str, prompt: str) -> int:
            async with openai.AsyncOpenAI(base_url=p.openai_base_url, api_key=key, max_retries=0, timeout=120) as c:
                r = await c.chat.completions.create(model="local", messages=[{"role": "user", "content": prompt}])
                return r.usage.completion_tokens

        hold = asyncio.create_task(ask(p.master_key, HOLD))
        await wait_until(lambda: emu.stats()["held"] == 1, timeout=120)
        keys = ["sk-support-bot", "sk-nightly-job", "sk-support-bot", "sk-nightly-job"]
        tasks = [asyncio.create_task(ask(k, q)) for k, q in zip(keys, KEYED)]
        try:
            await wait_until(lambda: _backend(_get(p, "/sjf/status", p.master_key).json(), emu)["waiting"] == 4, 60)
            r = _get(p, "/sjf/status", p.master_key)
            waiters = _backend(r.json(), emu)["queue"]["waiters"]
            assert sorted(w["tenant_label"] for w in waiters) == ["support-bot", "support-bot", "u-nightly", "u-nightly"]
            assert len({w["tenant"] for w in waiters}) == 2 and all(re.fullmatch(r"[0-9a-f]{12}", w["tenant"])
                                                                    for w in waiters)
            running = _backend(r.json(), emu)["queue"]["running"]
            assert running[0]["tenant_label"] == "admin"  # the master key's user id
            assert "sk-support-bot" not in r.text and "sk-nightly-job" not in r.text and CANARY[-12:] not in r.text
        finally:
            emu.release_holds()
            assert await asyncio.gather(hold, *tasks) == [5, 20, 20, 20, 20]
    finally:
        p.stop()
        emu.stop()
