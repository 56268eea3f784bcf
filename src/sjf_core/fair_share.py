"""Fair shares across tenants: deficit round robin on measured service seconds.

:class:`TenantPending` is a pending structure (:class:`~sjf_core.pending.PendingQueue`)
made of one sub-structure per tenant (the policy's own, e.g. a
:class:`~sjf_core.pending.HeapPending` with its starvation guard: SJF order and the
guard act inside each tenant), all sharing one τ estimate and one set of service
statistics. Order at each :meth:`pop`:

1. **Strict priority bands**: only tenants whose top waiter is in the top non-empty
   band compete.
2. **Deficit round robin** over those tenants (Shreedhar & Varghese): a tenant's turn
   credits it ``quantum × weight`` seconds, it dispatches while its deficit is
   positive, and each dispatch is charged its expected service seconds, corrected to
   the measured service time when it completes (:meth:`observe`). The quantum is the
   observed mean service time of a Short. A tenant that empties forfeits its credit
   but keeps its debt. A tenant alone in the band is served at once (work-conserving)
   and charged nothing.
3. Inside the chosen tenant, its sub-structure's own order (deadlines, guard, SJF).

Costs: O(T) per pop for T tenants with waiters, plus the sub-structure's O(log n).
"""

from __future__ import annotations

import math
from typing import Callable

from .entry import SHORT, Entry
from .service import ServiceStats
from .tau import TauEstimator

#: Rounds after which a DRR search gives up and serves the first eligible tenant.
_MAX_ROUNDS = 10_000


class TenantPending:
    """Per-tenant sub-queues under deficit round robin (see the module docstring).

    Args:
        make_sub: ``make_sub(tau, service)`` returns a fresh sub-structure sharing
            ``tau`` and ``service`` (None: make new ones; the first call does).
        weight: ``weight(tenant_id) -> float > 0``, the tenant's share weight.

    Attributes:
        deficit: tenant id -> deficit seconds (may be negative: debt).
    """

    def __init__(self, make_sub: Callable[[TauEstimator | None, ServiceStats | None], object],
                 weight: Callable[[str | None], float] | None = None):
        first = make_sub(None, None)
        self.tau: TauEstimator = first.tau
        self.service: ServiceStats = first.service
        self._make = make_sub
        self._weight = weight or (lambda t: 1.0)
        self._subs: dict[str | None, object] = {None: first}
        self._ring: list[str | None] = []  # tenants with waiters, in round order
        self._cur = 0
        self._credited = False
        self.deficit: dict[str | None, float] = {}
        self._running: dict[int, tuple[object, str | None, float]] = {}
        self._size = 0
        self._slots = getattr(first, "slots", 1)
        self.dispatched: dict[str | None, int] = {}

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
        if len(s) == 0 and t not in self._ring:
            self._ring.append(t)
            self.deficit.setdefault(t, 0.0)
        s.push(entry)
        self._size += 1

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
        cost = 0.0
        if self._competing is not None and self._competing > 1:
            cost = self._cost(e)
            self.deficit[t] = self.deficit.get(t, 0.0) - cost
        self._running[id(e)] = (s, t, cost)
        self.dispatched[t] = self.dispatched.get(t, 0) + 1
        if len(s) == 0:
            self._emptied(t)
        return e

    def observe(self, entry: Entry, service_s: float, true_class: int | None = None,
                answer_tokens: float | None = None) -> None:
        """A dispatched entry finished after ``service_s`` seconds: correct its tenant's
        charge to the measured time, then feed τ and the service statistics."""
        r = self._running.pop(id(entry), None)
        s = self._subs[None] if r is None else r[0]
        if r is not None and r[2] > 0 and math.isfinite(service_s) and service_s >= 0 and r[1] in self.deficit:
            self.deficit[r[1]] -= service_s - r[2]
        try:
            s.observe(entry, service_s, true_class, answer_tokens)
        except TypeError:
            s.observe(entry, service_s, true_class)

    def rescored(self, entry: Entry) -> None:
        r = self._running.get(id(entry))
        fn = getattr(r[0] if r else self._subs[None], "rescored", None)
        if fn is not None:
            fn(entry)

    # ---- introspection ---------------------------------------------------------------
    @property
    def promotions(self) -> int:
        return sum(getattr(s, "promotions", 0) for s in self._subs.values())

    @property
    def deadline_dispatches(self) -> int:
        return sum(getattr(s, "deadline_dispatches", 0) for s in self._subs.values())

    @property
    def top_band(self) -> int | None:
        bands = [self._subs[t].top_band for t in self._ring]
        return max(bands) if bands else None

    def tenants(self) -> dict[str | None, int]:
        """Waiters per tenant with waiters."""
        return {t: len(self._subs[t]) for t in self._ring}

    # ---- DRR ---------------------------------------------------------------------------
    def quantum(self) -> float:
        """Seconds credited per turn (× weight): the observed mean Short service time."""
        q = self.service.by_predicted[SHORT]
        return q if q > 1e-3 and math.isfinite(q) else 1e-3

    def _cost(self, e: Entry) -> float:
        try:
            c = float(self.service.expected_s(e.klass, e.expected_tokens))
        except Exception:
            c = self.quantum()
        return c if c > 0 and math.isfinite(c) else self.quantum()

    def _emptied(self, t: str | None) -> None:
        if t in self._ring:
            i = self._ring.index(t)
            self._ring.pop(i)
            if i < self._cur:
                self._cur -= 1
            elif i == self._cur:
                self._credited = False
            if self._cur >= len(self._ring):
                self._cur = 0
        self.deficit[t] = min(self.deficit.get(t, 0.0), 0.0)  # credit forfeited, debt kept
        if self.deficit[t] == 0.0:
            del self.deficit[t]

    def _choose(self) -> str | None:
        ring = self._ring
        band = max(self._subs[t].top_band for t in ring)
        eligible = [t for t in ring if self._subs[t].top_band == band]
        self._competing = len(eligible)
        if len(eligible) == 1:
            return eligible[0]
        q = self.quantum()
        n = len(ring)
        for step in range(_MAX_ROUNDS * n):
            if self._cur >= n:
                self._cur = 0
            t = ring[self._cur]
            if self._subs[t].top_band == band:
                if not self._credited:
                    self.deficit[t] = self.deficit.get(t, 0.0) + q * self._weight(t)
                    self._credited = True
                if self.deficit[t] > 0:
                    return t
            self._cur = (self._cur + 1) % n
            self._credited = False
            if step and step % n == 0:
                # a full round without a positive deficit: fast-forward the rounds needed
                need = min(math.ceil(-self.deficit.get(x, 0.0) / (q * self._weight(x))) for x in eligible)
                if need > 1:
                    for x in eligible:
                        self.deficit[x] = self.deficit.get(x, 0.0) + (need - 1) * q * self._weight(x)
        return eligible[0]

    _competing: int | None = None
