"""The deficit-round-robin pending structure (``fair`` policy): classes share the server's
time by weight; any promotion strategy acts on top, orthogonal to the allocation.
"""

from __future__ import annotations

import heapq
import math
from typing import Sequence

from sjf_core.policy._entry import LONG, MEDIUM, SHORT, Entry
from sjf_core.policy._structure import PendingBase
from sjf_core.policy._tau import TauEstimator


def class_weights(weights: Sequence[float]) -> tuple[float, float, float]:
    """``weights`` of Short, Medium, Long as three floats. Raises ValueError unless each is > 0."""
    w = tuple(float(x) for x in weights)
    if len(w) != 3 or not all(x > 0 and math.isfinite(x) for x in w):
        raise ValueError("weights must be three positive numbers (Short, Medium, Long)")
    return w


class DRRPending(PendingBase):
    """Adaptive deficit round robin across Short / Medium / Long (seed 003, allocation layer).

    Each predicted class has its own heap in the policy order (ordering layer). A
    round visits the classes in turn; a backlogged class earns a quantum of
    ``weight[c] × max_c(mean service time of class c)`` seconds and dispatches
    while its deficit covers the cost of its head, the *observed* mean service
    time of its class (:class:`~sjf_core.policy._service.ServiceStats`, by predicted
    class). So backlogged classes share the server's time by weight (equal by
    default: a Long per round against ~15 Shorts with paper Table 1 times), and
    quanta adapt as service times are observed. An empty class forfeits its
    deficit (work-conserving). A waiter dispatched by deadline or τ promotion is
    charged to its class's deficit.

    Args:
        weights: time-share weights of Short, Medium, Long (each > 0).
        tau, promotion, slots, service: as
            :class:`~sjf_core.policy._structure.PendingBase` (any promotion strategy).

    Raises:
        ValueError: as :class:`~sjf_core.policy._structure.PendingBase`, or a weight not positive.
    """

    def __init__(self, tau: TauEstimator | None = None, promotion=None, *, weights: Sequence[float] = (1.0, 1.0, 1.0),
                 slots: int = 1, service=None):
        self.weights = class_weights(weights)
        self._queues: list[list[tuple[tuple, Entry]]] = [[], [], []]
        self._live = [0, 0, 0]
        self.deficit = [0.0, 0.0, 0.0]
        self._cur = SHORT
        self._credited = False
        super().__init__(tau, promotion, slots=slots, service=service)

    @staticmethod
    def _class(entry: Entry) -> int:
        return entry.klass if entry.klass in (SHORT, MEDIUM, LONG) else MEDIUM

    def quantum(self, c: int) -> float:
        """Quantum of class ``c`` in seconds: weight × the largest observed class mean."""
        return self.weights[c] * max(self.service.by_predicted)

    def cost(self, c: int) -> float:
        """Cost of dispatching one request of class ``c``: its observed mean service seconds."""
        return self.service.by_predicted[c]

    def _push_main(self, entry: Entry) -> None:
        c = self._class(entry)
        heapq.heappush(self._queues[c], (self.order_key(entry), entry))
        self._live[c] += 1

    def _left(self, entry: Entry) -> None:
        c = self._class(entry)
        self._live[c] -= 1
        if self._live[c] == 0:
            self._queues[c].clear()
            self.deficit[c] = 0.0

    def _bypassed(self, entry: Entry) -> None:
        c = self._class(entry)
        self.deficit[c] -= self.cost(c)

    def _next(self) -> None:
        self._cur = (self._cur + 1) % 3
        self._credited = False

    def _head(self, c: int) -> Entry | None:
        q = self._queues[c]
        while q and q[0][1].removed:
            heapq.heappop(q)
        return q[0][1] if q else None

    def _pop_main(self, now: float) -> Entry | None:
        for _ in range(3000):  # weights >= 0.001 of the largest need at most ~1000 rounds
            c = self._cur
            if self._live[c] == 0:
                self.deficit[c] = 0.0
                self._next()
                continue
            head = self._head(c)
            if head is None or head.priority != self.top_band:  # strict bands: not competing now
                self._next()
                continue
            if not self._credited:
                self.deficit[c] += self.quantum(c)
                self._credited = True
            if self.deficit[c] >= self.cost(c) - 1e-12:
                self.deficit[c] -= self.cost(c)
                head = self._head(c)
                heapq.heappop(self._queues[c])
                return head
            self._next()
        # unreachable with sane weights; serve the fullest class of the top band rather than stall
        c = max(range(3), key=lambda i: (self._live[i] > 0 and getattr(self._head(i), "priority", None) == self.top_band,
                                         self._live[i]))
        head = self._head(c)
        if head is not None:
            heapq.heappop(self._queues[c])
        return head

    def _clear_main(self) -> None:
        for q in self._queues:
            q.clear()
        self._live = [0, 0, 0]  # deficits survive a rebuild; `_left` resets an emptied class

    def _live_entries(self) -> list[Entry]:
        return [e for q in self._queues for _, e in q if not e.removed]
