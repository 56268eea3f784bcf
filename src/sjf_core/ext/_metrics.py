"""Prometheus metrics of the admission layer (prometheus-client).

:class:`PrometheusMetrics` is a :class:`~sjf_core.admission._local.QueueEvents` listener::

    from sjf_core import Scheduler
    from sjf_core.ext._metrics import PrometheusMetrics

    scheduler = Scheduler(listeners=[PrometheusMetrics()])      # default REGISTRY

Metric families (names and units follow the Prometheus conventions; every label value
is a backend key or a class name, never prompt text):

=========================================  =========  ==============================================
name                                        type       labels
=========================================  =========  ==============================================
``sjf_queue_depth``                         gauge      backend: requests waiting for a slot
``sjf_in_flight``                           gauge      backend: requests holding a slot
``sjf_tau_seconds``                         gauge      backend: current τ (``+Inf`` when off)
``sjf_enqueued_total``                      counter    backend, predicted_class
``sjf_admissions_total``                    counter    backend, predicted_class (slot granted)
``sjf_completions_total``                   counter    backend, true_class (slot released)
``sjf_cancellations_total``                 counter    backend (caller left while queued)
``sjf_tau_promotions_total``                counter    backend (dispatched by the τ guard)
``sjf_rejections_total``                    counter    backend, reason (overload control)
``sjf_fail_open_total``                     counter    backend, reason (FCFS fallback)
``sjf_lease_expirations_total``             counter    backend (slot force-released by the lease)
``sjf_predictor_errors_total``              counter    (none)
``sjf_backend_probes_total``                counter    backend, outcome (``sent``, ``ok``, ``timeout``,
                                                       ``error``, ``shared``): idle probes,
                                                       :mod:`sjf_core.admission._probe`
``sjf_queue_wait_seconds``                  histogram  backend, predicted_class: submit → dispatch
``sjf_queue_wait_by_true_class_seconds``    histogram  backend, true_class: same wait, observed at
                                                       completion when the answer length is known
``sjf_service_seconds``                     histogram  backend, true_class: dispatch → release
``sjf_predictor_latency_seconds``           histogram  (none): one predictor call
``sjf_tenant_queue_depth``                  gauge      backend, tenant: requests of one tenant waiting
``sjf_tenant_queue_wait_seconds``           histogram  backend, tenant: submit → dispatch per tenant
=========================================  =========  ==============================================

``tenant`` is the tenant id of :mod:`sjf_core.policy._tenants` (12 hex digits of a hash unless
the configuration allows names); requests without a tenant are not counted per tenant.

``predicted_class`` is ``short``, ``medium``, ``long``, ``unscored`` (fail-open
requests) or ``idle`` (granted a slot at once with no order to decide, so not scored:
the ``openai_sjf`` wrapper's lazy scoring); ``true_class`` is ``short`` (< 200 answer tokens), ``medium`` (200–799),
``long`` (≥ 800) or ``unknown`` (no ``usage``), paper §4.1. ``backend`` is the queue
key (the backend base URL) with any ``user:password@``, query and fragment removed.

Where they are exposed:

* **LiteLLM proxy**: the proxy's ``/metrics`` (mounted when its ``prometheus`` callback
  is enabled) serves ``prometheus_client.REGISTRY``, the default registry used here, so
  the ``sjf_*`` families appear next to LiteLLM's own. Under ``PROMETHEUS_MULTIPROC_DIR``
  the gauges aggregate with ``livesum`` across workers.
* **Anywhere else** (the OpenAI wrapper, scripts): :func:`start_metrics_server` serves
  the registry on ``SJF_METRICS_PORT`` (127.0.0.1 by default, ``SJF_METRICS_ADDR`` to
  change it), or pass your own ``CollectorRegistry`` and expose it as you like.

**Default.** Every :class:`~sjf_core._scheduler.Scheduler` built without a
:class:`PrometheusMetrics` among its listeners gets one on the default ``REGISTRY``
(:func:`install_default_metrics`), unless ``SJF_METRICS=off``. When
``SJF_METRICS_PORT`` is set, the first such scheduler of the process also starts the
HTTP server on that port.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import weakref
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from sjf_core.admission._local import AdmissionQueue, QueueEvents
from sjf_core.policy._entry import CLASS_NAMES, Entry, class_of_tokens

log = logging.getLogger("sjf_core.ext._metrics")

__all__ = [
    "PrometheusMetrics", "backend_label", "start_metrics_server", "install_default_metrics", "METRICS_ENV",
    "QUEUE_WAIT_BUCKETS_S", "count_probe", "PREDICTOR_LATENCY_BUCKETS_S", "METRICS_PORT_ENV", "METRICS_ADDR_ENV",
]

#: Environment variable turning the default metrics listener off ("off", "0", "false", "none").
METRICS_ENV = "SJF_METRICS"
#: Environment variable holding the port of :func:`start_metrics_server`.
METRICS_PORT_ENV = "SJF_METRICS_PORT"
#: Environment variable holding the bind address of :func:`start_metrics_server`.
METRICS_ADDR_ENV = "SJF_METRICS_ADDR"

#: Histogram buckets of queue wait and service time, seconds (10 ms … 10 min).
QUEUE_WAIT_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
#: Histogram buckets of predictor latency, seconds (50 µs … 1 s).
PREDICTOR_LATENCY_BUCKETS_S = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

_REASON_RE = re.compile(r"[^a-z0-9_]+")


def backend_label(key: Any) -> str:
    """The ``backend`` label value of a queue key: the URL without credentials, query or fragment.

    Never raises; at most 200 characters.
    """
    s = str(key or "default")
    try:
        parts = urlsplit(s)
        if parts.scheme and parts.netloc:
            host = parts.netloc.rsplit("@", 1)[-1]
            s = urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        pass
    # A label must encode as UTF-8, or the whole exposition (LiteLLM's /metrics too) fails.
    return s[:200].encode("utf-8", "replace").decode("utf-8")


def _reason_label(reason: Any) -> str:
    """A bounded, machine-readable reason label (lowercase [a-z0-9_], ≤ 40 chars)."""
    r = _REASON_RE.sub("_", str(reason or "unknown").lower()).strip("_")
    return (r or "unknown")[:40]


def _predicted_class(entry: Entry) -> str:
    if entry.fallback:
        return "unscored"
    if not getattr(entry, "scored", True):
        return "idle"
    try:
        return CLASS_NAMES[int(entry.klass)]
    except (IndexError, TypeError, ValueError):
        return "unscored"


def _true_class(answer_tokens: Any) -> str:
    if answer_tokens is None or isinstance(answer_tokens, bool):
        return "unknown"
    try:
        t = float(answer_tokens)
    except (TypeError, ValueError):
        return "unknown"
    if not math.isfinite(t) or t < 0:
        return "unknown"
    return CLASS_NAMES[class_of_tokens(t)]


class _Families:
    """The metric families of one registry (created once per registry)."""

    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.queue_depth = Gauge("sjf_queue_depth", "Requests waiting for an admission slot.", ["backend"],
                                 registry=r, multiprocess_mode="livesum")
        self.in_flight = Gauge("sjf_in_flight", "Requests holding an admission slot (running on the backend).",
                               ["backend"], registry=r, multiprocess_mode="livesum")
        self.tau = Gauge("sjf_tau_seconds", "Current starvation bound tau of the queue, seconds (+Inf when off).",
                         ["backend"], registry=r, multiprocess_mode="max")
        self.enqueued = Counter("sjf_enqueued", "Requests that entered the admission queue.",
                                ["backend", "predicted_class"], registry=r)
        self.admissions = Counter("sjf_admissions", "Requests granted a slot.", ["backend", "predicted_class"], registry=r)
        self.completions = Counter("sjf_completions", "Slots released after a granted request ended.",
                                   ["backend", "true_class"], registry=r)
        self.cancellations = Counter("sjf_cancellations", "Callers that left while queued (disconnect, timeout).",
                                     ["backend"], registry=r)
        self.promotions = Counter("sjf_tau_promotions", "Requests dispatched by the tau starvation guard.",
                                  ["backend"], registry=r)
        self.rejections = Counter("sjf_rejections", "Requests refused by overload control.", ["backend", "reason"],
                                  registry=r)
        self.fail_open = Counter("sjf_fail_open", "Requests admitted in FCFS order because they could not be scored.",
                                 ["backend", "reason"], registry=r)
        self.lease_expirations = Counter("sjf_lease_expirations", "Slots force-released by the lease time-to-live.",
                                         ["backend"], registry=r)
        self.probes = Counter("sjf_backend_probes", "Idle probes of a backend (our own 1-token requests) by outcome.",
                              ["backend", "outcome"], registry=r)
        self.predictor_errors = Counter("sjf_predictor_errors", "Predictor calls that raised (request served FCFS).",
                                        registry=r)
        self.queue_wait = Histogram("sjf_queue_wait_seconds", "Queue wait (submit to dispatch) by predicted class, seconds.",
                                    ["backend", "predicted_class"], buckets=QUEUE_WAIT_BUCKETS_S, registry=r)
        self.queue_wait_true = Histogram(
            "sjf_queue_wait_by_true_class_seconds",
            "Queue wait (submit to dispatch) by true answer-length class, seconds; observed at completion when usage is known.",
            ["backend", "true_class"], buckets=QUEUE_WAIT_BUCKETS_S, registry=r)
        self.service = Histogram("sjf_service_seconds", "Slot holding time (dispatch to release) by true class, seconds.",
                                 ["backend", "true_class"], buckets=QUEUE_WAIT_BUCKETS_S, registry=r)
        self.tenant_depth = Gauge("sjf_tenant_queue_depth", "Requests of one tenant waiting for a slot.",
                                  ["backend", "tenant"], registry=r, multiprocess_mode="livesum")
        self.tenant_wait = Histogram("sjf_tenant_queue_wait_seconds", "Queue wait (submit to dispatch) per tenant, seconds.",
                                     ["backend", "tenant"], buckets=QUEUE_WAIT_BUCKETS_S, registry=r)
        self.predictor_latency = Histogram("sjf_predictor_latency_seconds", "Latency of one predictor call, seconds.",
                                           buckets=PREDICTOR_LATENCY_BUCKETS_S, registry=r)


_families: "weakref.WeakKeyDictionary[CollectorRegistry, _Families]" = weakref.WeakKeyDictionary()
_families_lock = threading.Lock()


def _families_for(registry: CollectorRegistry) -> _Families:
    with _families_lock:
        fam = _families.get(registry)
        if fam is None:
            fam = _families[registry] = _Families(registry)
        return fam


class PrometheusMetrics(QueueEvents):
    """Queue-event listener that records the ``sjf_*`` metric families.

    Args:
        registry: the ``prometheus_client`` registry; default ``REGISTRY`` (the one the
            LiteLLM proxy serves on ``/metrics``). Several listeners on one registry
            share the same families, so making two is harmless.

    Every hook is cheap (a few dict look-ups) and never raises into the queue.
    """

    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = REGISTRY if registry is None else registry
        self.f = _families_for(self.registry)
        self._expired_seen: "weakref.WeakKeyDictionary[AdmissionQueue, int]" = weakref.WeakKeyDictionary()
        # labelled children by (family name, label values): ``labels()`` takes a lock and
        # builds tuples on every call, and these hooks run on each request's path
        self._children: dict[tuple, Any] = {}
        self._backends: dict[Any, str] = {}
        self._taus: dict[str, float] = {}

    def _child(self, family: str, *labels: str):
        key = (family, *labels)
        c = self._children.get(key)
        if c is None:
            if len(self._children) > 10_000:  # many distinct backends: stay bounded
                self._children.clear()
            c = self._children[key] = getattr(self.f, family).labels(*labels)
        return c

    def _backend(self, name: Any) -> str:
        b = self._backends.get(name)
        if b is None:
            if len(self._backends) > 1_000:
                self._backends.clear()
            b = self._backends[name] = backend_label(name)
        return b

    # ---- QueueEvents ---------------------------------------------------------------------
    def on_enqueue(self, queue: AdmissionQueue, entry: Entry) -> None:
        b = self._backend(queue.name)
        pc = _predicted_class(entry)
        self._child("enqueued", b, pc).inc()
        self._child("queue_depth", b).inc()
        if entry.tenant is not None:
            self._child("tenant_depth", b, str(entry.tenant)).inc()
        if entry.fallback:
            self._child("fail_open", b, "unscored").inc()

    def on_dispatch(self, queue: AdmissionQueue, entry: Entry, wait_s: float) -> None:
        b = self._backend(queue.name)
        pc = _predicted_class(entry)
        self._child("queue_depth", b).dec()
        self._child("in_flight", b).inc()
        self._child("admissions", b, pc).inc()
        if math.isfinite(wait_s):
            self._child("queue_wait", b, pc).observe(max(0.0, wait_s))
        if entry.tenant is not None:
            self._child("tenant_depth", b, str(entry.tenant)).dec()
            if math.isfinite(wait_s):
                self._child("tenant_wait", b, str(entry.tenant)).observe(max(0.0, wait_s))
        if entry.promoted:
            self._child("promotions", b).inc()
        self._set_tau(queue, b)

    def on_complete(self, queue: AdmissionQueue, entry: Entry, service_s: float, answer_tokens: int | None) -> None:
        b = self._backend(queue.name)
        tc = _true_class(answer_tokens)
        self._child("in_flight", b).dec()
        self._child("completions", b, tc).inc()
        if math.isfinite(service_s):
            self._child("service", b, tc).observe(max(0.0, service_s))
        wait_s = entry.dispatched_at - entry.arrival
        if tc != "unknown" and math.isfinite(wait_s):
            self._child("queue_wait_true", b, tc).observe(max(0.0, wait_s))
        expired = getattr(queue.stats, "expired", 0)
        seen = self._expired_seen.get(queue, 0)
        if expired > seen:
            self._child("lease_expirations", b).inc(expired - seen)
            self._expired_seen[queue] = expired
        self._set_tau(queue, b)

    def on_cancel(self, queue: AdmissionQueue, entry: Entry) -> None:
        b = self._backend(queue.name)
        self._child("queue_depth", b).dec()
        self._child("cancellations", b).inc()
        if entry.tenant is not None:
            self._child("tenant_depth", b, str(entry.tenant)).dec()

    def on_reject(self, queue: Any, entry: Any = None, reason: Any = "unknown", *args: Any, **kw: Any) -> None:
        """Overload control refused a request (never enqueued, so the depth is unchanged).

        Args:
            queue: the :class:`AdmissionQueue` (or its backend key as a string).
            entry: the refused entry, if any (unused).
            reason: a short machine-readable reason, e.g. "queue_depth".
        """
        name = getattr(queue, "name", queue)
        self.f.rejections.labels(backend_label(name), _reason_label(kw.get("reason", reason))).inc()

    def on_predict(self, scheduler: Any, latency_s: float | None, error: str | None) -> None:
        """One predictor call took ``latency_s`` seconds; ``error`` is the exception type name or None."""
        if latency_s is not None and math.isfinite(latency_s):
            self.f.predictor_latency.observe(max(0.0, latency_s))
        if error is not None:
            self.f.predictor_errors.inc()

    # ---- for adapters ----------------------------------------------------------------------
    def fail_open(self, backend: Any, reason: str) -> None:
        """Count a request an adapter let through without admission (e.g. an internal fault)."""
        self.f.fail_open.labels(backend_label(backend), _reason_label(reason)).inc()

    def _set_tau(self, queue: AdmissionQueue, b: str) -> None:
        try:
            tau = float(queue.tau_s)
            if self._taus.get(b) != tau:  # τ moves only when a Short completes: skip the gauge's lock
                self._child("tau", b).set(tau)
                self._taus[b] = tau
        except Exception:  # a pending structure without τ
            pass


def start_metrics_server(port: int | None = None, addr: str | None = None,
                         registry: CollectorRegistry | None = None):
    """Serve ``registry`` in the Prometheus text format over HTTP (a daemon thread).

    Args:
        port: TCP port; default ``$SJF_METRICS_PORT``. 0 picks a free port.
        addr: bind address; default ``$SJF_METRICS_ADDR`` or "127.0.0.1".
        registry: default ``prometheus_client.REGISTRY``.

    Returns:
        ``(server, thread)`` from :func:`prometheus_client.start_http_server`; the bound
        port is ``server.server_port``. None when no port is given and
        ``SJF_METRICS_PORT`` is unset.

    Raises:
        ValueError: the port is not an integer.
        OSError: the port cannot be bound.
    """
    from prometheus_client import start_http_server

    if port is None:
        env = os.environ.get(METRICS_PORT_ENV, "").strip()
        if not env:
            return None
        port = int(env)
    addr = addr or os.environ.get(METRICS_ADDR_ENV, "").strip() or "127.0.0.1"
    return start_http_server(int(port), addr=addr, registry=REGISTRY if registry is None else registry)


_server_lock = threading.Lock()
_server_started = False


def metrics_enabled() -> bool:
    """False when ``$SJF_METRICS`` is off (``off``, ``0``, ``false``, ``no``, ``none``)."""
    return os.environ.get(METRICS_ENV, "on").strip().lower() not in ("off", "0", "false", "no", "none")


def count_probe(backend: Any, outcome: str, registry: CollectorRegistry | None = None) -> None:
    """Count one idle-probe event (``sjf_backend_probes_total``) on ``registry`` (default
    ``REGISTRY``), unless ``$SJF_METRICS`` is off. Never raises."""
    try:
        if registry is None and not metrics_enabled():
            return
        _families_for(registry or REGISTRY).probes.labels(backend_label(backend), _reason_label(outcome)).inc()
    except Exception:  # metrics must never break a release
        log.debug("probe metric not recorded", exc_info=True)


def install_default_metrics(listeners: list) -> PrometheusMetrics | None:
    """Append a :class:`PrometheusMetrics` on the default registry to ``listeners``.

    Does nothing when ``$SJF_METRICS`` is off or a :class:`PrometheusMetrics` is
    already there. Starts :func:`start_metrics_server` once per process when
    ``$SJF_METRICS_PORT`` is set (a port that cannot be bound is logged, not raised).

    Returns:
        The listener added, or None.
    """
    if not metrics_enabled():
        return None
    if any(isinstance(x, PrometheusMetrics) for x in listeners):
        return None
    m = PrometheusMetrics()
    listeners.append(m)
    global _server_started
    if os.environ.get(METRICS_PORT_ENV, "").strip() and not _server_started:
        with _server_lock:
            if not _server_started:
                _server_started = True
                try:
                    server, _ = start_metrics_server()
                    log.info("sjf metrics served on http://%s:%d/metrics", server.server_address[0], server.server_port)
                except (OSError, ValueError) as exc:
                    log.error("sjf metrics server could not start on %s=%s (%s)", METRICS_PORT_ENV,
                              os.environ.get(METRICS_PORT_ENV), type(exc).__name__)
    return m
