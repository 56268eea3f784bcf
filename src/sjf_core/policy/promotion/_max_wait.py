"""The ``max_wait_s`` absolute bound, combined with any rule: a waiter that has waited
``max_wait_s`` seconds is due.

:class:`MaxWait` wraps a rule: its due waiters (earliest ``arrival + max_wait_s`` of the top
band) go before the wrapped rule's, which sees every other call unchanged. "fcfs-bound"
keeps its bounds on the same clock, so :func:`~sjf_core.policy.promotion.with_max_wait` folds the cap into its own
index instead (one index, one floor check, as the Redis scripts do). ``max_wait_s``: > 0
seconds; None or infinity: no bound.
"""

from __future__ import annotations

import heapq
from typing import Any

from sjf_core.policy._entry import Entry
from sjf_core.policy.promotion._base import PromotionRule, band_top, check


class MaxWait(PromotionRule):
    """``inner`` plus the absolute wait bound ``max_wait_s`` (seconds, > 0 finite)."""

    def __init__(self, inner: PromotionRule, max_wait_s: float):
        super().__init__()
        self.max_wait_s = check(inner.name, "max_wait_s", max_wait_s, strict=True)
        self.inner = inner
        self.name = inner.name
        self._bounds: list[tuple[int, float, int, Entry]] = []

    def attach(self, pending) -> None:
        super().attach(pending)
        self.inner.attach(pending)

    def on_push(self, entry: Entry) -> None:
        self.inner.on_push(entry)
        heapq.heappush(self._bounds, (-entry.priority, entry.arrival + self.max_wait_s, entry.seq, entry))

    def order_key(self, entry: Entry) -> tuple:
        return self.inner.order_key(entry)

    def due(self, now: float) -> Entry | None:
        top = band_top(self._bounds, self.q.top_band)
        if top is not None and top[1] <= now:
            return heapq.heappop(self._bounds)[3]
        return self.inner.due(now)

    def on_pop(self, entry: Entry, now: float, by_policy: bool) -> None:
        self.inner.on_pop(entry, now, by_policy)

    def on_remove(self, entry: Entry) -> None:
        self.inner.on_remove(entry)

    def clear(self) -> None:
        self._bounds.clear()
        self.inner.clear()

    def observed(self, entry: Entry) -> None:
        self.inner.observed(entry)

    def rescored(self, entry: Entry) -> None:
        self.inner.rescored(entry)

    def backlog_s(self, now: float) -> float:
        return self.inner.backlog_s(now)

    def due_points(self) -> dict[int, dict[str, float]]:
        points = self.inner.due_points()
        for _, t, _, e in self._bounds:
            if not e.removed:
                p = points.setdefault(e.seq, {})
                p["time"] = min(t, p.get("time", t))
        return points

    def __getattr__(self, name: str) -> Any:  # the wrapped rule's parameters (k, slowdown, ...)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def wire(self) -> dict[str, Any]:
        return dict(self.inner.wire(), max_wait_s=self.max_wait_s)

