"""One ledger per backend of the slots this process holds there, by every path.

Contract: a :class:`SlotLedger` counts the slots of one backend held in this process,
whichever path granted them: the local queue, a Redis grant, the Redis store's fail-open
local queue, the last-resort gate (:mod:`sjf_core.admission._last_resort`). ``used`` never
exceeds ``slots`` (DESIGN.md invariant 1, on every degraded path too): a path that finds
the ledger full waits, so a request admitted through the gate never adds ``slots`` of its
own on top of requests the normal queue already has in flight.

* :meth:`SlotLedger.try_take` — take a unit now if one is free and nobody waits (the local
  queue's dispatch, on its loop); never blocks.
* ``await`` :meth:`SlotLedger.take` — take a unit, waiting in FIFO order (the gate, a
  Redis grant that found the ledger full); cancellation or a timeout leaves the line and
  never leaks a unit handed over meanwhile.
* :meth:`SlotLedger.give` — hand a unit back: to the first waiter, else to the local
  queues that watch the ledger (woken on their own loops, :meth:`SlotLedger.watch`).

A ledger may have a ``parent`` (:meth:`SlotLedger.stack`): the box-wide cap of a box that
serves several models, above each model runner's ledger (docs/boxes.md). A unit of the child
is then only held together with a unit of the parent: :meth:`try_take` takes both or none,
:meth:`take` waits for the child's then the parent's, :meth:`give` hands both back. So every
path that holds a runner's unit (its queue, the gate, a Redis grant) also holds the box's,
and the box never runs more than its cap.

Thread-safe: a lock guards the counts for a compare-and-set only, never while calling
out; waiters on another loop are woken with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any

__all__ = ["SlotLedger", "attach_ledger"]


class _Waiter:
    __slots__ = ("loop", "fut", "handed", "gone")

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.fut: asyncio.Future = loop.create_future()
        self.handed = False  # a unit was handed to it (it owns one from then on)
        self.gone = False  # it left the line before it got one


class SlotLedger:
    """Slots of one backend held in this process (see the module contract).

    Args:
        key: the backend's queue key (for logs and status only).
        slots: the bound (>= 1).
    """

    def __init__(self, key: str, slots: int):
        self.key = key
        self.slots = max(1, int(slots))
        self.used = 0
        self._lock = threading.Lock()
        self._line: collections.deque[_Waiter] = collections.deque()
        self._watchers: list[Any] = []
        self.parent: SlotLedger | None = None  # the box-wide cap above this runner's, or None

    def stack(self, parent: "SlotLedger") -> None:
        """Hold a unit of ``parent`` with each unit of this ledger (module docstring); the
        parent wakes this ledger's watchers when it frees a unit."""
        self.parent = parent
        for q in list(self._watchers):
            parent.watch(q)

    @property
    def waiting(self) -> int:
        """Callers waiting in line for a unit now."""
        return sum(1 for w in list(self._line) if not w.gone)

    def try_take(self) -> bool:
        """Take a unit if one is free and nobody waits in line (and the parent's, if any);
        True if taken."""
        with self._lock:
            if not (self.used < self.slots and not self._line):
                return False
            self.used += 1
        if self.parent is not None and not self.parent.try_take():
            with self._lock:
                self.used -= 1
            return False
        return True

    async def take(self, timeout: float | None = None) -> None:
        """Take a unit, waiting in FIFO order.

        Raises:
            asyncio.TimeoutError: ``timeout`` seconds passed (nothing is held).
            asyncio.CancelledError: the caller was cancelled (nothing is held).
        """
        await self._take_own(timeout)
        if self.parent is not None:
            try:
                await self.parent.take(timeout)
            except BaseException:
                self._give_own()
                raise

    async def _take_own(self, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.used < self.slots and not self._line:
                self.used += 1
                return
            w = _Waiter(loop)
            self._line.append(w)
        try:
            if timeout is None:
                await asyncio.shield(w.fut)
            else:
                await asyncio.wait_for(asyncio.shield(w.fut), timeout)
        except BaseException:
            with self._lock:
                owned = w.handed
                w.gone = True
            if owned:  # a unit reached us as we left: pass it on
                self._give_own()
            raise

    def give(self, source: Any = None) -> None:
        """Hand one unit back: to the first waiter in line, else free it and wake the
        watching queues (but ``source``, which dispatches by itself); the parent's unit
        held with it goes back to the parent."""
        self._give_own(source)
        if self.parent is not None:
            self.parent.give(source)

    def _give_own(self, source: Any = None) -> None:
        with self._lock:
            w = None
            while self._line:
                cand = self._line.popleft()
                if not cand.gone:
                    cand.handed = True
                    w = cand
                    break
            if w is None:
                self.used = max(0, self.used - 1)
            watchers = list(self._watchers) if w is None else ()
        if w is not None:
            _call_in(w.loop, _resolve, w)
        for q in watchers:
            if q is not source:
                _wake(q)

    def resize(self, slots: int) -> None:
        """Set the bound (e.g. ``slots: auto`` resolved); new room serves the line first."""
        with self._lock:
            self.slots = max(1, int(slots))
        while True:
            with self._lock:
                w = None
                if self.used < self.slots:
                    while self._line and w is None:
                        cand = self._line.popleft()
                        if not cand.gone:
                            w = cand
                if w is None:
                    watchers = list(self._watchers) if self.used < self.slots else []
                    break
                w.handed = True
                self.used += 1
            _call_in(w.loop, _resolve, w)
        for q in watchers:
            _wake(q)

    def watch(self, queue: Any) -> None:
        """Wake ``queue`` (a local queue) when a unit is freed and nobody waits in line
        (here or, stacked, in the parent)."""
        with self._lock:
            if queue not in self._watchers:
                self._watchers.append(queue)
        if self.parent is not None:
            self.parent.watch(queue)

    def status(self) -> dict:
        """``{"slots", "held", "waiting"}`` (numbers only)."""
        return {"slots": self.slots, "held": self.used, "waiting": self.waiting}


def _resolve(w: _Waiter) -> None:
    if not w.fut.done():
        w.fut.set_result(True)


def _call_in(loop: asyncio.AbstractEventLoop, fn, *args) -> None:
    """Run ``fn(*args)`` on ``loop``: now if it is the running one, else soon."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        fn(*args)
    elif not loop.is_closed():
        loop.call_soon_threadsafe(fn, *args)


def _wake(queue: Any) -> None:
    """Let a local queue dispatch on its own loop (a unit was freed by another path)."""
    loop = queue.loop
    if loop is None or loop.is_closed():
        return
    try:
        loop.call_soon_threadsafe(queue.wake)
    except RuntimeError:  # the loop closed meanwhile: nothing waits there any more
        pass


def attach_ledger(queue: Any, ledger: SlotLedger) -> None:
    """Bind a queue (a local queue, or the Redis store and its fail-open local queue) to
    ``ledger``: it then dispatches only while the ledger has room."""
    queue.ledger = ledger
    local = getattr(queue, "local", None)
    for q in (queue, local):
        if q is not None and hasattr(q, "wake"):
            q.ledger = ledger
            ledger.watch(q)
