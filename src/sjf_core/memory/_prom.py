"""Prometheus view of the length memory: a collector on the default registry (prometheus-client, optional).

=========================================  =======  ================================================
name                                        type     labels / meaning
=========================================  =======  ================================================
``sjf_memory_predictions_total``            counter  evidence: ``key``, ``neighbour``, ``none``
                                                     (scorings that used key evidence, neighbour
                                                     evidence, or neither: the base unchanged)
``sjf_memory_answers_learned_total``        counter  completed requests the memory learned from
``sjf_memory_keys``                         gauge    evidence keys held (local copy)
``sjf_memory_ring_entries``                 gauge    answered requests in the neighbour ring
``sjf_memory_online_ranking_accuracy``      gauge    predictor: ``memory`` or ``base``; rolling paper
                                                     Eq. 2 over the last answered requests (NaN
                                                     until there is a Short and a Long)
``sjf_memory_neighbour_gate_open``          gauge    1 while neighbour evidence is in use
``sjf_memory_redis_errors_total``           counter  Redis errors of the shared store (fail-open)
=========================================  =======  ================================================

Values are summed (accuracies: of the first memory) over the memories alive in the process
(normally one per :class:`~sjf_core._scheduler.Scheduler`). Labels never carry text.
"""

from __future__ import annotations

import logging
import math
import threading

from sjf_core._faults import note_fault
from sjf_core.memory._core import live_memories

log = logging.getLogger("sjf_core.memory")

try:
    from prometheus_client import REGISTRY
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
except ImportError:  # prometheus-client is the optional ``metrics`` extra: no collector then
    REGISTRY = None

__all__ = ["MemoryCollector", "ensure_collector"]

_lock = threading.Lock()
_installed: set[int] = set()


class MemoryCollector:
    """Collects the families above from :func:`sjf_core.memory._core.live_memories`."""

    def collect(self):
        mems = live_memories()
        pred = CounterMetricFamily("sjf_memory_predictions", "Scorings by the evidence they used",
                                   labels=["evidence"])
        c = {"key": 0, "neighbour": 0, "none": 0}
        learned = errors = keys = ring = gate = 0
        acc = {"memory": math.nan, "base": math.nan}
        for i, m in enumerate(mems):
            k = dict(m.counters)
            c["key"] += k["key_evidence"]
            c["neighbour"] += k["neighbour_evidence"]
            c["none"] += k["scored"] - k["with_evidence"]
            learned += k["observed"]
            keys += len(m.store)
            ring += len(m.ring)
            gate += int(m.nn_open)
            errors += int(getattr(m.store, "errors", 0))
            if i == 0:
                a = m.online_accuracy()
                acc = {p: (math.nan if a[p] is None else a[p]) for p in acc}
        for lab, v in c.items():
            pred.add_metric([lab], v)
        yield pred
        yield CounterMetricFamily("sjf_memory_answers_learned", "Completed requests the memory learned from",
                                  value=learned)
        yield GaugeMetricFamily("sjf_memory_keys", "Evidence keys held", value=keys)
        yield GaugeMetricFamily("sjf_memory_ring_entries", "Answered requests in the neighbour ring", value=ring)
        g = GaugeMetricFamily("sjf_memory_online_ranking_accuracy",
                              "Rolling paper Eq. 2 over the last answered requests", labels=["predictor"])
        for p, v in acc.items():
            g.add_metric([p], v)
        yield g
        yield GaugeMetricFamily("sjf_memory_neighbour_gate_open", "1 while neighbour evidence is used", value=gate)
        yield CounterMetricFamily("sjf_memory_redis_errors", "Redis errors of the shared memory", value=errors)


def ensure_collector(registry=None) -> None:
    """Register one :class:`MemoryCollector` on ``registry`` (default REGISTRY), once. Never
    raises; does nothing without prometheus-client."""
    reg = REGISTRY if registry is None else registry
    if reg is None:
        return
    with _lock:
        if id(reg) in _installed:
            return
        try:
            reg.register(MemoryCollector())
            _installed.add(id(reg))
        except Exception:  # e.g. a name clash: metrics are optional
            note_fault(log, "length memory metrics not registered")
