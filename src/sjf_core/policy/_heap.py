"""The heap pending structure: the policy order as one min-heap, any promotion strategy.

push, pop and remove are O(log n) amortised (lazy deletion; DESIGN.md invariant 4).
"""

from __future__ import annotations

import heapq

from sjf_core.policy._entry import Entry
from sjf_core.policy._structure import PendingBase


class HeapPending(PendingBase):
    """Min-heap on the strategy's order key (policy key, or its aged form) with the
    strategy's starvation guard (:mod:`sjf_core.policy.promotion`).

    Args:
        tau, promotion, k, slots, service, rule_options: as
            :class:`~sjf_core.policy._structure.PendingBase` (``promotion``: a strategy
            or a rule name; default "strict").

    Raises:
        ValueError: as :class:`~sjf_core.policy._structure.PendingBase`.
    """

    def __init__(self, tau=None, promotion="strict", k: int = 2, **kw):
        self._heap: list[tuple[tuple, Entry]] = []
        super().__init__(tau, promotion, k, **kw)

    def _push_main(self, entry: Entry) -> None:
        heapq.heappush(self._heap, (self.order_key(entry), entry))

    def _pop_main(self, now: float) -> Entry | None:
        h = self._heap
        while h:
            e = heapq.heappop(h)[1]
            if not e.removed:
                return e
        return None

    def _clear_main(self) -> None:
        self._heap.clear()

    def _live_entries(self) -> list[Entry]:
        return [e for _, e in self._heap if not e.removed]
