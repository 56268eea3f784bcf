"""Prometheus view of the many-model boxes (prometheus-client, optional): read at scrape time.

A collector registered once per registry reads every live
:class:`~sjf_core.admission._box_registry.BoxRegistry` that called :func:`watch_boxes`
(weakly held). Families (label values are backend keys and model names, never prompt text):

===============================  =======  =================================================
``sjf_model_loads_total``        counter  backend, model: loads of the model that this
                                          process's requests caused (the box's tracking)
``sjf_box_model_loaded``         gauge    backend, model: 1 while the box holds the model
``sjf_box_runner_in_flight``     gauge    backend, model: requests running on the runner
``sjf_box_runner_waiting``       gauge    backend, model: requests waiting for the runner
``sjf_box_max_loaded``           gauge    backend: models the box holds at once (NaN: all)
``sjf_box_cap``                  gauge    backend: box-wide cap on answers (NaN: none)
===============================  =======  =================================================

Per process: under ``PROMETHEUS_MULTIPROC_DIR`` each worker reports its own view.
"""

from __future__ import annotations

import math
import threading
import weakref
from typing import Any

from sjf_core.ext._labels import backend_label

_registries: "weakref.WeakSet" = weakref.WeakSet()
_installed: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class _BoxCollector:
    """Yields the box families from the watched box registries."""

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        bm = ["backend", "model"]
        loads = CounterMetricFamily("sjf_model_loads", "Loads of a model on a box that this process's requests caused.",
                                    labels=bm)
        loaded = GaugeMetricFamily("sjf_box_model_loaded", "1 while the box holds the model loaded.", labels=bm)
        running = GaugeMetricFamily("sjf_box_runner_in_flight", "Requests running on a model runner.", labels=bm)
        waiting = GaugeMetricFamily("sjf_box_runner_waiting", "Requests waiting for a model runner.", labels=bm)
        most = GaugeMetricFamily("sjf_box_max_loaded", "Models a box holds at once (NaN: all).", labels=["backend"])
        cap = GaugeMetricFamily("sjf_box_cap", "Box-wide cap on answers in flight (NaN: none).", labels=["backend"])
        for reg in list(_registries):
            for b in reg.status():
                backend = backend_label(b["box"])
                most.add_metric([backend], math.nan if b["max_loaded"] is None else b["max_loaded"])
                cap.add_metric([backend], math.nan if b["cap"] is None else b["cap"])
                for r in b["runners"]:
                    labels = [backend, str(r["model"])]
                    loads.add_metric(labels, r["loads"])
                    loaded.add_metric(labels, 1.0 if r["loaded"] else 0.0)
                    running.add_metric(labels, r["in_flight"])
                    waiting.add_metric(labels, r["waiting"])
        yield from (loads, loaded, running, waiting, most, cap)


def watch_boxes(box_registry: Any, registry: Any = None) -> bool:
    """Show ``box_registry``'s boxes in ``registry`` (default: prometheus-client's REGISTRY).
    False (and nothing done) without prometheus-client. Never raises."""
    try:
        from prometheus_client import REGISTRY
    except ImportError:
        return False
    registry = registry if registry is not None else REGISTRY
    with _lock:
        _registries.add(box_registry)
        if registry not in _installed:
            collector = _BoxCollector()
            try:
                registry.register(collector)
            except ValueError:  # already registered under these names (another copy of this module)
                return False
            _installed[registry] = collector
    return True
