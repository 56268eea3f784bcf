"""One ticket lifecycle, for every store: states, transitions, exactly-once release, loop hop.

:class:`TicketState` (a ``str`` enum: a state compares equal to its name, e.g.
``TicketState.RUNNING == "running"``) is the lifecycle of one request's admission::

    NEW ─▶ QUEUED ─▶ RUNNING ─▶ RELEASED            enqueue, grant, release | expire
     │       ╰──▶ CANCELLED | SUPERSEDED           cancel, supersede
     ├──▶ DEFERRED ─▶ QUEUED | REJECTED | CANCELLED    defer (local overload control)
     ╰──▶ REJECTED | CANCELLED                     reject, cancel

:class:`Ticket` is the one implementation and the only writer of its ``state``: each
transition is a method that checks it is legal (an illegal one raises ``RuntimeError``;
release and expiry are the idempotent exceptions) and emits the queue event that goes with
it (:class:`~sjf_core.admission._events.QueueEvents`): :meth:`Ticket.enqueue` (on_enqueue),
:meth:`Ticket.defer`, :meth:`Ticket.grant` (on_dispatch), :meth:`Ticket.release` and
:meth:`Ticket.expire` (on_complete), :meth:`Ticket.cancel` and :meth:`Ticket.supersede`
(on_cancel), :meth:`Ticket.reject` (on_reject). Its store
(:class:`~sjf_core.admission._base.AdmissionQueue`) decides *when* (grants and frees slots,
keeps its counters) and calls them. Adapters ask :attr:`Ticket.running` (holds a slot:
release it exactly once), :attr:`Ticket.waiting` (not yet granted nor refused) and
:attr:`Ticket.finished` (terminal: nothing to release), never state strings.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
from typing import TYPE_CHECKING, Any, Coroutine, Protocol

if TYPE_CHECKING:
    from sjf_core.policy._entry import Entry

log = logging.getLogger("sjf_core.admission")


class TicketState(enum.StrEnum):
    """One admission's state (see the module docstring for the transitions)."""

    NEW = "new"
    QUEUED = "queued"
    DEFERRED = "deferred"
    RUNNING = "running"
    RELEASED = "released"
    CANCELLED = "cancelled"
    SUPERSEDED = "superseded"
    REJECTED = "rejected"


NEW, QUEUED, DEFERRED, RUNNING = TicketState.NEW, TicketState.QUEUED, TicketState.DEFERRED, TicketState.RUNNING
RELEASED = TicketState.RELEASED
#: States of a ticket that waits: not yet granted a slot nor refused.
WAITING_STATES = frozenset({NEW, QUEUED, DEFERRED})
#: Guards the RUNNING → RELEASED step of every ticket (exactly-once release from any thread);
#: held for a compare-and-set only, never while calling out.
_STATE_LOCK = threading.Lock()
_get_running_loop = asyncio._get_running_loop
#: Terminal states: the ticket holds nothing and never will.
FINISHED_STATES = frozenset({RELEASED, TicketState.CANCELLED, TicketState.SUPERSEDED, TicketState.REJECTED})


class GrantPath(Protocol):
    """How a store's waiters wait for a slot: a future per waiter locally
    (:class:`~sjf_core.admission._future_grant.FutureGrants`), a ``BLPOP`` in Redis
    (:class:`~sjf_core.admission._redis_grant.RedisGrants`). The ticket calls it."""

    async def wait(self, t: "Ticket", timeout: float | None) -> None:
        """Set ``t.loop``, take ``t`` through the door (:meth:`Ticket.enqueue
        <sjf_core.admission._ticket.Ticket.enqueue>`, or defer / reject), then wait until it
        holds a slot (:meth:`~sjf_core.admission._ticket.Ticket.grant`); on any raise, leave
        it owning nothing. A ticket already used raises ``RuntimeError``."""

    def withdraw(self, t: "Ticket") -> None:
        """``t`` is waiting and its owner released it: make its ``acquire`` leave."""

    def renew(self, t: "Ticket") -> None:
        """Restart ``t``'s hold limit."""

    async def settled(self, t: "Ticket") -> None:
        """Wait until the store has processed ``t``'s release."""


