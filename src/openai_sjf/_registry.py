"""Which :class:`sjf_core._scheduler.Scheduler` (and so which queue) a wrapped client uses.

Rules (one process):

* ``wrap(client, scheduler=s)`` uses ``s`` as given; you manage sharing.
* Otherwise the **first** ``wrap`` of a base URL decides its scheduler, and every
  later wrap of the same base URL gets that scheduler, so all clients of one
  backend share one queue (one slot count):

  - no ``policy``/``tau``/``predictor`` given: the process-wide
    :func:`sjf_core._scheduler.default_scheduler` (built from the ``SJF_*`` settings,
    :meth:`sjf_core.config.SchedulerConfig.from_env`);
  - any of them given: a scheduler made once per distinct
    ``(policy, tau, predictor)`` from the ``SJF_*`` settings with those options laid over
    them (a default for what is not given), reused by later wraps with the same options.

  ``slots`` sets the backend's slot count if its queue does not exist yet.
* A later wrap of an already-claimed base URL whose options (:data:`OPTION_NAMES`) differ
  from the first keeps the first settings and emits a :class:`RuntimeWarning` naming each
  given option with its value (the first wrap wins; no second queue is ever made for one
  backend by default). Pass ``scheduler=`` for deliberately separate queues.
"""

from __future__ import annotations

import logging
import threading
import warnings
from typing import Any

from sjf_core import Scheduler, backend_key, default_scheduler
from sjf_core.config import SchedulerConfig

log = logging.getLogger("openai_sjf")
_lock = threading.Lock()
#: the options of :func:`scheduler_for`, in the order of the tuples kept below
OPTION_NAMES = ("slots", "policy", "tau", "predictor", "fairness", "default_priority", "default_deadline_s",
                "promotion")
#: backend key -> (scheduler, the options as first given, in OPTION_NAMES order)
_owners: dict[str, tuple[Scheduler, tuple]] = {}
#: (policy, tau, predictor identity) -> scheduler
_by_options: dict[tuple, Scheduler] = {}


def _ident(x: Any) -> Any:
    return x if x is None or isinstance(x, (str, int, float)) else ("id", id(x))


def _labelled(values: tuple) -> str:
    """``name=value`` for each option that was given (the warning names what it ignores)."""
    given = [f"{n}={v!r}" for n, v in zip(OPTION_NAMES, values) if v is not None]
    return ", ".join(given) or "no options"


def scheduler_for(
    base_url: Any,
    slots: int | None = None,
    policy: Any = None,
    tau: Any = None,
    predictor: Any = None,
    fairness: Any = None,
    default_priority: Any = None,
    default_deadline_s: Any = None,
    promotion: Any = None,
) -> Scheduler:
    """The scheduler for a client of ``base_url`` (see the module rules; ``fairness``, the
    defaults and ``promotion`` count as options like ``policy``: :mod:`sjf_core.settings._tenants`).
    ``slots`` was checked by the caller (:class:`~openai_sjf._options.WrapOptions`).

    Raises:
        ValueError: an unknown policy / bad τ (from :class:`Scheduler`).
    """
    key = backend_key(base_url)
    options = (policy, tau, predictor, fairness, default_priority, default_deadline_s, promotion)
    wanted = (slots, *map(_ident, options))
    with _lock:
        owner = _owners.get(key)
        if owner is not None:
            sched, first = owner
            if any(w is not None and w != f for w, f in zip(wanted, first)):
                warnings.warn(
                    f"openai_sjf: backend {key} already has an SJF queue configured by an earlier wrap() "
                    f"({_labelled(first)}); the new settings ({_labelled(wanted)}) are ignored. Pass scheduler= for "
                    "a separate queue.", RuntimeWarning, stacklevel=3)
            return sched
        if all(v is None for v in options):
            sched = default_scheduler()
        else:
            sched = _by_options.get(wanted[1:])
            if sched is None:
                sched = _by_options[wanted[1:]] = _new_scheduler(*options)
        sched.preload()  # the first request that waits must not pay the model load
        if slots is not None:
            _claim_slots(sched, key, slots)
        _owners[key] = (sched, wanted)
        return sched


def _new_scheduler(policy, tau, predictor, fairness, default_priority, default_deadline_s, promotion) -> Scheduler:
    """A scheduler from the ``SJF_*`` settings with these options laid over them (the core's
    default policy and τ for what is not given)."""
    base = SchedulerConfig()
    given = {"policy": base.policy if policy is None else policy, "tau": base.tau if tau is None else tau}
    if promotion is not None:
        given["promotion"] = promotion
    if fairness is not None:
        given["fairness"] = fairness
    if default_priority is not None or default_deadline_s is not None:
        given["defaults"] = {"priority": default_priority, "deadline_s": default_deadline_s}
    config = SchedulerConfig.from_env().replace(**given)
    for w in config.warnings:  # e.g. a misspelt SJF_* name: said once, at start-up
        log.warning("SJF settings: %s", w)
    return Scheduler(config, predictor=base.predictor if predictor is None else predictor)


def _claim_slots(sched: Scheduler, key: str, slots: int) -> None:
    """Set the slots of ``key``'s queue before it exists; warn when it exists with others."""
    existing = sched.queues.get(key)
    if existing is None:
        sched.set_slots(key, slots)
    elif existing.slots != slots:
        warnings.warn(f"openai_sjf: the queue of backend {key} already exists with {existing.slots} slot(s); "
                      f"slots={slots} is ignored.", RuntimeWarning, stacklevel=4)


def _reset_for_tests() -> None:
    """Forget all ownership (tests only; live queues are not touched)."""
    with _lock:
        _owners.clear()
        _by_options.clear()
