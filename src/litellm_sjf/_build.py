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

import logging
import threading
from typing import Any

from sjf_core._scheduler import Scheduler

from .settings import AUTO, PluginSettings

log = logging.getLogger("litellm_sjf")


def build_scheduler(settings: PluginSettings) -> Scheduler:
    """A scheduler for ``settings`` (module docstring)."""
    s = settings
    if s.scheduler_factory:
        import importlib

        mod, _, attr = s.scheduler_factory.partition(":")
        factory = getattr(importlib.import_module(mod), attr or "make_scheduler")
        return factory()
    opts = s.policy_options()
    fixed = {k: v for k, v in s.backend_slots.items() if v != AUTO}  # "auto": asked per backend on first use
    return Scheduler(predictor=s.predictor, policy=s.policy, tau=opts.pop("tau"),
                     slots=1 if s.slots == AUTO else s.slots,
                     backend_slots=fixed, lease_ttl_s=s.lease_ttl_s, policy_options=opts,
                     overload=s.overload, backend_overload=s.backend_overload or None,
                     rate_limit=s.rate_limit, backend_rate_limits=s.backend_rate_limits or None,
                     redis_url=s.redis_url, redis_options=s.redis or None,
                     fairness=s.fairness_config(), defaults=s.intent_defaults())


class LazyScheduler:
    """The plugin's scheduler, built from ``settings`` on first use (or given ready)."""

    def __init__(self, settings: PluginSettings, scheduler: Scheduler | None = None):
        self.settings = settings
        self._scheduler = scheduler
        self._lock = threading.Lock()

    def get(self) -> Scheduler:
        """The scheduler, built now if need be (raises what :func:`build_scheduler` raises)."""
        if self._scheduler is None:
            with self._lock:
                if self._scheduler is None:
                    self._scheduler = build_scheduler(self.settings)
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
