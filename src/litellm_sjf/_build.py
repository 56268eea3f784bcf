"""Building the plugin's :class:`sjf_core.Scheduler` from its settings, once, lazily.

* :func:`build_scheduler(settings) <build_scheduler>` — the one place the plugin turns
  :class:`~litellm_sjf.settings.PluginSettings` into a scheduler (or calls the
  ``scheduler_factory``). Raises what the scheduler raises (ValueError on bad settings,
  OSError on an unreadable model).
* :class:`LazyScheduler` — holds it: built on the first :meth:`~LazyScheduler.get`
  (thread-safe, at most once on success; a failed build is retried on the next call), or
  ahead of time by :meth:`~LazyScheduler.preload_in_background` at proxy start-up so that
  the first request that has to wait does not pay for the model load.
"""

from __future__ import annotations

import importlib
import logging
import threading
from typing import Any

from sjf_core import Scheduler, start_metrics

from .settings import PluginSettings

log = logging.getLogger("litellm_sjf")


def build_scheduler(settings: PluginSettings) -> Scheduler:
    """A scheduler for ``settings`` (module docstring); then the metrics server starts when
    ``SJF_METRICS_PORT`` is set (:func:`sjf_core.start_metrics`, the explicit step, once per
    process; a busy port is logged, not raised)."""
    s = settings
    if s.scheduler_factory:
        mod, _, attr = s.scheduler_factory.partition(":")
        sched = getattr(importlib.import_module(mod), attr or "make_scheduler")()
    else:
        sched = Scheduler(s.scheduler_config())  # "auto" slots: asked per backend on first use
    start_metrics(s.config)
    return sched


class LazyScheduler:
    """The plugin's scheduler, built from ``settings`` on first use (or given ready).
    ``on_build(scheduler)`` runs once with it, before :meth:`get` returns it (the plugin adds
    its own queue listeners there); an error in it is logged, never raised."""

    def __init__(self, settings: PluginSettings, scheduler: Scheduler | None = None, on_build=None):
        self.settings = settings
        self._scheduler = scheduler
        self._lock = threading.Lock()
        self._on_build = on_build
        if scheduler is not None:
            self._built(scheduler)

    def _built(self, scheduler: Scheduler) -> None:
        if self._on_build is not None:
            try:
                self._on_build(scheduler)
            except Exception:
                log.exception("litellm_sjf: setting up the scheduler's listeners failed")

    def get(self) -> Scheduler:
        """The scheduler, built now if need be (raises what :func:`build_scheduler` raises)."""
        if self._scheduler is None:
            with self._lock:
                if self._scheduler is None:
                    sched = build_scheduler(self.settings)
                    self._built(sched)
                    self._scheduler = sched
        return self._scheduler

    def peek(self) -> Scheduler | None:
        """The scheduler if it is built, else None (never builds)."""
        return self._scheduler

    def preload_in_background(self) -> threading.Thread:
        """Build the scheduler and load its model in a daemon thread (off the event loop).
        A failure is logged at DEBUG; the scheduler is then built on first use."""
        t = threading.Thread(target=self._preload, name="sjf-preload", daemon=True)
        t.start()
        return t

    def _preload(self) -> None:
        try:
            sched: Any = self.get()
            sched.preload()
        except Exception:  # fail-open: the scheduler is built again on first use
            log.debug("litellm_sjf: preload failed; the scheduler is built on first use", exc_info=True)
