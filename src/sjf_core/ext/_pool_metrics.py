"""Prometheus view of the pools (prometheus-client, optional): read at scrape time.

A collector registered once per registry reads every live
:class:`~sjf_core.admission._pool_members.PoolRegistry` that called :func:`watch_pools`
(weakly held). Families (label values are pool names and backend keys, never prompt text):

======================================  =======  ============================================
``sjf_pool_queue_depth``                gauge    pool: requests waiting in the pool
``sjf_pool_member_in_flight``           gauge    pool, backend: requests running on the member
``sjf_pool_member_up``                  gauge    pool, backend: 1 in rotation, 0 taken out
``sjf_pool_member_tokens_per_second``   gauge    pool, backend: measured answer speed (NaN before)
``sjf_pool_member_served``              gauge    pool, backend: requests the member completed
======================================  =======  ============================================

Per process: under ``PROMETHEUS_MULTIPROC_DIR`` each worker's pools are not summed (the
Redis pool's shared queue shows as the backend ``pool:...`` in ``sjf_queue_depth``).
"""

from __future__ import annotations

import math
import threading
import weakref
from typing import Any

from sjf_core.settings import backend_label

_registries: "weakref.WeakSet" = weakref.WeakSet()
_installed: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class _PoolCollector:
    """Yields the pool families from the watched pool registries."""

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        depth = GaugeMetricFamily("sjf_pool_queue_depth", "Requests waiting in a pool of backends.", labels=["pool"])
        names = ("in_flight", "up", "tokens_per_s", "served")
        helps = ("Requests running on a pool member.", "1 while a pool member is in rotation, 0 when taken out.",
                 "Measured answer tokens per second of a pool member.", "Requests a pool member completed.")
        fams = {n: GaugeMetricFamily(f"sjf_pool_member_{'tokens_per_second' if n == 'tokens_per_s' else n}", h,
                                     labels=["pool", "backend"]) for n, h in zip(names, helps)}
        for reg in list(_registries):
            for p in reg.status():
                pool = ",".join(backend_label(m["backend"]) for m in p["members"])
                depth.add_metric([pool], p["waiting"])
                for m in p["members"]:
                    labels = [pool, backend_label(m["backend"])]
                    tps = m["tokens_per_s"]
                    fams["in_flight"].add_metric(labels, m["in_flight"])
                    fams["up"].add_metric(labels, 1.0 if m["healthy"] else 0.0)
                    fams["tokens_per_s"].add_metric(labels, math.nan if tps is None else tps)
                    fams["served"].add_metric(labels, m["served"])
        yield depth
        yield from fams.values()


def watch_pools(pool_registry: Any, registry: Any = None) -> bool:
    """Show ``pool_registry``'s pools in ``registry`` (default: prometheus-client's REGISTRY).
    False (and nothing done) without prometheus-client. Never raises."""
    try:
        from prometheus_client import REGISTRY
    except ImportError:
        return False
    registry = registry if registry is not None else REGISTRY
    with _lock:
        _registries.add(pool_registry)
        if registry not in _installed:
            collector = _PoolCollector()
            try:
                registry.register(collector)
            except ValueError:  # already registered under these names (another copy of this module)
                return False
            _installed[registry] = collector
    return True
