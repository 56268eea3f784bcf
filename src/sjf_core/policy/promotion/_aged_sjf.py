"""The "aged-sjf" rule: waiters older than τ go first, in policy order among themselves.

Our reading of how the paper's simulator promoted (``sjf simulate --scenario table10``).
Not a starvation bound: a waiter past τ can be overtaken by every shorter one that
passes τ after it. Simulator and live queue only (the Redis store does not run it).
No parameters; nothing is due with τ off.
"""

from __future__ import annotations

import heapq
import math

from sjf_core.policy._entry import Entry
from sjf_core.policy.promotion._age_index import AgeIndex
from sjf_core.policy.promotion._base import PromotionRule


class AgedSJF(PromotionRule):
    """Waiters past τ, served in ``Entry.sort_key`` order (band first)."""

    name = "aged-sjf"

    def __init__(self):
        super().__init__()
        self._ages = AgeIndex()
        self._aged: list[tuple[tuple, Entry]] = []  # waiters past τ, in policy order

    def on_push(self, entry: Entry) -> None:
        self._ages.push(entry)

    def due(self, now: float) -> Entry | None:
        tau_s = self.q.tau.tau_s
        if math.isinf(tau_s):
            return None
        for e in self._ages.pop_older_than(now - tau_s):
            heapq.heappush(self._aged, (e.sort_key(), e))
        h = self._aged
        while h and h[0][1].removed:
            heapq.heappop(h)
        if h and h[0][1].priority == self.q.top_band:  # keyed by sort_key: band first
            return heapq.heappop(h)[1]
        return None

    def clear(self) -> None:
        self._ages.clear()
        self._aged.clear()

    def due_points(self) -> dict[int, dict[str, float]]:
        return self._tau_points()
