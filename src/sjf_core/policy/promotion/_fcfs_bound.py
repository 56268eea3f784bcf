"""The "fcfs-bound" rule (the previous default): no request waits much longer than FCFS.

A waiter is due once it has waited longer than τ, than ``(1 + slack)`` × U (U: the backlog
per slot at its arrival, the wait FCFS would give it, from observed per-class service
times) and than ``floor`` × Ū (the running mean of U over arrivals, EWMA weight 0.02).
Due waiters go first, earliest bound first; only that one is checked against the floor.
In a burst the bounds spread over the FCFS schedule, so short requests keep their lead.
τ off: no FCFS bound. ``slack``, ``floor`` >= 0 finite. ``cap_s`` (set by
:func:`~sjf_core.policy.promotion.with_max_wait`): every bound is at most arrival + cap_s,
in the same index and under the same floor check (as the Redis scripts do).
"""

from __future__ import annotations

import heapq
import math
from typing import Any

from sjf_core.policy._entry import Entry
from sjf_core.policy.promotion._base import PromotionRule, band_top, check

#: Defaults (chosen with ``sjf simulate --scenario variants``).
DEFAULT_FCFS_SLACK = 0.0
DEFAULT_FCFS_FLOOR = 1.0


class FCFSBound(PromotionRule):
    """FCFS bounds on the queue clock (module docstring). Raises ValueError: bad slack or floor."""

    name = "fcfs-bound"

    def __init__(self, slack: float = DEFAULT_FCFS_SLACK, floor: float = DEFAULT_FCFS_FLOOR):
        super().__init__()
        self.slack = check(self.name, "slack", slack)
        self.floor = check(self.name, "floor", floor)
        self.cap_s: float | None = None
        self.mean_backlog_s = 0.0
        self._bounds: list[tuple[int, float, int, Entry]] = []
        self._work: dict[int, float] = {}  # expected service seconds of each waiter
        self._waiting_work = 0.0
        self._running: dict[int, tuple[float, float]] = {}  # id -> (expected s, dispatched at)

    def backlog_s(self, now: float) -> float:
        """Expected unfinished work per slot at ``now`` (seconds): waiters plus the
        expected remainder of running entries; the FCFS wait of an arrival now."""
        running = 0.0
        stale = []
        for key, (w, t0) in self._running.items():
            left = w - (now - t0)
            if left > 0:
                running += left
            elif now - t0 > 3 * w + 60:  # never observed (lost release): forget it
                stale.append(key)
        for key in stale:
            del self._running[key]
        return (self._waiting_work + running) / self.q.slots

    def bound(self, entry: Entry) -> float:
        """FCFS bound of ``entry`` arriving now (seconds, queue clock); updates Ū."""
        tau_s = self.q.tau.tau_s
        if math.isinf(tau_s):
            return math.inf
        u = self.backlog_s(entry.arrival)
        self.mean_backlog_s += 0.02 * (u - self.mean_backlog_s)
        return entry.arrival + max(tau_s, (1.0 + self.slack) * u)

    def on_push(self, entry: Entry) -> None:
        b = self.bound(entry)
        if self.cap_s is not None:
            b = min(b, entry.arrival + self.cap_s)
        if b < math.inf:
            heapq.heappush(self._bounds, (-entry.priority, b, entry.seq, entry))
        work = self.q.service.expected_s(entry.klass, entry.expected_tokens)
        self._work[id(entry)] = work
        self._waiting_work += work

    def due(self, now: float) -> Entry | None:
        top = band_top(self._bounds, self.q.top_band)
        if top is not None and top[1] <= now and now - top[3].arrival >= self.floor * self.mean_backlog_s:
            return heapq.heappop(self._bounds)[3]
        return None

    def _left(self, entry: Entry, dispatched_at: float | None) -> None:
        work = self._work.pop(id(entry), None)
        if work is None:
            return
        self._waiting_work = max(0.0, self._waiting_work - work)
        if dispatched_at is not None:
            self._running[id(entry)] = (work, dispatched_at)

    def on_pop(self, entry: Entry, now: float, by_policy: bool) -> None:
        self._left(entry, now)

    def on_remove(self, entry: Entry) -> None:
        self._left(entry, None)

    def clear(self) -> None:
        self._bounds.clear()

    def observed(self, entry: Entry) -> None:
        self._running.pop(id(entry), None)

    def rescored(self, entry: Entry) -> None:
        r = self._running.get(id(entry))
        if r is not None:
            self._running[id(entry)] = (self.q.service.expected_s(entry.klass, entry.expected_tokens), r[1])

    def wire(self) -> dict[str, Any]:
        return dict(super().wire(), slack=self.slack, floor=self.floor, max_wait_s=self.cap_s)
