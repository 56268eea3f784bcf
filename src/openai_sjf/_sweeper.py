"""Finding abandoned response streams while requests wait for their slots.

Contract: :func:`ensure_sweeper` (called for a request about to wait on ``queue``) keeps one
:func:`sweep_while_waiting` task per queue on the running loop while ``queue.waiting > 0``.
That task runs ``gc.collect()`` (at most once per :data:`SWEEP_S` s per process) only when a
registered stream holding a slot of ``queue`` has not been read for :data:`IDLE_S` s, so that
an SDK stream left in reference cycles is collected and its finalizer releases the slot. A
stream being read is never touched. Never raises into the caller.

Streams register with :func:`track` and leave with :func:`untrack`; a registered stream
answers ``is_idle(queue, now) -> bool``. Why this exists: docs/openai_sjf.md ("Streaming").
"""

from __future__ import annotations

import asyncio
import gc
import math
import weakref

__all__ = ["IDLE_S", "SWEEP_S", "track", "untrack", "idle_streams", "ensure_sweeper", "sweep_while_waiting"]

#: A stream not read for this many seconds may be abandoned (see :func:`sweep_while_waiting`).
IDLE_S = 0.5
#: Least seconds between two garbage collections asked for by waiters (process-wide).
SWEEP_S = 1.0
#: Streams holding a slot and not finished yet (weak: an abandoned one must still be collectable).
_OPEN: "weakref.WeakSet" = weakref.WeakSet()
_last_sweep = -math.inf
#: One sweeper task per queue while it has waiters (weak keys: queues may go away).
_SWEEPERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def track(stream) -> None:
    """Register a stream that holds a slot (it must have ``is_idle(queue, now)``)."""
    _OPEN.add(stream)


def untrack(stream) -> None:
    """The stream no longer holds a slot."""
    _OPEN.discard(stream)


def idle_streams(queue, now: float) -> bool:
    """True if a stream holding a slot of ``queue`` has not been read for ``IDLE_S`` s."""
    for st in list(_OPEN):
        if st.is_idle(queue, now):
            return True
    return False


def _collect(now: float) -> None:
    global _last_sweep
    if now - _last_sweep < SWEEP_S:
        return
    _last_sweep = now
    gc.collect()  # finds abandoned SDK streams in reference cycles; their finalizers release on the loop


def ensure_sweeper(queue) -> None:
    """Called for a request that is about to wait for a slot of ``queue``: make sure one
    :func:`sweep_while_waiting` task runs for it (on the running loop)."""
    t = _SWEEPERS.get(queue)
    if t is None or t.done():
        try:
            _SWEEPERS[queue] = asyncio.get_running_loop().create_task(sweep_while_waiting(queue))
        except TypeError:  # a queue object that cannot be weakly referenced: no sweeper
            pass


async def sweep_while_waiting(queue) -> None:
    """While ``queue`` has waiters: if a slot holder is a stream nobody has read for
    ``IDLE_S`` s, ask the garbage collector to run (at most once per ``SWEEP_S`` s per
    process), so that an abandoned stream is found and its finalizers release the slot.
    A stream being read is never touched."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(0)  # the waiter that started us enqueues first
    while getattr(queue, "waiting", 0) > 0:
        now = loop.time()
        if idle_streams(queue, now):
            _collect(now)
        await asyncio.sleep(SWEEP_S / 2)
