"""Fair shares across tenants: weighted fair queuing on measured service seconds.

:class:`TenantPending` is a pending structure (:class:`~sjf_core.policy._pending.PendingQueue`)
made of one sub-structure per tenant (the policy's own, e.g. a
:class:`~sjf_core.policy._pending.HeapPending` with its starvation guard: SJF order and the
guard act inside each tenant), all sharing one τ estimate and one set of service
statistics. Order at each :meth:`pop`:

1. **Strict priority bands**: only tenants whose top waiter is in the top non-empty
   band compete.
2. **Fair shares**: among those, the tenant that has received the least service,
   in seconds of backend time divided by its weight, goes next (start-time fair
   queuing: deficit round robin in the limit of a small quantum). Each dispatch is
   charged its expected service seconds and corrected to the measured service time
   when it completes (:meth:`observe`), so the shares are in measured seconds whatever
   the predictor's scale. A tenant that (re)joins starts at the system virtual time
   (the count of the last dispatched tenant before that dispatch's charge): no credit
   is banked while idle, and a tenant alone is served at once (work-conserving).
   Equal service: the tenant waiting longest goes first.
3. Inside the chosen tenant, its sub-structure's own order (deadlines, guard, SJF).

Costs: O(T) per pop for T tenants with waiters, plus the sub-structure's O(log n).
"""

from __future__ import annotations

import logging
import math
from typing import Callable

from sjf_core._faults import note_fault
from sjf_core.policy._entry import Entry
from sjf_core.policy._service import ServiceStats
from sjf_core.policy._tau import TauEstimator

log = logging.getLogger("sjf_core.policy")


#: Sub-structures kept before idle ones (no waiter, nothing running) are forgotten.
MAX_IDLE_SUBS = 1024


