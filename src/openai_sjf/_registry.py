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
  option with its value (the first wrap wins; no second queue is ever made for one backend
  by default). Pass ``scheduler=`` for deliberately separate queues.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

from sjf_core._scheduler import Scheduler, backend_key, default_scheduler
from sjf_core.config import SchedulerConfig

_lock = threading.Lock()
#: the options of :func:`scheduler_for`, in the order of the tuples kept below
OPTION_NAMES = ("slots", "policy", "tau", "promotion", "predictor", "fairness", "default_priority",
                "default_deadline_s")
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


def check_slots(slots: Any) -> int | None:
    """``slots`` as an int >= 1 (an int, or a string of one), None when not given; else
    ValueError naming the setting."""
    if slots is None:
        return None
    try:
        if isinstance(slots, bool) or (isinstance(slots, float) and not slots.is_integer()):
            raise ValueError
        n = int(slots.strip() if isinstance(slots, str) else slots)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise ValueError(f"openai_sjf.wrap: slots must be an integer >= 1 (requests the backend runs at once), "
                         f"got {slots!r}")
    return n


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
    """The scheduler for a client of ``base_url`` (see the module rules; ``promotion``,
    ``fairness`` and the defaults count as options like ``policy``:
    :mod:`sjf_core.policy._tenants`).

    Raises:
        ValueError: ``slots`` not an integer >= 1, or an unknown policy / promotion rule, a bad
            τ (from :class:`~sjf_core.config.SchedulerConfig`: the message names the setting).
    """
    slots = check_slots(slots)
    key = backend_key(base_url)
    wanted = (slots, _ident(policy), _ident(tau), _ident(promotion), _ident(predictor), _ident(fairness),
              _ident(default_priority), _ident(default_deadline_s))
    with _lock:
        owner = _owners.get(key)
        if owner is not None:
            sched, first = owner
            if any(w is not None and w != f for w, f in zip(wanted, first)):
                warnings.warn(
                    f"openai_sjf: backend {key} already has an SJF queue configured by an earlier wrap() "
                    f"({_labelled(first)}); the new settings ({_labelled(wanted)}) are ignored. "
                    "Pass scheduler= for a separate queue.",
                    RuntimeWarning,
                    stacklevel=3,
                )
            return sched
        if all(v is None for v in wanted[1:]):
            sched = default_scheduler()
        else:
            okey = wanted[1:]
            sched = _by_options.get(okey)
            if sched is None:
                given = {"policy": "sjf-tokens" if policy is None else policy, "tau": "3x" if tau is None else tau}
                if promotion is not None:
                    given["promotion"] = promotion
                if fairness is not None:
                    given["fairness"] = fairness
                if default_priority is not None or default_deadline_s is not None:
                    given["defaults"] = {"priority": default_priority, "deadline_s": default_deadline_s}
                config = SchedulerConfig.from_env().replace(**given)
                sched = Scheduler(config, predictor="default" if predictor is None else predictor)
                _by_options[okey] = sched
        sched.preload()  # the first request that waits must not pay the model load
        if slots is not None:
            existing = sched.queues.get(key)
            if existing is None:
                sched.set_slots(key, slots)
            elif existing.slots != slots:
                warnings.warn(
                    f"openai_sjf: the queue of backend {key} already exists with {existing.slots} slot(s); "
                    f"slots={slots} is ignored.",
                    RuntimeWarning,
                    stacklevel=3,
                )
        _owners[key] = (sched, wanted)
        return sched


def _reset_for_tests() -> None:
    """Forget all ownership (tests only; live queues are not touched)."""
    with _lock:
        _owners.clear()
        _by_options.clear()