class TicketStore(Protocol):
    """What a ticket asks of the store that made it (every
    :class:`~sjf_core.admission._base.AdmissionQueue` is one; named here so that the contract
    module imports the ticket and not the reverse). Only :class:`Ticket` calls these."""

    name: str
    grants: GrantPath

    def _free(self, t: "Ticket", answer_tokens: int | None, expired: bool) -> float: ...

    def _refill(self) -> None: ...

    def _emit(self, name: str, *args: Any) -> None: ...


class Ticket:
    """One request's admission on an :class:`~sjf_core.admission._base.AdmissionQueue`:
    an async context manager holding a slot.

    Attributes:
        queue: the store that made it. entry: its :class:`~sjf_core.policy._entry.Entry`
        (``entry.payload`` is this ticket). state: a :class:`TicketState` (read-only outside
        this class: the transition methods below write it).
        mode: the Redis store's "redis" (granted by Redis) or "local" (fail-open);
        None on the local store. redis: the Redis store's per-ticket record
        (:class:`~sjf_core.admission._redis_grant.RedisGrant`), else None.
        loop: the event loop that owns the ticket (None until ``acquire`` runs).

    Example::

        async with queue.ticket(prediction):
            await call_backend()
    """

    # _fut, _lease, _scorer belong to the in-process stores (local queue: a future grants the slot; gate: _lease)
    __slots__ = ("queue", "entry", "state", "mode", "redis", "loop", "_fut", "_lease", "_scorer", "__weakref__")

    def __init__(self, queue: TicketStore, entry: "Entry"):
        self.queue = queue
        self.entry = entry
        entry.payload = self
        self.state = NEW
        self.mode: str | None = None
        self.redis = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the owning loop, set by the store's grant
        self._fut: asyncio.Future | None = None
        self._lease: asyncio.TimerHandle | None = None
        self._scorer = None  # see LocalAdmissionQueue.ticket(scorer=)

    # ---- what adapters ask --------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True while the ticket holds a slot (it must be released exactly once)."""
        return self.state is RUNNING

    @property
    def waiting(self) -> bool:
        """True while the ticket is new, queued or deferred (neither granted nor refused)."""
        return self.state in WAITING_STATES

    @property
    def finished(self) -> bool:
        """True once the ticket is released, cancelled, superseded or rejected."""
        return self.state in FINISHED_STATES

    @property
    def view_id(self) -> Any:
        """This request's ``id`` in its queue's :meth:`~AdmissionQueue.view` rows: the
        waiter id Redis gave it (Redis store), else its entry's sequence number."""
        rid = getattr(self.redis, "rid", None) if self.redis is not None else None
        return rid if rid is not None else self.entry.seq

    @property
    def wait_s(self) -> float:
        """Seconds spent queued (NaN until dispatched)."""
        return self.entry.dispatched_at - self.entry.arrival

    # ---- lifecycle: what the owner calls ---------------------------------------------------
    def acquire(self, timeout: float | None = None) -> Coroutine[Any, Any, None]:
        """Wait for a slot (``await ticket.acquire(timeout)``; the store's wait itself, one
        coroutine per waiter).

        Args:
            timeout: seconds to wait at most, or None.

        Raises:
            asyncio.TimeoutError: the timeout expired while queued, deferred or
                rate-limited (the ticket left the queue; a granted slot is released).
            asyncio.CancelledError: the caller was cancelled while waiting (same).
            sjf_core._errors.AdmissionRejected: refused at the door (overload control,
                or the Redis store failing closed); ``release`` is then a no-op.
            sjf_core._errors.Superseded: a newer request with the same supersede key
                replaced it while it was queued (``release`` is then a no-op).
            RuntimeError: the ticket was already used (raised when awaited).
        """
        return self.queue.grants.wait(self, timeout)

    def release(self, answer_tokens: int | None = None) -> bool:
        """Give the slot back: RUNNING → RELEASED, then on_complete (idempotent, thread-safe,
        never raises).

        Args:
            answer_tokens: the true answer length when known (from ``usage``), which
                feeds the τ estimate with the true class.

        Returns:
            True if this call released a held slot; False if it was already released,
            or if the ticket was still waiting (it is then withdrawn from the queue).
        """
        with _STATE_LOCK:
            state = self.state
            if state is RUNNING:
                self.state = RELEASED
        if state is RUNNING:
            self.in_loop(self._released, answer_tokens, False)
            return True
        if state is QUEUED or state is DEFERRED:
            self.queue.grants.withdraw(self)
        return False

    async def arelease(self, answer_tokens: int | None = None) -> bool:
        """:meth:`release`, then wait until the store has processed it (or failed)."""
        done = self.release(answer_tokens)
        await self.queue.grants.settled(self)
        return done

    def renew(self) -> None:
        """Restart the hold limit ``lease_ttl_s`` (call during long streams)."""
        if self.state is RUNNING:
            self.queue.grants.renew(self)

    # ---- transitions: what the store calls (on the ticket's loop) --------------------------
    def enqueue(self) -> None:
        """NEW or DEFERRED → QUEUED: the ticket entered its queue; emits on_enqueue."""
        state = self.state
        if state is not NEW and state is not DEFERRED:
            raise RuntimeError(f"ticket already {state}")
        self.state = QUEUED
        self.queue._emit("on_enqueue", self.entry)

    def defer(self) -> None:
        """NEW → DEFERRED: overload control holds the ticket at the door (no event)."""
        self._step((NEW,), DEFERRED)

    def grant(self, wait_s: float) -> None:
        """QUEUED → RUNNING: the ticket holds a slot after ``wait_s`` seconds; emits on_dispatch."""
        if self.state is not QUEUED:
            raise RuntimeError(f"ticket already {self.state}")
        self.state = RUNNING
        self.queue._emit("on_dispatch", self.entry, wait_s)

    def expire(self) -> bool:
        """RUNNING → RELEASED by force: the hold limit ran out (once; the owner's release then
        returns False); emits on_complete. Returns True if this call released the slot."""
        with _STATE_LOCK:
            if self.state is not RUNNING:
                return False
            self.state = RELEASED
        log.warning("admission lease expired on backend %s; slot force-released", self.queue.name)
        self._released(None, True)
        return True

    def cancel(self, event: bool = True) -> None:
        """NEW, QUEUED or DEFERRED → CANCELLED: the waiter went away; emits on_cancel unless
        ``event`` is False (the store had nothing queued to take back)."""
        self._step(WAITING_STATES, TicketState.CANCELLED)
        if event:
            self.queue._emit("on_cancel", self.entry)

    def supersede(self) -> None:
        """QUEUED or DEFERRED → SUPERSEDED: a newer request with the same key replaced it;
        emits on_cancel."""
        self._step((QUEUED, DEFERRED), TicketState.SUPERSEDED)
        self.queue._emit("on_cancel", self.entry)

    def reject(self, reason: str) -> None:
        """NEW or DEFERRED → REJECTED: refused at the door for ``reason``; emits on_reject."""
        self._step((NEW, DEFERRED), TicketState.REJECTED)
        self.queue._emit("on_reject", self.entry, reason)

    def _step(self, legal, to: TicketState) -> None:
        if self.state not in legal:
            raise RuntimeError(f"ticket {self.state} cannot become {to}")
        self.state = to

    def _released(self, answer_tokens: int | None, expired: bool) -> None:
        """After RUNNING → RELEASED (on the owning loop): the store frees the slot, the
        listeners hear on_complete, then the store grants the next waiter."""
        q = self.queue
        service_s = q._free(self, answer_tokens, expired)
        q._emit("on_complete", self.entry, service_s, answer_tokens)
        q._refill()

    def in_loop(self, fn, *args) -> None:
        """Run ``fn(*args)`` on the loop that owns this ticket (now, if that is this one)."""
        loop = self.loop
        running = _get_running_loop()  # None outside a loop (asyncio's C accessor, no raise)
        if loop is None or running is loop or loop.is_closed():
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    async def __aenter__(self) -> "Ticket":
        await self.acquire()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.arelease()