class TenantPending:
    """Per-tenant sub-queues sharing the slots by weighted service time (module docstring).

    Args:
        make_sub: ``make_sub(tau, service)`` returns a fresh sub-structure sharing
            ``tau`` and ``service`` (None: make new ones; the first call does).
        weight: ``weight(tenant_id) -> float > 0``, the tenant's share weight.

    Attributes:
        service_s: tenant id -> weighted service seconds received (virtual time) of
            the tenants seen recently.
        dispatched: tenant id -> requests dispatched.
    """

    def __init__(self, make_sub: Callable[[TauEstimator | None, ServiceStats | None], object],
                 weight: Callable[[str | None], float] | None = None):
        first = make_sub(None, None)
        self.tau: TauEstimator = first.tau
        self.service: ServiceStats = first.service
        self._make = make_sub
        self._weight = weight or (lambda t: 1.0)
        self._subs: dict[str | None, object] = {None: first}
        self._active: dict[str | None, int] = {}  # tenants with waiters -> activation order
        self._order = 0
        self.service_s: dict[str | None, float] = {}
        self._vclock = 0.0
        self._running: dict[int, tuple[object, str | None, float]] = {}
        self._size = 0
        self._slots = getattr(first, "slots", 1)
        self.dispatched: dict[str | None, int] = {}
        self._gone = [0, 0]  # promotions, deadline dispatches of forgotten sub-structures

    # ---- PendingQueue --------------------------------------------------------------
    def __len__(self) -> int:
        return self._size

    @property
    def slots(self) -> int:
        return self._slots

    @slots.setter
    def slots(self, n: int) -> None:
        self._slots = int(n)
        for s in self._subs.values():
            s.slots = int(n)

    def _sub(self, tenant: str | None):
        s = self._subs.get(tenant)
        if s is None:
            s = self._make(self.tau, self.service)
            s.slots = self._slots
            self._subs[tenant] = s
        return s

    def push(self, entry: Entry) -> None:
        t = entry.tenant
        s = self._sub(t)
        if t not in self._active:
            # a tenant that (re)joins starts at the system virtual time (the service count of
            # the last dispatch before its charge, as in start-time fair queuing): no credit
            # is banked while idle, and it is not behind the job now in service
            self.service_s[t] = max(self.service_s.get(t, 0.0), self._vclock)
            self._order += 1
            self._active[t] = self._order
        s.push(entry)
        self._size += 1

    def live_entries(self) -> list[Entry]:
        """Every tenant's live waiters (no order)."""
        return [e for s in list(self._subs.values()) for e in s.live_entries()]

    def remove(self, entry: Entry) -> bool:
        s = self._subs.get(entry.tenant)
        if s is None or not s.remove(entry):
            return False
        self._size -= 1
        if len(s) == 0:
            self._emptied(entry.tenant)
        return True

    def pop(self, now: float) -> Entry | None:
        if self._size == 0:
            return None
        t = self._choose()
        s = self._subs[t]
        e = s.pop(now)
        if e is None:  # defensive: a sub-structure that disagrees with its size
            self._emptied(t)
            self._size = sum(len(x) for x in self._subs.values())
            return self.pop(now) if self._size else None
        self._size -= 1
        w = self._weight(t)
        cost = self._cost(e)
        self._vclock = max(self._vclock, self.service_s.get(t, 0.0))
        self.service_s[t] = self.service_s.get(t, 0.0) + cost / w
        self._running[id(e)] = (s, t, cost)
        self.dispatched[t] = self.dispatched.get(t, 0) + 1
        if len(s) == 0:
            self._emptied(t)
        return e

    def observe(self, entry: Entry, service_s: float, true_class: int | None = None,
                answer_tokens: float | None = None) -> None:
        """A dispatched entry finished after ``service_s`` seconds: replace its tenant's
        expected charge by the measured time, then feed τ and the service statistics."""
        r = self._running.pop(id(entry), None)
        s = self._subs[None] if r is None else r[0]
        if r is not None and math.isfinite(service_s) and service_s >= 0 and r[1] in self.service_s:
            self.service_s[r[1]] += (service_s - r[2]) / self._weight(r[1])
        s.observe(entry, service_s, true_class, answer_tokens)

    def rescored(self, entry: Entry) -> None:
        r = self._running.get(id(entry))
        fn = getattr(r[0] if r else self._subs[None], "rescored", None)
        if fn is not None:
            fn(entry)

    # ---- introspection ---------------------------------------------------------------
    @property
    def promotions(self) -> int:
        return self._gone[0] + sum(getattr(s, "promotions", 0) for s in self._subs.values())

    @property
    def deadline_dispatches(self) -> int:
        return self._gone[1] + sum(getattr(s, "deadline_dispatches", 0) for s in self._subs.values())

    @property
    def top_band(self) -> int | None:
        bands = [self._subs[t].top_band for t in self._active]
        return max(bands) if bands else None

    def tenants(self) -> dict[str | None, int]:
        """Waiters per tenant with waiters."""
        return {t: len(self._subs[t]) for t in self._active}

    # ---- shares ------------------------------------------------------------------------
    def _cost(self, e: Entry) -> float:
        """Expected service seconds of ``e`` (charged at dispatch, corrected at completion)."""
        try:
            c = float(self.service.expected_s(e.klass, e.expected_tokens))
        except Exception:
            note_fault(log, "expected service time unavailable; the tenant is charged a minimal cost")
            c = 0.0
        return c if c > 0 and math.isfinite(c) else 1e-3

    def _emptied(self, t: str | None) -> None:
        self._active.pop(t, None)
        if len(self._subs) > MAX_IDLE_SUBS:  # many tenants: forget idle sub-structures
            busy = {id(r[0]) for r in self._running.values()}
            for x in [x for x, sub in self._subs.items()
                      if x is not None and x not in self._active and len(sub) == 0 and id(sub) not in busy]:
                sub = self._subs.pop(x)
                self._gone[0] += getattr(sub, "promotions", 0)
                self._gone[1] += getattr(sub, "deadline_dispatches", 0)
                self.dispatched.pop(x, None)
        # forget tenants that fell behind the clock: they would restart at the floor anyway
        if len(self.service_s) > 4 * (len(self._active) + 16):
            for x in [x for x, v in self.service_s.items() if x not in self._active and v <= self._vclock]:
                del self.service_s[x]

    def _choose(self) -> str | None:
        band = max(self._subs[t].top_band for t in self._active)
        best, best_key = None, None
        for t, order in self._active.items():
            if self._subs[t].top_band != band:
                continue
            key = (self.service_s.get(t, 0.0), order)
            if best_key is None or key < best_key:
                best, best_key = t, key
        return best


def pending_of(policy, fairness=None):
    """The pending structure of a queue running ``policy``: the policy's own, or (``fairness``
    enabled) a :class:`TenantPending` whose per-tenant sub-structures are the policy's own,
    sharing one τ and one set of service statistics."""
    if fairness is None or not getattr(fairness, "enabled", False):
        return policy.new_pending()

    def sub(tau, service):
        p = policy.new_pending()
        if tau is not None:
            p.tau = tau
        if service is not None:
            p.service = service
        return p

    return TenantPending(sub, fairness.weight)
