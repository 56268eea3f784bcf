"""Waiters by band, then arrival: the τ index of "strict", "one-in-k" and "aged-sjf".

O(log n) push, O(1) amortised oldest (lazy deletion of withdrawn entries), DESIGN.md
invariant 4. The top is the oldest live waiter of the highest band present.
"""

from __future__ import annotations

import heapq

from sjf_core.policy._entry import Entry


class AgeIndex:
    """Waiters ordered by ``(-priority, arrival, seq)``."""

    __slots__ = ("_heap",)

    def __init__(self):
        self._heap: list[tuple[int, float, int, Entry]] = []

    def push(self, entry: Entry) -> None:
        heapq.heappush(self._heap, (-entry.priority, entry.arrival, entry.seq, entry))

    def oldest(self) -> Entry | None:
        """The oldest live waiter of the highest band in the index, or None."""
        h = self._heap
        while h and h[0][3].removed:
            heapq.heappop(h)
        return h[0][3] if h else None

    def pop_older_than(self, arrival: float) -> list[Entry]:
        """Remove and return the live waiters of the highest band(s) that arrived before
        ``arrival``, oldest first within a band; stops at the first younger live waiter
        (lower bands are reached once the higher ones are gone)."""
        h = self._heap
        out = []
        while h and (h[0][3].removed or h[0][1] < arrival):
            e = heapq.heappop(h)[3]
            if not e.removed:
                out.append(e)
        return out

    def clear(self) -> None:
        self._heap.clear()
