"""The ``sjf_*`` metric families of one ``prometheus_client`` registry (created once per registry).

Requires prometheus-client (the ``metrics`` extra); :mod:`sjf_core.ext._metrics` imports
this module only when it is installed.
"""

from __future__ import annotations

import threading
import weakref

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sjf_core.ext._labels import PREDICTOR_LATENCY_BUCKETS_S, QUEUE_WAIT_BUCKETS_S

__all__ = ["Families", "families_for"]


class Families:
    """The metric families of one registry (created once per registry)."""

    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.queue_depth = Gauge("sjf_queue_depth", "Requests waiting for an admission slot.", ["backend"],
                                 registry=r, multiprocess_mode="livesum")
        self.in_flight = Gauge("sjf_in_flight", "Requests holding an admission slot (running on the backend).",
                               ["backend"], registry=r, multiprocess_mode="livesum")
        self.tau = Gauge("sjf_tau_seconds", "Current tau of the queue, seconds (+Inf when off): the bound of the time-based guards "
                         "(strict, one-in-k, fcfs-bound, aging); work-bound, the default, does not read it.",
                         ["backend"], registry=r, multiprocess_mode="max")
        self.enqueued = Counter("sjf_enqueued", "Requests that entered the admission queue.",
                                ["backend", "predicted_class"], registry=r)
        self.admissions = Counter("sjf_admissions", "Requests granted a slot.", ["backend", "predicted_class"], registry=r)
        self.completions = Counter("sjf_completions", "Slots released after a granted request ended.",
                                   ["backend", "true_class"], registry=r)
        self.cancellations = Counter("sjf_cancellations", "Callers that left while queued (disconnect, timeout).",
                                     ["backend"], registry=r)
        self.promotions = Counter("sjf_tau_promotions", "Requests dispatched by the starvation guard (any promotion rule).",
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


_families: "weakref.WeakKeyDictionary[CollectorRegistry, Families]" = weakref.WeakKeyDictionary()
_families_lock = threading.Lock()


def families_for(registry: CollectorRegistry) -> Families:
    with _families_lock:
        fam = _families.get(registry)
        if fam is None:
            fam = _families[registry] = Families(registry)
        return fam
