"""Overload control: queue-depth and predicted-wait limits, the cost ladder (most expensive
class shed first), defer-then-admit/reject, nothing admitted is ever dropped.

Unit tests on the in-process queue and in the simulator; live tests through the OpenAI
wrapper (``openai.RateLimitError``) and through a real LiteLLM proxy with the plugin
(HTTP 429 + ``Retry-After``), both against the emulator.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from sjf_core.admission._local import LocalAdmissionQueue
from sjf_core.policy._entry import LONG, MEDIUM, SHORT
from sjf_core._errors import AdmissionRejected
from sjf_core.admission._overload import OverloadConfig
from sjf_core.policy._policies import make_policy
from sjf_core.predict._prediction import Prediction
from sjf_core._scheduler import Scheduler

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PROBS = {SHORT: (0.9, 0.05, 0.05), MEDIUM: (0.05, 0.9, 0.05), LONG: (0.05, 0.05, 0.9)}


def pred(c: int) -> Prediction:
    return Prediction.from_probs(PROBS[c])


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


# ---- config -----------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [{"max_queue_depth": 0}, {"max_predicted_wait_s": -1}, {"ladder": (1, 1.2, 1)},
                                 {"ladder": (1, 1)}, {"defer_s": -1}, {"unknown": 1}])
def test_bad_overload_settings_raise(bad):
    with pytest.raises(ValueError):
        OverloadConfig.parse(bad)
    with pytest.raises(ValueError):
        Scheduler(predictor=None, overload=bad, plugins=False)


def test_scheduler_passes_limits_per_backend():
    s = Scheduler(predictor=None, plugins=False, overload={"max_queue_depth": 8},
                  backend_overload={"http://b/v1/": {"max_queue_depth": 2}}, rate_limit="60/min")
    assert s.queue("http://a/v1").overload.config.max_queue_depth == 8
    assert s.queue("http://b/v1").overload.config.max_queue_depth == 2
    assert s.queue("http://a/v1").rate_limit.count == 60
    assert Scheduler(predictor=None, plugins=False).queue("x").overload is None


# ---- the ladder on the live in-process queue --------------------------------------------------
async def test_depth_ladder_sheds_long_first_and_never_exceeds_the_limit():
    q = LocalAdmissionQueue(slots=1, policy="sjf", name="emu", overload={"max_queue_depth": 10})
    holder = q.ticket(pred(SHORT))
    await holder.acquire()
    admitted, rejected = [], []

    async def submit(c):
        t = q.ticket(pred(c))
        try:
            await t.acquire()
        except AdmissionRejected as exc:
            rejected.append((c, exc))
            return
        admitted.append(c)
        t.release()

    tasks = []
    for c in [LONG] * 8 + [MEDIUM] * 4 + [SHORT] * 6:
        tasks.append(asyncio.create_task(submit(c)))
        await settle()
    # limits: Long 6 (60%), Medium 8 (80%), Short 10
    assert q.waiting == 10 and q.stats.max_waiting == 10
    assert [c for c, _ in rejected] == [LONG, LONG, MEDIUM, MEDIUM, SHORT, SHORT, SHORT, SHORT]
    for _, exc in rejected:
        assert exc.reason == "queue_depth" and exc.backend == "emu" and exc.retry_after_s >= 1.0
    holder.release()
    await asyncio.gather(*tasks)
    assert sorted(admitted) == sorted([LONG] * 6 + [MEDIUM] * 2 + [SHORT] * 2)  # none admitted was lost
    assert q.stats.rejected == 8 and q.stats.released == 11 and q.in_flight == 0 and q.waiting == 0


async def test_predicted_wait_limit_uses_observed_service_times():
    q = LocalAdmissionQueue(slots=1, policy="sjf", name="w", overload={"max_predicted_wait_s": 40.0})
    holder = q.ticket(pred(LONG))
    await holder.acquire()  # running Long: ~30.1 s expected (Table 1 seed)
    t_long = q.ticket(pred(LONG))
    with pytest.raises(AdmissionRejected) as info:  # Long limit 24 s < 30.1 s ahead
        await t_long.acquire()
    assert info.value.reason == "predicted_wait" and info.value.retry_after_s == pytest.approx(30.1 - 24, abs=0.5)
    async def short():
        async with q.ticket(pred(SHORT)):
            pass

    shorts = [asyncio.create_task(short()) for _ in range(3)]
    await settle()
    assert q.waiting == 3  # 30.1 + 2 + 2 s of work ahead: still <= 40 s for a Short
    holder.release()
    await asyncio.gather(*shorts)
    assert q.stats.rejected == 1 and q.in_flight == 0


async def test_deferred_request_is_admitted_when_the_queue_drains_or_rejected_after_defer_s():
    q = LocalAdmissionQueue(slots=1, policy="sjf", overload={"max_queue_depth": 1, "defer_s": 30.0})
    holder = q.ticket(pred(SHORT))
    await holder.acquire()
    first = q.ticket(pred(SHORT))
    t1 = asyncio.create_task(first.acquire())
    await settle()
    deferred = q.ticket(pred(SHORT))
    t2 = asyncio.create_task(deferred.acquire())
    await settle()
    assert deferred.state == "deferred" and q.waiting == 1 and q.stats.deferred == 1
    holder.release()  # first runs, the queue has room: the deferred one enters it
    await t1
    assert deferred.state == "queued"
    first.release()
    await t2
    assert deferred.state == "running"
    deferred.release()

    q2 = LocalAdmissionQueue(slots=1, policy="sjf", overload={"max_queue_depth": 1, "defer_s": 0.05})
    h2 = q2.ticket(pred(SHORT))
    await h2.acquire()
    w = asyncio.create_task(q2.ticket(pred(SHORT)).acquire())
    await settle()
    late = q2.ticket(pred(SHORT))
    with pytest.raises(AdmissionRejected):
        await late.acquire()
    assert late.state == "rejected" and q2.stats.rejected == 1
    h2.release()
    await w


async def test_cancel_while_deferred_leaves_no_trace():
    q = LocalAdmissionQueue(slots=1, policy="sjf", overload={"max_queue_depth": 1, "defer_s": 60.0})
    holder = q.ticket(pred(SHORT))
    await holder.acquire()
    w = asyncio.create_task(q.ticket(pred(SHORT)).acquire())
    await settle()
    d = q.ticket(pred(SHORT))
    task = asyncio.create_task(d.acquire())
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert d.state == "cancelled" and not q.door.deferred
    holder.release()
    await w


# ---- the simulator drives the same overload control ---------------------------------------------
def test_simulated_overload_sheds_by_class_and_completes_every_admitted_request():
    from sjf_lab.sim import PredictorModel, WorkloadSpec, poisson_workload, simulate

    spec = WorkloadSpec(c2=1.0)
    wl = poisson_workload(spec, 1.3, 3000, seed=2)  # 30% over capacity
    preds, _ = PredictorModel("class", 1.0).predict(wl, np.random.default_rng(0))
    cfg = OverloadConfig(max_queue_depth=40, max_predicted_wait_s=300)
    r = simulate(wl, preds, make_policy("sjf"), overload=cfg)
    shed = [r.rejected[wl.klass == c].mean() for c in (SHORT, MEDIUM, LONG)]
    assert shed[LONG] > shed[MEDIUM] > shed[SHORT]  # the most expensive class first
    assert r.max_waiting <= 40
    admitted = ~r.rejected
    assert np.isfinite(r.sojourn[admitted]).all()  # every admitted request completed
    unlimited = simulate(wl, preds, make_policy("sjf"))
    assert r.stat("sojourn", SHORT, 95) < unlimited.stat("sojourn", SHORT, 95)


# ---- live: the OpenAI wrapper maps a rejection to openai.RateLimitError ---------------------------
async def test_openai_wrapper_raises_rate_limit_error(emulator_factory):
    import openai_sjf

    hold = "hold the only slot"
    emu = await emulator_factory(tokens_per_s=500, trace_records=[
        {"prompt": hold, "answer_tokens": 5, "fault": "hold"}, {"prompt": "fine", "answer_tokens": 5}])
    sched = Scheduler(predictor=None, policy="sjf", plugins=False, overload={"max_queue_depth": 1})
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0), scheduler=sched)

    async def chat(text):
        r = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}])
        return r.usage.completion_tokens

    held = asyncio.create_task(chat(hold))
    while emu.stats()["held"] != 1:
        await asyncio.sleep(0.02)
    queued = asyncio.create_task(chat("fine"))
    q = sched.queue(emu.base_url)
    while q.waiting != 1:
        await asyncio.sleep(0.01)
    with pytest.raises(openai.RateLimitError) as info:
        await chat("fine")
    assert int(info.value.response.headers["retry-after"]) >= 1
    emu.release_holds()
    assert await held == 5 and await queued == 5  # the admitted ones were not lost
    assert emu.stats()["received"] == 2 and q.in_flight == 0
    await client.close()


# ---- live: LiteLLM proxy + plugin: HTTP 429 with Retry-After ---------------------------------------
HOLD = "HOLD the backend"


@pytest.fixture(scope="module")
def proxy_harness():
    from sjf_lab.emulator import EmulatorThread
    from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config

    trace = [{"prompt": HOLD, "answer_tokens": 5, "fault": "hold"}]
    trace += [{"prompt": f"{c} request {i}", "answer_tokens": 8} for c in ("SHORT", "LONG") for i in range(4)]
    emu = EmulatorThread(tokens_per_s=400, slots=1, trace_records=trace)
    status_port = free_port()
    tests_dir = str(Path(__file__).resolve().parents[1])
    env = {"SJF_SCHEDULER_FACTORY": "overload_factory:make", "SJF_STATUS_PORT": str(status_port),
           "SJF_TEST_OVERLOAD": json.dumps({"max_queue_depth": 4, "ladder": [1.0, 0.75, 0.5]}),
           "PYTHONPATH": os.pathsep.join([tests_dir, os.environ.get("PYTHONPATH", "")])}
    proxy = LiteLLMProxy(proxy_config({"emu": [emu.base_url]}, plugin=True), env=env)
    try:
        proxy.start()
        yield proxy, emu, status_port
    finally:
        proxy.stop()
        emu.stop()


async def test_litellm_proxy_rejects_with_429_and_retry_after_and_loses_nothing(proxy_harness):
    proxy, emu, status_port = proxy_harness
    url = proxy.openai_base_url + "/chat/completions"
    headers = {"Authorization": f"Bearer {proxy.master_key}"}

    def plugin_queue():
        st = httpx.get(f"http://127.0.0.1:{status_port}/sjf/status", timeout=10).json()
        return st["backends"].get(emu.base_url, {"waiting": 0, "in_flight": 0, "stats": {}})

    async def wait_for(pred, timeout=60.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return True
            await asyncio.sleep(0.05)
        return pred()

    async with httpx.AsyncClient(timeout=120) as hc:
        async def post(text):
            return await hc.post(url, headers=headers,
                                 json={"model": "emu", "messages": [{"role": "user", "content": text}]})

        held = asyncio.create_task(post(HOLD))
        assert await wait_for(lambda: emu.stats()["held"] == 1)
        admitted, rejected = [], []
        # limits with max depth 4 and ladder (1.0, 0.75, 0.5): Long 2, Short 4
        for i, cls in enumerate(["LONG", "LONG", "LONG", "SHORT", "SHORT", "SHORT"]):
            text = f"{cls} request {i % 4}"
            task = asyncio.create_task(post(text))
            # each request is either queued (waiting grows) or answered at once with 429
            before = len(admitted)
            ok = await wait_for(lambda: task.done() or plugin_queue()["waiting"] == before + 1)
            assert ok, proxy.log_text(3000)
            if task.done():
                rejected.append((cls, task.result()))
            else:
                admitted.append((cls, task))
        assert [c for c, _ in rejected] == ["LONG", "SHORT"]
        for _, resp in rejected:
            assert resp.status_code == 429, resp.text
            assert int(resp.headers["retry-after"]) >= 1

        # the SDK view of the same rejection: openai.RateLimitError
        sdk = openai.AsyncOpenAI(base_url=proxy.openai_base_url, api_key=proxy.master_key, max_retries=0)
        with pytest.raises(openai.RateLimitError) as info:
            await sdk.chat.completions.create(model="emu", messages=[{"role": "user", "content": "SHORT request 3"}])
        assert int(info.value.response.headers["retry-after"]) >= 1
        await sdk.close()

        emu.release_holds()
        results = await asyncio.gather(held, *[t for _, t in admitted])
        assert [r.status_code for r in results] == [200] * 5  # every admitted request answered
        assert [c for c, _ in admitted] == ["LONG", "LONG", "SHORT", "SHORT"]
        st = emu.stats()
        assert st["received"] == 5 and st["served"] == 5  # rejected ones never reached the backend
        served = [o["hash"] for o in st["order"]]
        from sjf_lab.emulator import short_hash

        # SJF among the admitted: the Shorts before the Longs that were queued before them
        assert served == [short_hash(t) for t in (HOLD, "SHORT request 3", "SHORT request 0",
                                                  "LONG request 0", "LONG request 1")]
    assert await wait_for(lambda: plugin_queue()["in_flight"] == 0 and plugin_queue()["waiting"] == 0)
    q = plugin_queue()
    assert q["stats"]["rejected"] == 3
