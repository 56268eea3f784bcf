"""The "work-bound" rule (the default): a due point on the served-work clock.

A waiter is due once the backend has served, since it arrived, ``slowdown`` × its own
expected work w or ``(1 + work_slack)`` × the work A waiting ahead of it, whichever is more:
due point ``W + max(slowdown × w, (1 + work_slack) × A)`` (tokens, W = served work at its
arrival). A counts only waiters that arrived before the last dispatch, so a burst (arrivals
with no dispatch between them) keeps pure policy order. Due waiters go first, earliest due
point first. Measured in served tokens: idle time and backend speed change nothing.
τ off: nothing is due. ``slowdown`` > 0 finite, ``work_slack`` >= 0 finite.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

from sjf_core.settings import PromotionSettings
from sjf_core.policy._entry import Entry
from sjf_core.policy.promotion._base import PromotionRule, band_top, check, compact
from sjf_core.policy.promotion._work_aging import DEFAULT_SLOWDOWN

#: Default ``work_slack`` (``sjf simulate --scenario guard``, docs/scheduling.md).
DEFAULT_WORK_SLACK = PromotionSettings.work_slack


class WorkBound(PromotionRule):
    """Due points on the served-work clock (module docstring).

    Raises:
        ValueError: slowdown not > 0 and finite, work_slack not >= 0 and finite.
    """

    name = "work-bound"
    uses_tau = False

    def __init__(self, slowdown: float = DEFAULT_SLOWDOWN, work_slack: float = DEFAULT_WORK_SLACK):
        super().__init__()
        self.slowdown = check(self.name, "slowdown", slowdown, strict=True)
        self.work_slack = check(self.name, "work_slack", work_slack)
        self._bounds: list[tuple[int, float, int, Entry]] = []
        self._waiting = 0.0  # work of the waiters (tokens)
        self._batch = 0.0  # work of the waiters that arrived since the last dispatch

    def bound(self, entry: Entry) -> float:
        """Due point of ``entry`` (tokens) as it arrives now (module docstring)."""
        ahead = max(0.0, self._waiting - self._batch)
        return entry.served_at_arrival + max(self.slowdown * entry.work_tokens, (1.0 + self.work_slack) * ahead)

    def on_push(self, entry: Entry) -> None:
        w = entry.work_tokens
        if not math.isinf(self.q.tau.tau_s):
            compact(self._bounds, len(self.q))  # entries dispatched by policy order linger otherwise
            # self.bound(entry), inlined (hot path)
            ahead = self._waiting - self._batch
            ahead = (1.0 + self.work_slack) * ahead if ahead > 0.0 else 0.0
            own = self.slowdown * w
            bound = entry.served_at_arrival + (ahead if ahead > own else own)  # max(own, ahead)
            heapq.heappush(self._bounds, (-entry.priority, bound, entry.seq, entry))
        self._waiting += w
        self._batch += w

    def due(self, now: float) -> Entry | None:
        top = band_top(self._bounds, self.q.top_band)
        if top is not None and top[1] <= self.q.served_work:
            return heapq.heappop(self._bounds)[3]
        return None

    def on_pop(self, entry: Entry, now: float, by_policy: bool) -> None:
        self._waiting -= entry.work_tokens
        self._batch = 0.0  # the clock moved: later arrivals are a new batch

    def on_remove(self, entry: Entry) -> None:
        self._waiting -= entry.work_tokens
        if entry.served_at_arrival == self.q.served_work:
            self._batch -= entry.work_tokens

    def clear(self) -> None:
        self._bounds.clear()
        self._waiting = 0.0
        self._batch = 0.0

    def due_points(self) -> dict[int, dict[str, float]]:
        return {e.seq: {"work": b} for _, b, _, e in self._bounds if not e.removed}

    def wire(self) -> dict[str, Any]:
        return dict(super().wire(), slowdown=self.slowdown, work_slack=self.work_slack)
