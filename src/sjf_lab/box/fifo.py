"""``FifoSlots``: ``slots`` permits handed out strictly in arrival order (the emulator's serial
queue, and each model runner's queue in a box).

Contract: :meth:`FifoSlots.try_acquire` takes a free permit at once (None) when no one waits,
else returns a future that a later :meth:`~FifoSlots.release` resolves, first come first
served. :meth:`~FifoSlots.withdraw` gives a waiter's place up (and hands a permit granted
meanwhile on), so a permit is never lost. One event loop; no locks.
"""

from __future__ import annotations

import asyncio
import collections


class FifoSlots:
    """``slots`` permits handed out strictly in arrival order."""

    def __init__(self, slots: int):
        self.slots = int(slots)
        self.free = self.slots
        self._waiters: collections.deque[asyncio.Future] = collections.deque()

    @property
    def waiting(self) -> int:
        """Waiters not yet granted."""
        return sum(1 for f in self._waiters if not f.done())

    def try_acquire(self) -> asyncio.Future | None:
        """None: a permit was taken at once; else a future resolved when one is granted."""
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return None
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    def withdraw(self, fut: asyncio.Future) -> None:
        """Give up a waiter's place; a permit granted to it meanwhile is handed on."""
        if fut.done():
            if not fut.cancelled():
                self.release()
            return
        fut.cancel()
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass

    def release(self) -> None:
        """Hand a permit to the oldest waiter, or put it back."""
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(True)
                return
        self.free += 1


__all__ = ["FifoSlots"]
