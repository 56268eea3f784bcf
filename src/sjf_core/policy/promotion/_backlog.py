"""The FCFS backlog estimate of "fcfs-bound": expected unfinished work per slot, in seconds.

Waiters count with their expected service time (observed per-class means,
:class:`~sjf_core.policy._service.ServiceStats`), running entries with the expected
remainder since dispatch; an entry running far past its estimate (never observed: a lost
release) is forgotten. Under any work-conserving order this is the wait FCFS would give a
request arriving now (exact for one slot when estimates are exact).
"""

from __future__ import annotations

from sjf_core.policy._entry import Entry


class Backlog:
    """Expected work of waiters and running entries (seconds).

    Attributes:
        waiting_s: expected service seconds of the waiters.
        running: ``id(entry) -> (expected service s, dispatched at)`` of running entries.
    """

    def __init__(self):
        self._work: dict[int, float] = {}  # waiter id -> expected service seconds
        self.waiting_s = 0.0
        self.running: dict[int, tuple[float, float]] = {}

    def add(self, entry: Entry, expected_s: float) -> None:
        self._work[id(entry)] = expected_s
        self.waiting_s += expected_s

    def left(self, entry: Entry, dispatched_at: float | None) -> None:
        """``entry`` stopped waiting: withdrawn (None) or dispatched at ``dispatched_at``."""
        work = self._work.pop(id(entry), None)
        if work is None:
            return
        self.waiting_s = max(0.0, self.waiting_s - work)
        if dispatched_at is not None:
            self.running[id(entry)] = (work, dispatched_at)

    def finished(self, entry: Entry) -> None:
        self.running.pop(id(entry), None)

    def rescored(self, entry: Entry, expected_s: float) -> None:
        r = self.running.get(id(entry))
        if r is not None:
            self.running[id(entry)] = (expected_s, r[1])

    def per_slot(self, now: float, slots: int) -> float:
        """Unfinished expected work per slot at ``now`` (seconds)."""
        running = 0.0
        stale = []
        for key, (w, t0) in self.running.items():
            left = w - (now - t0)
            if left > 0:
                running += left
            elif now - t0 > 3 * w + 60:  # never observed (lost release): forget it
                stale.append(key)
        for key in stale:
            del self.running[key]
        return (self.waiting_s + running) / slots
