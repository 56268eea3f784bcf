"""τ-threshold rules: "strict" (the paper's, §3.4) and "one-in-k".

"strict": before every dispatch, the oldest waiter of the top band older than τ goes
first (DESIGN.md invariant 4); in a burst every waiter soon exceeds τ and the order
collapses to FCFS. "one-in-k": at most one such promotion per ``k`` dispatches, the
others follow the policy key; an aged waiter waits at most k-1 extra dispatches per
older aged waiter. Both do nothing with τ off. ``k``: int >= 1 (1 is "strict").
"""

from __future__ import annotations

import math
from typing import Any

from sjf_core.settings import PromotionSettings
from sjf_core.policy._entry import Entry
from sjf_core.policy.promotion._age_index import AgeIndex
from sjf_core.policy.promotion._base import PromotionRule


class OneInK(PromotionRule):
    """At most one τ promotion (oldest waiter past τ) per ``k`` dispatches.

    Raises:
        ValueError: ``k`` not an integer >= 1.
    """

    name = "one-in-k"

    def __init__(self, k: int = PromotionSettings.k):
        super().__init__()
        try:
            k = int(k)
        except (TypeError, ValueError):
            k = 0
        if k < 1:
            raise ValueError(f"k ({self.name!r} promotion) must be an integer >= 1")
        self.k = k
        self._ages = AgeIndex()
        self._since = 0  # dispatches by the policy order since the last τ promotion

    def on_push(self, entry: Entry) -> None:
        self._ages.push(entry)

    def due(self, now: float) -> Entry | None:
        tau_s = self.q.tau.tau_s
        if math.isinf(tau_s) or self._since + 1 < self.k:
            return None
        oldest = self._ages.oldest()  # the oldest of the top band
        if oldest is not None and oldest.priority == self.q.top_band and now - oldest.arrival > tau_s:
            self._since = 0
            return oldest
        return None

    def on_pop(self, entry: Entry, now: float, by_policy: bool) -> None:
        if by_policy:
            self._since += 1

    def clear(self) -> None:
        self._ages.clear()

    def due_points(self) -> dict[int, dict[str, float]]:
        return self._tau_points()

    def wire(self) -> dict[str, Any]:
        return dict(super().wire(), k=self.k)


class Strict(OneInK):
    """The paper's rule: the oldest waiter past τ goes first, at every dispatch (k = 1)."""

    name = "strict"

    def __init__(self):
        super().__init__(1)
