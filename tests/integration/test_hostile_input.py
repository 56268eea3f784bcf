"""Hostile and odd input through the OpenAI wrapper and the LiteLLM proxy (issue 8).

For every case of :mod:`hostile_cases` the outcome WITHOUT the plugin must equal the
outcome WITH it (same emulator), no request may hang, and afterwards no slot is held
or queued (the scheduler's queues, the proxy's ``sjf_*`` gauges on ``/metrics``, and
the emulator's own in-flight counter). The matrix is printed (``pytest -s``) and
written to ``runs/hostile_matrix_<side>.md``.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from hostile_cases import CASES, markdown_table, parse_prometheus, send_http, send_sdk
from sjf_core import Scheduler
from sjf_lab.emulator import EmulatorConfig, EmulatorThread

RUNS = Path(__file__).resolve().parents[2] / "runs"
GROUP = "emu"


@pytest.fixture(scope="module")
def emulator():
    emu = EmulatorThread(EmulatorConfig(tokens_per_s=20_000, slots=1, tick_s=0.005))
    yield emu
    emu.stop()


async def settle(emulator, timeout_s: float = 10.0) -> int:
    """Wait until the emulator has no open request; returns its in-flight count."""
    deadline = time.monotonic() + timeout_s
    while True:
        n = emulator.stats()["in_flight"]
        if n == 0 or time.monotonic() > deadline:
            return n
        await asyncio.sleep(0.05)


def write_matrix(side: str, header, rows) -> str:
    table = markdown_table(header, rows)
    RUNS.mkdir(exist_ok=True)
    (RUNS / f"hostile_matrix_{side}.md").write_text(table + "\n")
    print(f"\nHostile-input matrix ({side}):\n" + table)
    return table


async def test_wrapper_matrix(emulator):
    import openai

    import openai_sjf

    sched = Scheduler(predictor="default", plugins=False)
    raw = openai.AsyncOpenAI(base_url=emulator.base_url, api_key="x", max_retries=0)
    wrapped = openai_sjf.wrap(raw, scheduler=sched)
    rows, bad = [], []
    def enqueued():
        return sum(q.stats.enqueued for q in sched.queues.values())

    for i, case in enumerate(CASES, 1):
        without = await send_sdk(raw, case, GROUP)
        before = enqueued()
        with_ = await send_sdk(wrapped, case, GROUP)
        queued = enqueued() - before
        held = sum(q.in_flight + q.waiting for q in sched.queues.values())
        open_at_backend = await settle(emulator)
        ok = without == with_ and "HANG" not in (without, with_) and held == 0 and open_at_backend == 0
        rows.append([i, case.name, case.path, without, with_, queued, held, "yes" if ok else "**NO**"])
        if not ok:
            bad.append(case.name)
    write_matrix("wrapper", ["#", "input", "endpoint", "without wrapper", "with wrapper", "queued by SJF", "slots held after",
                               "match"], rows)
    assert not bad, f"mismatch, hang or leaked slot: {bad}"
    assert any(q.stats.dispatched > 0 for q in sched.queues.values())  # admission really ran
    await wrapped.close()
    await raw.close()


# ---- LiteLLM proxy: two proxies (with and without the plugin) on one emulator ----------------

@pytest.fixture(scope="module")
def proxies(emulator):
    from sjf_lab.proxy_runner import LiteLLMProxy, proxy_config

    models = {GROUP: [emulator.base_url]}
    env = {"SJF_PLUGINS": "none"}
    plain = LiteLLMProxy(proxy_config(models, plugin=False, litellm_settings={"callbacks": ["prometheus"]}), env=env)
    sjf = LiteLLMProxy(proxy_config(models, plugin=True, litellm_settings={
        "callbacks": ["prometheus", "litellm_sjf.proxy_handler_instance"]}), env=env)
    with ThreadPoolExecutor(2) as ex:
        futures = [ex.submit(p.start) for p in (plain, sjf)]
        errors = [f.exception() for f in futures]
    if any(errors):
        plain.stop()
        sjf.stop()
        raise errors[0] if errors[0] else errors[1]
    yield plain, sjf
    sjf.stop()
    plain.stop()


async def sjf_gauges(client: httpx.AsyncClient, proxy, require: bool = True) -> tuple[float, float, str]:
    """(sum of sjf_in_flight, sum of sjf_queue_depth, scrape text) from the proxy's own /metrics
    (LiteLLM's prometheus callback; it requires the master key by default)."""
    r = await client.get(proxy.base_url.rstrip("/") + "/metrics/",
                         headers={"Authorization": f"Bearer {proxy.master_key}"})
    assert r.status_code == 200, r.text[:300]
    text = r.text
    if require:  # (the plugin creates its scheduler, and so the families, at its first request)
        assert "# TYPE sjf_in_flight gauge" in text and "# TYPE sjf_queue_depth gauge" in text
    return (sum(parse_prometheus(text, "sjf_in_flight").values()),
            sum(parse_prometheus(text, "sjf_queue_depth").values()), text)


async def test_proxy_matrix(emulator, proxies):
    plain, sjf = proxies
    rows, bad = [], []
    async with httpx.AsyncClient(timeout=120) as client:
        _, _, text = await sjf_gauges(client, sjf, require=False)
        for i, case in enumerate(CASES, 1):
            before = sum(parse_prometheus(text, "sjf_enqueued_total").values())
            without = await send_http(client, plain.openai_base_url, plain.master_key, case, GROUP)
            with_ = await send_http(client, sjf.openai_base_url, sjf.master_key, case, GROUP)
            open_at_backend = await settle(emulator)
            in_flight, depth, text = await sjf_gauges(client, sjf)
            queued = int(sum(parse_prometheus(text, "sjf_enqueued_total").values()) - before)
            ok = (without == with_ and "HANG" not in (without, with_)
                  and in_flight == 0 and depth == 0 and open_at_backend == 0)
            rows.append([i, case.name, case.path, without, with_, queued, int(in_flight + depth),
                         "yes" if ok else "**NO**"])
            if not ok:
                bad.append(case.name)
        _, _, text = await sjf_gauges(client, sjf)
    write_matrix("proxy", ["#", "input", "endpoint", "without plugin", "with plugin", "queued by SJF", "slots held after",
                               "match"], rows)
    assert not bad, f"mismatch, hang or leaked slot: {bad}"
    # the plugin proxy really admitted requests, and its sjf_* families are on LiteLLM's /metrics
    assert sum(parse_prometheus(text, "sjf_admissions_total").values()) > 0
