"""Prometheus metrics of the admission layer (prometheus-client, optional).

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

``tenant`` is the tenant id of :mod:`sjf_core.settings._tenants` (12 hex digits of a hash unless
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
* **Anywhere else** (the OpenAI wrapper, scripts): :func:`sjf_core.start_metrics` serves
  the registry on ``SJF_METRICS_PORT`` (127.0.0.1 by default, ``SJF_METRICS_ADDR`` to
  change it); ``openai_sjf.wrap`` calls it. Or pass your own ``CollectorRegistry``.

**Default.** Every :class:`~sjf_core._scheduler.Scheduler` built without a
:class:`PrometheusMetrics` among its listeners gets one on the default ``REGISTRY``
(:func:`install_default_metrics`), unless its config says ``metrics`` off
(``SJF_METRICS=off``). Building a Scheduler never starts a server: the HTTP server starts
only through an explicit :func:`sjf_core.start_metrics` (the plugins call it when
``SJF_METRICS_PORT`` is set) or :func:`start_metrics_server`.

**Optional.** prometheus-client is the ``metrics`` extra (pulled in by ``litellm`` and
``openai``). Without it :data:`AVAILABLE` is False, no listener is installed, probes are
not counted and :func:`start_metrics` returns None: scheduling is unchanged.
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from typing import Any

from sjf_core.admission._local import AdmissionQueue, QueueEvents
from sjf_core.admission._probe import watch_probes
from sjf_core.ext._labels import (PREDICTOR_LATENCY_BUCKETS_S, QUEUE_WAIT_BUCKETS_S, backend_label, predicted_class,
                                  reason_label, true_class)
from sjf_core.policy._entry import Entry
from sjf_core._faults import note_fault

try:
    from prometheus_client import REGISTRY, start_http_server

    from sjf_core.ext._families import families_for
    #: True when prometheus-client is installed (else metrics are a no-op).
    AVAILABLE = True
except ImportError:  # prometheus-client is the optional ``metrics`` extra
    REGISTRY = None
    AVAILABLE = False

log = logging.getLogger("sjf_core.ext._metrics")

__all__ = [
    "PrometheusMetrics", "backend_label", "start_metrics_server", "start_metrics", "install_default_metrics",
    "QUEUE_WAIT_BUCKETS_S", "count_probe", "PREDICTOR_LATENCY_BUCKETS_S", "AVAILABLE",
]


class PrometheusMetrics(QueueEvents):
    """Queue-event listener that records the ``sjf_*`` metric families.

    Args:
        registry: a ``prometheus_client.CollectorRegistry``; default ``REGISTRY`` (the one the
            LiteLLM proxy serves on ``/metrics``). Several listeners on one registry
            share the same families, so making two is harmless.

    Every hook is cheap (a few dict look-ups) and never raises into the queue.

    Raises:
        RuntimeError: prometheus-client is not installed.
    """

    def __init__(self, registry: Any = None):
        if not AVAILABLE:
            raise RuntimeError("PrometheusMetrics needs prometheus-client: pip install 'clairvoyant-sjf[metrics]'")
        self.registry = REGISTRY if registry is None else registry
        self.f = families_for(self.registry)
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
        pc = predicted_class(entry)
        self._child("enqueued", b, pc).inc()
        self._child("queue_depth", b).inc()
        if entry.tenant is not None:
            self._child("tenant_depth", b, str(entry.tenant)).inc()
        if entry.fallback:
            self._child("fail_open", b, "unscored").inc()

    def on_dispatch(self, queue: AdmissionQueue, entry: Entry, wait_s: float) -> None:
        b = self._backend(queue.name)
        pc = predicted_class(entry)
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
        tc = true_class(answer_tokens)
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
        self.f.rejections.labels(backend_label(name), reason_label(kw.get("reason", reason))).inc()

    def on_predict(self, scheduler: Any, latency_s: float | None, error: str | None) -> None:
        """One predictor call took ``latency_s`` seconds; ``error`` is the exception type name or None."""
        if latency_s is not None and math.isfinite(latency_s):
            self.f.predictor_latency.observe(max(0.0, latency_s))
        if error is not None:
            self.f.predictor_errors.inc()

    # ---- for adapters ----------------------------------------------------------------------
    def fail_open(self, backend: Any, reason: str) -> None:
        """Count a request an adapter let through without admission (e.g. an internal fault)."""
        self.f.fail_open.labels(backend_label(backend), reason_label(reason)).inc()

    def _set_tau(self, queue: AdmissionQueue, b: str) -> None:
        try:
            tau = float(queue.tau_s)
            if self._taus.get(b) != tau:  # τ moves only when a Short completes: skip the gauge's lock
                self._child("tau", b).set(tau)
                self._taus[b] = tau
        except Exception:  # a pending structure without τ: the gauge keeps its last value
            note_fault(log, f"τ gauge of backend {b} not set", level=logging.DEBUG)



# ---- serving and the default listener ----------------------------------------------------------
_server_lock = threading.Lock()
_server: Any = None
_default_installed = False


def start_metrics_server(port: int, addr: str = "127.0.0.1", registry: Any = None):
    """Serve ``registry`` (default ``prometheus_client.REGISTRY``) in the Prometheus text
    format over HTTP, on a daemon thread.

    Args:
        port: TCP port; 0 picks a free one (the bound port is ``server.server_port``).
        addr: bind address.

    Returns:
        ``(server, thread)`` from :func:`prometheus_client.start_http_server`.

    Raises:
        RuntimeError: prometheus-client is not installed.
        OSError: the port cannot be bound.
    """
    if not AVAILABLE:
        raise RuntimeError("the metrics server needs prometheus-client: pip install 'clairvoyant-sjf[metrics]'")
    return start_http_server(int(port), addr=addr, registry=REGISTRY if registry is None else registry)


def start_metrics(config: Any = None, port: int | None = None, addr: str | None = None):
    """Start the process's metrics server once: on ``port`` (default ``config.metrics_port``,
    i.e. ``SJF_METRICS_PORT``) and ``addr`` (default ``config.metrics_addr``). The explicit
    step that building a :class:`~sjf_core._scheduler.Scheduler` never takes.

    Args:
        config: a :class:`~sjf_core.config.SchedulerConfig` (default: none, so ``port`` is needed).

    Returns:
        The ``(server, thread)`` of the process (the first call's), or None when no port is
        set, ``config.metrics`` is off, prometheus-client is missing or the port cannot be
        bound (logged, never raised).
    """
    global _server
    if config is not None and not config.metrics:
        return None
    port = getattr(config, "metrics_port", None) if port is None else port
    if port is None:
        return None
    addr = addr or getattr(config, "metrics_addr", None) or "127.0.0.1"
    if not AVAILABLE:
        log.warning("sjf metrics port %s set but prometheus-client is not installed; no /metrics", port)
        return None
    with _server_lock:
        if _server is None:
            try:
                _server = start_metrics_server(port, addr)
                log.info("sjf metrics served on http://%s:%d/metrics", addr, _server[0].server_port)
            except (OSError, ValueError) as exc:
                log.error("sjf metrics server could not start on %s:%s (%s)", addr, port, type(exc).__name__)
                return None
        return _server


def install_default_metrics(listeners: list, enabled: bool = True) -> "PrometheusMetrics | None":
    """Append a :class:`PrometheusMetrics` on the default registry to ``listeners``.

    Does nothing (None) when ``enabled`` is False, prometheus-client is missing, or a
    :class:`PrometheusMetrics` is already there. Starts no server.
    """
    global _default_installed
    if not enabled or not AVAILABLE or any(isinstance(x, PrometheusMetrics) for x in listeners):
        return None
    m = PrometheusMetrics()
    listeners.append(m)
    _default_installed = True
    watch_probes(count_probe)  # the probes' counter, now that the default registry is in use
    return m


def count_probe(backend: Any, outcome: str, registry: Any = None) -> None:
    """Count one idle-probe event (``sjf_backend_probes_total``) on ``registry``; without one,
    on ``REGISTRY`` once a default listener is installed in the process (metrics on).
    Never raises."""
    try:
        if not AVAILABLE or (registry is None and not _default_installed):
            return
        families_for(registry or REGISTRY).probes.labels(backend_label(backend), reason_label(outcome)).inc()
    except Exception:  # metrics must never break a release
        log.debug("probe metric not recorded", exc_info=True)
