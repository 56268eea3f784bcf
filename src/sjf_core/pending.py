"""Pending-request structures: pure, synchronous and clock-agnostic.

A pending queue holds the :class:`~sjf_core.entry.Entry` objects that wait for a
slot and decides which one goes next. It never reads a clock: the caller passes
``now`` (seconds) to :meth:`pop`. The asyncio admission queue passes
``time.monotonic()``; the simulator passes its virtual time. This is what lets the
live queue and the simulator run the very same policy code (DESIGN.md).

Costs: push, pop and remove are O(log n) amortised (lazy deletion); finding the
oldest waiter for τ is O(1) amortised on a second heap ordered by arrival
(DESIGN.md invariant 4).
"""

from __future__ import annotations

import heapq
import math
from typing import Protocol

from .entry import Entry
from .tau import TauEstimator


class PendingQueue(Protocol):
    """What every pending structure offers (heap, DRR, ...)."""

    tau: TauEstimator

    def push(self, entry: Entry) -> None: ...

    def pop(self, now: float) -> Entry | None: ...

    def remove(self, entry: Entry) -> bool: ...

    def observe(self, entry: Entry, service_s: float, true_class: int | None = None) -> None: ...

    def __len__(self) -> int: ...


class AgeIndex:
    """Waiters ordered by arrival, for τ: O(log n) push, O(1) amortised oldest."""

    __slots__ = ("_heap",)

    def __init__(self):
        self._heap: list[tuple[float, int, Entry]] = []

    def push(self, entry: Entry) -> None:
        heapq.heappush(self._heap, (entry.arrival, entry.seq, entry))

    def oldest(self) -> Entry | None:
        h = self._heap
        while h and h[0][2].removed:
            heapq.heappop(h)
        return h[0][2] if h else None

    def clear(self) -> None:
        self._heap.clear()


class HeapPending:
    """Min-heap on the policy key with a τ starvation guard (paper §3.4).

    Args:
        tau: the τ estimator of this queue.
        promotion: how aged waiters (waited > τ) are promoted:

            * ``"strict"``: the paper's rule and DESIGN.md invariant 4: before every
              dispatch, the oldest waiter older than τ goes first. In a burst
              every waiter soon exceeds τ and the order collapses to FCFS.
            * ``"one-in-k"``: at most one aged waiter is promoted per ``k``
              dispatches; the others follow the policy key. Starvation stays
              bounded (an aged waiter waits at most k-1 extra dispatches per
              older aged waiter) while short requests keep their advantage.
        k: the k of ``"one-in-k"`` (>= 1; k = 1 is ``"strict"``).
    """

    def __init__(self, tau: TauEstimator | None = None, promotion: str = "strict", k: int = 2):
        if promotion not in ("strict", "one-in-k"):
            raise ValueError(f"promotion must be 'strict' or 'one-in-k', got {promotion!r}")
        if k < 1:
            raise ValueError("k must be >= 1")
        self.tau = tau or TauEstimator()
        self.promotion = promotion
        self.k = 1 if promotion == "strict" else k
        self._heap: list[tuple[tuple, Entry]] = []
        self._ages = AgeIndex()
        self._size = 0
        self._since_promotion = 0
        self.promotions = 0

    def __len__(self) -> int:
        return self._size

    def push(self, entry: Entry) -> None:
        entry.removed = False
        entry.promoted = False
        heapq.heappush(self._heap, (entry.sort_key(), entry))
        self._ages.push(entry)
        self._size += 1

    def remove(self, entry: Entry) -> bool:
        """Withdraw a waiter (cancelled, timed out). Returns False if it was not waiting."""
        if entry.removed:
            return False
        entry.removed = True
        self._size -= 1
        if self._size == 0:
            self._heap.clear()
            self._ages.clear()
        return True

    def _pop_min(self) -> Entry | None:
        h = self._heap
        while h:
            e = heapq.heappop(h)[1]
            if not e.removed:
                return e
        return None

    def pop(self, now: float) -> Entry | None:
        """Take the next waiter to dispatch at time ``now`` (seconds), or None if empty."""
        if self._size == 0:
            return None
        chosen = None
        tau_s = self.tau.tau_s
        if not math.isinf(tau_s) and self._since_promotion + 1 >= self.k:
            oldest = self._ages.oldest()
            if oldest is not None and now - oldest.arrival > tau_s:
                chosen = oldest
                chosen.promoted = True
                self.promotions += 1
                self._since_promotion = 0
        if chosen is None:
            chosen = self._pop_min()
            self._since_promotion += 1
        chosen.removed = True
        self._size -= 1
        return chosen

    def observe(self, entry: Entry, service_s: float, true_class: int | None = None) -> None:
        """A dispatched entry finished after holding its slot ``service_s`` seconds."""
        self.tau.observe(entry.klass if true_class is None else true_class, service_s)
