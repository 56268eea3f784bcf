"""The in-process admission queue (asyncio): slots, tickets, work-conserving dispatch.

One :class:`AdmissionQueue` per serial backend. A caller takes a :class:`Ticket`,
awaits :meth:`Ticket.acquire` (or uses it as ``async with``), runs its request, and
releases. Guarantees (DESIGN.md invariants):

1. never more than ``slots`` tickets running;
2. each granted ticket is released exactly once (``release`` is idempotent, and a
   lease time-to-live force-releases a ticket whose owner vanished);
3. work-conserving: a release or an arrival dispatches at once, no polling;
4. τ promotion (see :mod:`sjf_core.pending`);
7. a waiter cancelled or timed out while queued leaves the queue at once.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from .entry import Entry, class_of_tokens
from .policies import Policy, RequestMeta, make_policy
from .prediction import Prediction

log = logging.getLogger("sjf_core.admission")


@dataclass
class QueueStats:
    """Counters of one admission queue (monotonic except gauges)."""

    enqueued: int = 0
    dispatched: int = 0
    released: int = 0
    cancelled: int = 0
    promoted: int = 0
    expired: int = 0
    fallback: int = 0
    max_in_flight: int = 0


class QueueEvents:
    """Listener interface for queue events; override what you need (metrics, plugins)."""

    def on_enqueue(self, queue: "AdmissionQueue", entry: Entry) -> None: ...

    def on_dispatch(self, queue: "AdmissionQueue", entry: Entry, wait_s: float) -> None: ...

    def on_complete(self, queue: "AdmissionQueue", entry: Entry, service_s: float, answer_tokens: int | None) -> None: ...

    def on_cancel(self, queue: "AdmissionQueue", entry: Entry) -> None: ...


class AdmissionQueue:
    """Admission queue of one backend.

    Args:
        slots: maximum concurrent admissions (>= 1). A serial backend has 1.
        policy: a :class:`~sjf_core.policies.Policy` or its name (default "sjf").
        name: the backend key, for logs and metrics (never prompt text).
        lease_ttl_s: if set, a running ticket not released or renewed within this
            many seconds is force-released (safety net for lost release hooks).
        clock: monotonic clock in seconds.
        listeners: :class:`QueueEvents` objects notified of queue events.

    Raises:
        ValueError: ``slots`` < 1 or an unknown policy.
    """

    def __init__(
        self,
        slots: int = 1,
        policy: Policy | str = "sjf",
        name: str = "default",
        lease_ttl_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        listeners: list[QueueEvents] | None = None,
    ):
        if int(slots) < 1:
            raise ValueError(f"slots must be >= 1, got {slots!r}")
        self.slots = int(slots)
        self.policy = make_policy(policy)
        self.name = name
        self.lease_ttl_s = lease_ttl_s
        self.clock = clock
        self.listeners: list[QueueEvents] = list(listeners or [])
        self.pending = self.policy.new_pending()
        self.stats = QueueStats()
        self._in_flight = 0
        self._seq = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: set[Ticket] = set()

    # ---- introspection -------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        """Tickets holding a slot now."""
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Tickets queued for a slot now."""
        return len(self.pending)

    @property
    def tau_s(self) -> float:
        """Current τ of this queue in seconds (inf when off)."""
        return self.pending.tau.tau_s

    # ---- tickets ------------------------------------------------------------------
    def ticket(
        self,
        prediction: Prediction | None = None,
        meta: RequestMeta | None = None,
        arrival: float | None = None,
    ) -> "Ticket":
        """Make a ticket for one request (it waits only once acquired).

        Args:
            prediction: the predicted length, or None for an unscored request,
                which is placed at the policy's neutral key (fail-open).
            meta: request metadata (max_tokens, priority, deadline).
            arrival: original arrival on this queue's clock (seconds), e.g. for an
                SDK retry; default now.
        """
        meta = meta or RequestMeta()
        now = self.clock()
        entry = Entry(seq=next(self._seq), arrival=now if arrival is None else float(arrival))
        entry.priority = int(meta.priority or 0)
        if meta.deadline_s is not None:
            entry.deadline = entry.arrival + float(meta.deadline_s)
        try:
            if prediction is None:
                raise ValueError("no prediction")
            key = float(self.policy.key(prediction, meta))
            if math.isnan(key):
                raise ValueError("NaN key")
            entry.key = key
            entry.klass = prediction.klass
            entry.expected_tokens = float(prediction.expected_tokens)
        except Exception:
            entry.key = self.policy.fallback_key()
            entry.fallback = True
        return Ticket(self, entry)

    # ---- internals ------------------------------------------------------------------
    def _bind_loop(self) -> None:
        loop = asyncio.get_running_loop()
        # Rebind when idle: tests and CLIs may run several event loops in turn.
        if self._loop is None or self._loop.is_closed() or (self._in_flight == 0 and len(self.pending) == 0):
            self._loop = loop

    def _emit(self, name: str, *args) -> None:
        for listener in self.listeners:
            try:
                getattr(listener, name)(self, *args)
            except Exception:  # a listener must never break admission
                log.exception("queue listener %s.%s failed", type(listener).__name__, name)

    def _enqueue(self, t: "Ticket") -> None:
        self.stats.enqueued += 1
        if t.entry.fallback:
            self.stats.fallback += 1
        self.pending.push(t.entry)
        self._emit("on_enqueue", t.entry)
        self._dispatch()

    def _dispatch(self) -> None:
        """Grant free slots to waiters (work-conserving, invariant 3)."""
        while self._in_flight < self.slots and len(self.pending):
            now = self.clock()
            entry = self.pending.pop(now)
            if entry is None:
                break
            t: Ticket = entry.payload
            if t._fut is None or t._fut.done():  # cancelled while being popped
                continue
            self._in_flight += 1
            self.stats.dispatched += 1
            if entry.promoted:
                self.stats.promoted += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self._in_flight)
            entry.dispatched_at = now
            t.state = "running"
            self._running.add(t)
            t._arm_lease()
            t._fut.set_result(True)
            self._emit("on_dispatch", entry, now - entry.arrival)

    def _finish(self, t: "Ticket", answer_tokens: int | None, expired: bool = False) -> None:
        self._in_flight -= 1
        self._running.discard(t)
        self.stats.released += 1
        if expired:
            self.stats.expired += 1
        service_s = self.clock() - t.entry.dispatched_at
        true_class = class_of_tokens(answer_tokens) if answer_tokens is not None and answer_tokens >= 0 else None
        try:
            self.pending.observe(t.entry, service_s, true_class)
        except Exception:
            log.exception("policy observe failed")
        self._emit("on_complete", t.entry, service_s, answer_tokens)
        self._dispatch()

    def _call_in_loop(self, fn, *args) -> None:
        """Run ``fn`` on the queue's loop; release may come from another thread."""
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop or loop.is_closed():
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)


