"""The heap pending structure: the policy order as one min-heap, any promotion strategy.

push, pop and remove are O(log n) amortised (lazy deletion; DESIGN.md invariant 4). Heap
items are flat ``(*order_key, entry)`` tuples: an order key ends in the unique ``seq``, so
the entry itself is never compared, and a comparison touches one tuple, not two.
"""

from __future__ import annotations

import heapq

from sjf_core.policy._entry import Entry
from sjf_core.policy._structure import PendingBase
from sjf_core.policy.promotion._base import compact


class HeapPending(PendingBase):
    """Min-heap on the strategy's order key (policy key, or its aged form) with the
    strategy's starvation guard (:mod:`sjf_core.policy.promotion`).

    Args:
        tau, promotion, slots, service: as :class:`~sjf_core.policy._structure.PendingBase`
            (``promotion``: a strategy, settings or a rule name; None: the default rule).

    Raises:
        ValueError: as :class:`~sjf_core.policy._structure.PendingBase`.
    """

    def __init__(self, tau=None, promotion=None, *, slots: int = 1, service=None):
        self._heap: list[tuple] = []  # (*order_key, entry)
        super().__init__(tau, promotion, slots=slots, service=service)

    def _push_main(self, entry: Entry) -> None:
        h = self._heap
        compact(h, self._size)  # entries dispatched by a promotion or deadline linger otherwise
        heapq.heappush(h, (*self.strategy.order_key(entry), entry))

    def _pop_main(self, now: float) -> Entry | None:
        h = self._heap
        while h:
            e = heapq.heappop(h)[-1]
            if not e.removed:
                return e
        return None

    def _clear_main(self) -> None:
        self._heap.clear()

    def _live_entries(self) -> list[Entry]:
        return [item[-1] for item in self._heap if not item[-1].removed]
