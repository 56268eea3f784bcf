"""The "fcfs-bound" rule (the previous default): no request waits much longer than FCFS.

A waiter is due once it has waited longer than τ, than ``(1 + slack)`` × U (U: the backlog
per slot at its arrival, the wait FCFS would give it, :mod:`._backlog`) and than
``floor`` × Ū (the running mean of U over arrivals, EWMA weight 0.02).
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

from sjf_core.settings import PromotionSettings
from sjf_core.policy._entry import Entry
from sjf_core.policy.promotion._backlog import Backlog
from sjf_core.policy.promotion._base import PromotionRule, band_top, check

#: Defaults (chosen with ``sjf simulate --scenario variants``).
DEFAULT_FCFS_SLACK = PromotionSettings.slack
DEFAULT_FCFS_FLOOR = PromotionSettings.floor


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
        self.backlog = Backlog()

    def backlog_s(self, now: float) -> float:
        """Expected unfinished work per slot at ``now`` (seconds): the FCFS wait of an arrival now."""
        return self.backlog.per_slot(now, self.q.slots)

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
        self.backlog.add(entry, self.q.service.expected_s(entry.klass, entry.expected_tokens))

    def due(self, now: float) -> Entry | None:
        top = band_top(self._bounds, self.q.top_band)
        if top is not None and top[1] <= now and now - top[3].arrival >= self.floor * self.mean_backlog_s:
            return heapq.heappop(self._bounds)[3]
        return None

    def on_pop(self, entry: Entry, now: float, by_policy: bool) -> None:
        self.backlog.left(entry, now)

    def on_remove(self, entry: Entry) -> None:
        self.backlog.left(entry, None)

    def clear(self) -> None:
        self._bounds.clear()

    def observed(self, entry: Entry) -> None:
        self.backlog.finished(entry)

    def rescored(self, entry: Entry) -> None:
        self.backlog.rescored(entry, self.q.service.expected_s(entry.klass, entry.expected_tokens))

    def due_points(self) -> dict[int, dict[str, float]]:
        return {e.seq: {"time": b} for _, b, _, e in self._bounds if not e.removed}

    def wire(self) -> dict[str, Any]:
        return dict(super().wire(), slack=self.slack, floor=self.floor, max_wait_s=self.cap_s)
