"""One shortest-first queue in front of several serial backends: the pool (in-process).

Contract:

* :class:`PoolQueue` orders the waiters of a set of backends with the policy's own pending
  structure (priority bands, deadlines, tenants' fair shares, the starvation guard: as one
  backend's queue does); its capacity is the sum of its members' free slots.
* ``ticket = await pool.admit(prediction, meta, arrival, make_ticket)`` waits in the pool;
  when a member has a free slot the head goes **to that member**
  (:class:`~sjf_core.policy._placement.Placement` picks which: where it finishes first), and the waiter then takes a
  ticket on that member's own admission queue (``make_ticket(backend_key)``), returned
  *running*. Every release path is that queue's (exactly-once release, leases, probes), and
  that queue is the backend's one slot ledger: a slot taken meanwhile by a request outside
  the pool makes the waiter queue there, never exceed ``slots``.
* ``admit`` raises ``asyncio.CancelledError`` / ``asyncio.TimeoutError`` (the waiter left
  the pool, nothing held), and whatever ``make_ticket`` or the member ticket's ``acquire``
  raise (the member queue's refusals); after any raise the caller owns nothing.
* Work-conserving (DESIGN.md invariant 3) across the members: an arrival, a release on any
  member, a member coming back and a reservation's re-check dispatch at once, no polling. The
  one deliberate wait is the rule's: a request may wait for a busy member only when that one
  finishes it earlier by a clear margin (docs/boxes.md, "Placement").

Runs on one event loop (the proxy's); members' queues notify it through
:class:`~sjf_core.admission._pool_members.MemberWatch`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from sjf_core._faults import note_fault
from sjf_core.policy._fair_share import pending_of
from sjf_core.policy._placement import Placement

log = logging.getLogger("sjf_core.admission.pool")


@dataclass
class PoolStats:
    """Counters of one pool (monotonic except ``max_waiting``)."""

    enqueued: int = 0
    dispatched: int = 0
    reserved: int = 0  # requests that waited for a busy member that finishes them earlier
    cancelled: int = 0
    max_waiting: int = 0


class PoolQueue:
    """The pool of ``members`` (module docstring).

    Args:
        name: the pool's name for logs and status (its backends, joined).
        members: :class:`~sjf_core.admission._pool_members.LiveMember` objects (shared).
        policy: a :class:`~sjf_core.policy._policies.Policy` (the scheduler's).
        fairness: a :class:`~sjf_core.settings._tenants.Fairness`, or None.
        clock: monotonic seconds.
    """

    store = "local"

    def __init__(self, name: str, members: list, policy: Any, fairness: Any = None,
                 clock: Callable[[], float] = time.monotonic):
        self.name = name
        self.members = list(members)
        self.policy = policy
        self.clock = clock
        self.pending = pending_of(policy, fairness)
        if hasattr(self.pending, "slots"):
            self.pending.slots = sum(m.slots for m in self.members)
        self.rule = Placement(self.members)
        self.stats = PoolStats()
        self._seq = itertools.count()
        self._futures: dict = {}  # waiting entry -> its future (resolved with a member)
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        for m in self.members:
            m.pools.append(self)

    # ---- introspection --------------------------------------------------------------------
    @property
    def waiting(self) -> int:
        """Requests waiting in the pool (queued or reserved for a member)."""
        return len(self.pending) + len(self.rule.waiting)

    @property
    def slots(self) -> int:
        """The pool's capacity: its healthy members' slots."""
        return sum(m.slots for m in self.members if m.healthy)

    @property
    def in_flight(self) -> int:
        """Requests running on the pool's members (pool or not)."""
        return sum(m.queue.in_flight for m in self.members)

    def status(self) -> dict:
        """Numbers only: members, waiting, counters."""
        return {"name": self.name, "waiting": self.waiting, "reserved": len(self.rule.waiting), "slots": self.slots,
                "in_flight": self.in_flight, "members": [m.status() for m in self.members],
                "stats": dict(self.stats.__dict__)}

    async def view(self, limit: int = 100) -> dict:
        """Who waits in the pool, in dispatch order, and who is reserved for a member
        (:func:`sjf_core.admission._view.pool_view`; no prompt text). Changes nothing."""
        from sjf_core.admission._view import pool_view

        return pool_view(self, limit=limit)

    # ---- admission ------------------------------------------------------------------------
    async def admit(self, prediction: Any, meta: Any, arrival: float | None,
                    make_ticket: Callable[[str], Any], timeout: float | None = None):
        """Wait in the pool, then hold a slot of the member it hands over (module docstring)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        for m in self.members:
            if getattr(m, "ledger_wake", None) is not None:
                m.ledger_wake.loop = loop
        entry = self.policy.make_entry(next(self._seq), self.clock() if arrival is None else float(arrival),
                                       prediction, meta)
        fut = loop.create_future()
        self._futures[entry] = fut
        self.pending.push(entry)
        self.stats.enqueued += 1
        self.stats.max_waiting = max(self.stats.max_waiting, self.waiting)
        self.dispatch()
        try:
            member = await (asyncio.wait_for(asyncio.shield(fut), timeout) if timeout is not None else fut)
        except BaseException:
            self._leave(entry, fut)
            raise
        return await self._take(entry, member, make_ticket)

    async def _take(self, entry, member, make_ticket: Callable[[str], Any]):
        """The member's own ticket for the waiter the pool handed ``member``."""
        try:
            ticket = make_ticket(member.key)
            await ticket.acquire()
        finally:
            member.handoffs -= 1
            self.dispatch()  # a handoff that did not turn into a running ticket frees the slot again
        watch = getattr(member, "watch", None)
        if watch is not None:
            watch.linked[ticket.entry] = (self, entry)
        return ticket

    def _leave(self, entry, fut: asyncio.Future) -> None:
        """The waiter went away: out of the queue, or hand back a member it was given."""
        self._futures.pop(entry, None)
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            fut.result().handoffs -= 1
            self.dispatch()
            return
        fut.cancel()
        if self.pending.remove(entry) or self.rule.cancel(entry):
            self.stats.cancelled += 1

    def observe(self, entry, service_s: float, true_class, answer_tokens) -> None:
        """A request the pool handed over completed: feed τ and the service statistics."""
        try:
            self.pending.observe(entry, service_s, true_class, answer_tokens)
        except Exception:
            note_fault(log, "pool policy observe failed; its statistics miss one request")

    # ---- dispatch -------------------------------------------------------------------------
    def dispatch(self) -> None:
        """Hand free member slots to the head of the queue (work-conserving). Never raises."""
        try:
            self._dispatch(self.clock())
        except Exception:  # a fault here must not stall the pool: the next event retries
            note_fault(log, "pool dispatch failed; the next release or arrival dispatches again", level=logging.ERROR)

    def _dispatch(self, now: float) -> None:
        while (go := self.rule.ready(now)) is not None:
            self._hand(*go, now)
        pending = self.pending
        while len(pending) and self.rule.any_free(now):
            entry = pending.pop(now)
            if entry is None:
                break
            fut = self._futures.get(entry)
            if fut is None or fut.done():
                continue
            member = self.rule.place(entry, now)
            if member is None:
                self.stats.reserved += 1
                continue
            self._hand(entry, member, now)
        self._arm_timer(now)

    def _hand(self, entry, member, now: float) -> None:
        fut = self._futures.pop(entry, None)
        if fut is None or fut.done():
            return
        member.handoffs += 1
        entry.dispatched_at = now
        self.stats.dispatched += 1
        fut.set_result(member)

    def _arm_timer(self, now: float) -> None:
        """Wake at the next reservation's expiry (the rule's one time-driven step)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due = self.rule.next_expiry(now)
        if due is not None and self._loop is not None and not self._loop.is_closed():
            self._timer = self._loop.call_later(max(0.0, due - now), self.dispatch)