class Ticket:
    """One request's admission: an async context manager holding a slot.

    States: "new" → "queued" → "running" → "released"; or "queued" → "cancelled".

    Example::

        async with queue.ticket(prediction):
            await call_backend()
    """

    __slots__ = ("queue", "entry", "state", "_fut", "_lease", "_lock", "__weakref__")

    def __init__(self, queue: AdmissionQueue, entry: Entry):
        self.queue = queue
        self.entry = entry
        entry.payload = self
        self.state = "new"
        self._fut: asyncio.Future | None = None
        self._lease: asyncio.TimerHandle | None = None
        self._lock = threading.Lock()

    @property
    def wait_s(self) -> float:
        """Seconds spent queued (NaN until dispatched)."""
        return self.entry.dispatched_at - self.entry.arrival

    async def acquire(self, timeout: float | None = None) -> None:
        """Wait for a slot.

        Args:
            timeout: seconds to wait at most, or None.

        Raises:
            asyncio.TimeoutError: the timeout expired while queued (the ticket left the queue).
            asyncio.CancelledError: the caller was cancelled while queued (it left the queue).
            RuntimeError: the ticket was already used.
        """
        if self.state != "new":
            raise RuntimeError(f"ticket already {self.state}")
        q = self.queue
        q._bind_loop()
        self._fut = q._loop.create_future()
        self.state = "queued"
        q._enqueue(self)
        if self._fut.done():
            return
        try:
            if timeout is None:
                await self._fut
            else:
                await asyncio.wait_for(asyncio.shield(self._fut), timeout)
        except BaseException:
            self._abandon()
            raise

    def _abandon(self) -> None:
        """The waiter went away: leave the queue, or hand back a slot granted meanwhile."""
        fut = self._fut
        if fut is not None and fut.done() and not fut.cancelled() and self.state == "running":
            self.release()
            return
        if fut is not None and not fut.done():
            fut.cancel()
        if self.state == "queued":
            self.state = "cancelled"
            if self.queue.pending.remove(self.entry):
                self.queue.stats.cancelled += 1
                self.queue._emit("on_cancel", self.entry)

    def release(self, answer_tokens: int | None = None) -> bool:
        """Give the slot back (idempotent, thread-safe).

        Args:
            answer_tokens: the true answer length when known (from ``usage``), which
                feeds the τ estimate with the true class.

        Returns:
            True if this call released a held slot; False if it was already released,
            or if the ticket was still queued (it is then withdrawn from the queue).
        """
        with self._lock:
            if self.state == "queued":
                self.queue._call_in_loop(self._abandon)
                return False
            if self.state != "running":
                return False
            self.state = "released"
        self._cancel_lease()
        self.queue._call_in_loop(self.queue._finish, self, answer_tokens)
        return True

    def renew(self) -> None:
        """Restart the lease time-to-live (call during long streams)."""
        if self.state == "running":
            self.queue._call_in_loop(self._arm_lease)

    def _arm_lease(self) -> None:
        self._cancel_lease()
        ttl = self.queue.lease_ttl_s
        if ttl and self.state == "running" and self.queue._loop is not None:
            self._lease = self.queue._loop.call_later(ttl, self._expire)

    def _cancel_lease(self) -> None:
        if self._lease is not None:
            self._lease.cancel()
            self._lease = None

    def _expire(self) -> None:
        with self._lock:
            if self.state != "running":
                return
            self.state = "released"
        log.warning("admission lease expired on backend %s; slot force-released", self.queue.name)
        self.queue._finish(self, None, expired=True)

    async def __aenter__(self) -> "Ticket":
        await self.acquire()
        return self

    async def __aexit__(self, *exc) -> None:
        self.release()
