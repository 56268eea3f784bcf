"""Prometheus metrics listener: values follow the queue exactly, labels carry no text,
and the families are served over HTTP (start_metrics_server)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys

import httpx
import pytest
from prometheus_client import REGISTRY, CollectorRegistry

from sjf_core import Prediction, Scheduler, SchedulerConfig, start_metrics
from sjf_core.ext._metrics import PrometheusMetrics, backend_label, start_metrics_server

BACKEND = "http://127.0.0.1:9/v1"


class LengthPredictor:
    """Deterministic: the prompt "short…" is Short, "long…" is Long, "boom" raises."""

    def predict(self, text: str) -> Prediction:
        if text.startswith("boom"):
            raise RuntimeError("predictor exploded")
        if text.startswith("long"):
            return Prediction.from_probs([0.05, 0.05, 0.9])
        return Prediction.from_probs([0.9, 0.05, 0.05])


def chat(text):
    return {"model": "m", "messages": [{"role": "user", "content": text}]}


@pytest.fixture
def reg():
    return CollectorRegistry()


def val(reg, name, **labels):
    """The sample's value; a sample that is not exported fails (a misnamed metric or label
    must not read as 0)."""
    v = reg.get_sample_value(name, labels)
    if v is None:
        known = sorted({(s.name, tuple(sorted(s.labels.items()))) for m in reg.collect() for s in m.samples
                        if s.name.startswith(name.rsplit("_", 1)[0])})
        pytest.fail(f"no sample {name}{labels}; exported: {known[:20]}")
    return v


def unobserved(reg, name, **labels) -> bool:
    """True when the family ``name`` is registered but has no series for ``labels``: the
    check for "never counted" on a labelled metric, which fails for a misnamed family."""
    families = {m.name: m.type for m in reg.collect()}
    suffixes = {"counter": ("_total",), "histogram": ("_count", "_sum", "_bucket"), "gauge": ("",)}
    assert any(name == fam + sfx for fam, typ in families.items() for sfx in suffixes.get(typ, ("",))), \
        f"metric {name} is not registered; families: {sorted(families)}"
    return reg.get_sample_value(name, labels) is None


async def test_burst_gauges_counters_and_histograms(reg):
    s = Scheduler(predictor=LengthPredictor(), tau="off", listeners=[PrometheusMetrics(reg)])
    b = BACKEND
    holder = s.ticket(b, chat("short first"))
    await holder.acquire()

    async def run(text):
        t = s.ticket(b, chat(text))
        await t.acquire()
        await asyncio.sleep(0)
        t.release(900 if text.startswith("long") else 50)  # true length from "usage"

    tasks = [asyncio.create_task(run(("long " if i % 2 else "short ") + str(i))) for i in range(6)]
    await asyncio.sleep(0.02)
    # during the burst
    assert val(reg, "sjf_queue_depth", backend=b) == 6
    assert val(reg, "sjf_in_flight", backend=b) == 1
    assert val(reg, "sjf_enqueued_total", backend=b, predicted_class="long") == 3
    assert val(reg, "sjf_enqueued_total", backend=b, predicted_class="short") == 4
    holder.release(50)
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert val(reg, "sjf_queue_depth", backend=b) == 0
    assert val(reg, "sjf_in_flight", backend=b) == 0
    assert val(reg, "sjf_admissions_total", backend=b, predicted_class="short") == 4
    assert val(reg, "sjf_admissions_total", backend=b, predicted_class="long") == 3
    assert val(reg, "sjf_completions_total", backend=b, true_class="short") == 4
    assert val(reg, "sjf_completions_total", backend=b, true_class="long") == 3
    assert val(reg, "sjf_queue_wait_seconds_count", backend=b, predicted_class="long") == 3
    assert val(reg, "sjf_queue_wait_by_true_class_seconds_count", backend=b, true_class="long") == 3
    # the Long requests waited behind every Short one
    assert val(reg, "sjf_queue_wait_seconds_sum", backend=b, predicted_class="long") > 0
    assert val(reg, "sjf_predictor_latency_seconds_count") == 7
    assert val(reg, "sjf_tau_seconds", backend=b) == float("inf")


async def test_cancel_fail_open_predictor_error_and_unknown_true_class(reg):
    s = Scheduler(predictor=LengthPredictor(), listeners=[PrometheusMetrics(reg)])
    b = BACKEND
    holder = s.ticket(b, {"messages": [{"role": "user", "content": None}]})  # unscorable
    await holder.acquire()
    waiter = s.ticket(b, chat("boom"))  # predictor raises
    with pytest.raises(asyncio.TimeoutError):
        await waiter.acquire(timeout=0.01)
    holder.release()  # no usage known
    assert val(reg, "sjf_fail_open_total", backend=b, reason="unscored") == 2
    assert val(reg, "sjf_predictor_errors_total") == 1
    assert val(reg, "sjf_predictor_latency_seconds_count") == 1
    assert val(reg, "sjf_cancellations_total", backend=b) == 1
    assert val(reg, "sjf_completions_total", backend=b, true_class="unknown") == 1
    # a completion of unknown length records no wait-by-true-class sample
    assert unobserved(reg, "sjf_queue_wait_by_true_class_seconds_count", backend=b, true_class="unknown")
    assert val(reg, "sjf_queue_depth", backend=b) == 0 and val(reg, "sjf_in_flight", backend=b) == 0


async def test_tau_promotion_and_lease_expiry_counted(reg):
    s = Scheduler(predictor=LengthPredictor(), tau=0.01, lease_ttl_s=0.3, policy_options={"promotion": "strict"},
                  listeners=[PrometheusMetrics(reg)])
    b = BACKEND
    holder = s.ticket(b, chat("short"))
    await holder.acquire()
    old_long = s.ticket(b, chat("long one"))
    t1 = asyncio.create_task(old_long.acquire())
    await asyncio.sleep(0.02)  # the Long waiter passes τ
    fresh_short = s.ticket(b, chat("short two"))
    t2 = asyncio.create_task(fresh_short.acquire())
    await asyncio.wait_for(t1, 5)  # holder's lease expires; τ promotes the old Long one
    assert old_long.state == "running" and fresh_short.state == "queued"
    assert val(reg, "sjf_lease_expirations_total", backend=b) == 1
    assert val(reg, "sjf_tau_promotions_total", backend=b) == 1
    old_long.release(900)
    await t2
    fresh_short.release(10)
    assert val(reg, "sjf_in_flight", backend=b) == 0


def test_rejection_reason_labels_are_bounded(reg):
    m = PrometheusMetrics(reg)
    m.on_reject(BACKEND, None, "queue_depth")
    m.on_reject(BACKEND, None, reason="Predicted Wait!")
    m.on_reject(BACKEND, None, "x" * 500)
    assert val(reg, "sjf_rejections_total", backend=BACKEND, reason="queue_depth") == 1
    assert val(reg, "sjf_rejections_total", backend=BACKEND, reason="predicted_wait") == 1
    assert val(reg, "sjf_rejections_total", backend=BACKEND, reason="x" * 40) == 1


def test_backend_label_drops_credentials_and_query():
    assert backend_label("http://user:secret@10.0.0.1:8080/v1?key=abc#frag") == "http://10.0.0.1:8080/v1"
    assert backend_label(None) == "default"
    assert len(backend_label("x" * 1000)) == 200


def test_two_listeners_share_one_registry(reg):
    a, b = PrometheusMetrics(reg), PrometheusMetrics(reg)
    assert a.f is b.f
    a.fail_open(BACKEND, "scheduler_error")
    b.fail_open(BACKEND, "scheduler_error")
    assert val(reg, "sjf_fail_open_total", backend=BACKEND, reason="scheduler_error") == 2


async def test_metrics_server_serves_the_families(reg, monkeypatch):
    s = Scheduler(predictor=LengthPredictor(), listeners=[PrometheusMetrics(reg)])
    async with s.ticket(BACKEND, chat("short")):
        pass
    server, thread = start_metrics_server(0, registry=reg)
    try:
        assert server.server_address[0] == "127.0.0.1"
        async with httpx.AsyncClient() as c:
            r = await c.get(f"http://127.0.0.1:{server.server_port}/metrics")
        assert r.status_code == 200
        assert f'sjf_admissions_total{{backend="{BACKEND}",predicted_class="short"}} 1.0' in r.text
        assert 'sjf_in_flight{backend="http://127.0.0.1:9/v1"} 0.0' in r.text
    finally:
        server.shutdown()
        server.server_close()


def test_default_listener_on_unless_disabled(reg):
    assert any(isinstance(x, PrometheusMetrics) and x.registry is REGISTRY for x in Scheduler(predictor=None).listeners)
    mine = PrometheusMetrics(reg)
    assert [x for x in Scheduler(predictor=None, listeners=[mine]).listeners if isinstance(x, PrometheusMetrics)] == [mine]
    off = SchedulerConfig.from_env({"SJF_METRICS": "off"})
    assert not any(isinstance(x, PrometheusMetrics) for x in Scheduler(off, predictor=None).listeners)
    assert start_metrics(off.replace(metrics_port=0)) is None  # metrics off: no server either


def test_sjf_metrics_port_starts_a_server_only_when_asked_in_a_fresh_process(tmp_path):
    """Building a Scheduler never starts a server, even with SJF_METRICS_PORT set; the
    explicit start (here the OpenAI wrapper's ``wrap``) serves the default registry."""
    port = free_port()
    code = (
        "import asyncio, socket, urllib.request, openai, openai_sjf\n"
        "from sjf_core import Scheduler, SchedulerConfig, start_metrics\n"
        "s = Scheduler(SchedulerConfig.from_env(), predictor=None)\n"
        "async def go():\n"
        "    async with s.ticket('http://127.0.0.1:9/v1', {'messages': []}):\n"
        "        pass\n"
        "asyncio.run(go())\n"
        "c = socket.socket()\n"
        f"print('LISTENING_BEFORE', c.connect_ex(('127.0.0.1', {port})) == 0)\n"
        "c.close()\n"
        "openai_sjf.wrap(openai.AsyncOpenAI(base_url='http://127.0.0.1:9/v1', api_key='k'))\n"
        "assert start_metrics(s.config) is start_metrics(s.config)  # once per process\n"
        f"print(urllib.request.urlopen('http://127.0.0.1:{port}/metrics', timeout=10).read().decode())\n"
    )
    # SJF_PREDICTOR=none: wrap() preloads no model in a thread the interpreter's exit would cut short
    env = {**os.environ, "SJF_METRICS_PORT": str(port), "SJF_PLUGINS": "none", "SJF_PREDICTOR": "none"}
    env.pop("SJF_METRICS", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "LISTENING_BEFORE False" in out.stdout
    assert 'sjf_admissions_total{backend="http://127.0.0.1:9/v1",predicted_class="unscored"} 1.0' in out.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_overload_rejections_counted_by_reason(reg):
    from sjf_core._errors import AdmissionRejected

    s = Scheduler(predictor=LengthPredictor(), listeners=[PrometheusMetrics(reg)], plugins=False,
                  overload={"max_queue_depth": 1})
    b = BACKEND
    holder = s.ticket(b, chat("short"))
    await holder.acquire()
    waiter = s.ticket(b, chat("short two"))
    task = asyncio.create_task(waiter.acquire())
    await asyncio.sleep(0)
    refused = s.ticket(b, chat("short three"))
    with pytest.raises(AdmissionRejected) as ei:
        await refused.acquire()
    holder.release(10)
    await task
    waiter.release(10)
    assert val(reg, "sjf_rejections_total", backend=b, reason=ei.value.reason) == 1
    assert val(reg, "sjf_queue_depth", backend=b) == 0 and val(reg, "sjf_in_flight", backend=b) == 0


def test_backend_label_with_lone_surrogates_keeps_the_exposition_valid():
    """A queue key that is not valid UTF-8 must not break the text exposition (LiteLLM's /metrics)."""
    from prometheus_client import CollectorRegistry, generate_latest

    from sjf_core.ext._metrics import backend_label

    reg = CollectorRegistry()
    from prometheus_client import Gauge

    g = Gauge("sjf_test_depth", "test", ["backend"], registry=reg)
    g.labels(backend_label("http://127.0.0.1:1/v1/\udcff\ud800")).set(1)
    text = generate_latest(reg).decode("utf-8")
    assert "sjf_test_depth" in text
