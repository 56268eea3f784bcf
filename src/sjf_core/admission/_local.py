"""The in-process admission store (asyncio): slots, a future per waiter, work-conserving dispatch.

One :class:`LocalAdmissionQueue` per serial backend, implementing the
:class:`~sjf_core.admission._base.AdmissionQueue` contract (``AdmissionQueue(...)`` makes
one). Guarantees (DESIGN.md invariants): 1. never more than ``slots`` tickets running;
2. each granted ticket is released exactly once (:class:`~sjf_core.admission._ticket.Ticket`;
a lease time-to-live force-releases a ticket whose owner vanished); 3. work-conserving: a
release or an arrival dispatches at once, no polling; 4. τ promotion
(:mod:`sjf_core.policy._pending`); 7. a waiter cancelled or timed out while queued leaves
the queue at once. Optional: overload control and supersede at the door
(:mod:`sjf_core.admission._door`) and a maximum dispatch rate
(:mod:`sjf_core.admission._ratelimit`, applied after the slot is granted in policy order).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from typing import Callable

from sjf_core.admission._base import AdmissionQueue
from sjf_core.admission._door import _Door
from sjf_core.admission._events import QueueEvents, QueueStats
from sjf_core.admission._overload import OverloadConfig, OverloadControl
from sjf_core.admission._ratelimit import RateLimit
from sjf_core.admission._ticket import DEFERRED, NEW, QUEUED, RUNNING, Ticket, TicketState
from sjf_core.policy._entry import Entry, class_of_tokens
from sjf_core.policy._policies import Policy, make_policy

log = logging.getLogger("sjf_core.admission._local")
_get_running_loop = asyncio.get_running_loop


class LocalAdmissionQueue(_Door, AdmissionQueue):
    """Admission queue of one backend, in this process.

    Args:
        slots: maximum concurrent admissions (>= 1). A serial backend has 1.
        policy: a :class:`~sjf_core.policy._policies.Policy` or its name (default "sjf").
        name: the backend key, for logs and metrics (never prompt text).
        lease_ttl_s: if set, a running ticket not released or renewed within this
            many seconds is force-released (safety net for lost release hooks).
        clock: monotonic clock in seconds.
        listeners: :class:`QueueEvents` objects notified of queue events.
        overload: overload limits (:class:`~sjf_core.admission._overload.OverloadConfig` or a
            mapping of its fields), or None (no limit).
        rate_limit: maximum dispatch rate (:meth:`~sjf_core.admission._ratelimit.RateLimit.parse`:
            a number per second or "60/min"), or None.
        fairness: a :class:`~sjf_core.policy._tenants.Fairness` (or its spec, e.g. "user"):
            when enabled, waiters are grouped by ``entry.tenant`` and tenants share
            the slots by deficit round robin (:class:`~sjf_core.policy._fair_share.TenantPending`);
            None or "off": one shared order.

    Supersede: a ticket whose entry has a ``supersede`` key removes the queued (or
    deferred) ticket of the same tenant with the same key when it is submitted; that
    one's ``acquire`` raises :class:`~sjf_core._errors.Superseded` at once. A running
    ticket is never touched.

    Raises:
        ValueError: ``slots`` < 1, an unknown policy, bad overload or rate options.
    """

    store = "local"
    #: the backend's in-process :class:`~sjf_core.admission._ledger.SlotLedger`, shared with
    #: every other path to it (the gate, Redis grants); None: this queue's count alone
    ledger = None

    def __init__(
        self,
        slots: int = 1,
        policy: Policy | str = "sjf",
        name: str = "default",
        lease_ttl_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        listeners: list[QueueEvents] | None = None,
        overload: OverloadConfig | dict | None = None,
        rate_limit: RateLimit | float | str | None = None,
        fairness=None,
    ):
        if int(slots) < 1:
            raise ValueError(f"slots must be >= 1, got {slots!r}")
        self.slots = int(slots)
        self.policy = make_policy(policy)
        self.name = name
        self.lease_ttl_s = lease_ttl_s
        self.clock = clock
        self.listeners: list[QueueEvents] = list(listeners or [])
        from sjf_core.policy._tenants import Fairness

        self.fairness = Fairness.parse(fairness if fairness is not None else "off")
        if self.fairness.enabled:
            from sjf_core.policy._fair_share import TenantPending

            self.pending = TenantPending(self._tenant_pending, self.fairness.weight)
        else:
            self.pending = self.policy.new_pending()
        self._supersede: dict[tuple, Ticket] = {}
        if hasattr(self.pending, "slots"):
            self.pending.slots = self.slots  # "fcfs-bound" runs a virtual FCFS schedule on them
        self.stats = QueueStats()
        self._in_flight = 0
        self._seq = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: set[Ticket] = set()
        cfg = OverloadConfig.parse(overload)
        service = getattr(self.pending, "service", None)
        if cfg is not None and cfg.enabled:
            if service is None:
                from sjf_core.policy._service import ServiceStats

                service = ServiceStats(self.pending.tau.config.initial_short_service_s)
            self.overload: OverloadControl | None = OverloadControl(
                cfg, service, self.slots, length_aware=getattr(self.policy, "name", "") != "fcfs")
        else:
            self.overload = None
        self.rate_limit = RateLimit.parse(rate_limit)
        self._throttler = self.rate_limit.throttler() if self.rate_limit is not None else None
        self._deferred: list[Ticket] = []
        self._waking = False

    def _tenant_pending(self, tau, service):
        """One tenant's sub-structure: the policy's own, sharing ``tau`` and ``service``."""
        p = self.policy.new_pending()
        if tau is not None:
            p.tau = tau
        if service is not None:
            p.service = service
        return p

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
    def _scores_at_door(self) -> bool:
        return self.overload is not None or self.rate_limit is not None

    def _new_ticket(self, prediction, meta, arrival, scorer) -> Ticket:
        entry = self.policy.make_entry(next(self._seq), self.clock() if arrival is None else float(arrival),
                                       prediction, meta)
        t = Ticket(self, entry)
        if scorer is not None:
            entry.fallback = False
            entry.scored = False  # not yet: see _score
            t._scorer = scorer
        return t

    def _make_entry(self, prediction, meta, arrival) -> Entry:
        now = self.clock() if arrival is None else float(arrival)
        return self.policy.make_entry(next(self._seq), now, prediction, meta)

    # ---- the contract: grant, withdraw, finish ----------------------------------------
    async def _grant(self, t: Ticket, timeout: float | None) -> None:
        if t.state is not NEW:  # Ticket._start, inlined (hot path)
            raise RuntimeError(f"ticket already {t.state}")
        t.state = QUEUED
        loop = _get_running_loop()
        # Rebind when idle: tests and CLIs may run several event loops in turn.
        if self._loop is not loop and (self._loop is None or self._loop.is_closed()
                                       or (self._in_flight == 0 and len(self.pending) == 0)):
            self._loop = loop
        loop = t.loop = self._loop
        fut = t._fut = loop.create_future()
        throttled = self._throttler is not None
        started = loop.time() if throttled else 0.0
        self._submit(t)
        try:
            if fut.done():
                fut.result()  # raises AdmissionRejected when refused
            elif timeout is None:
                await fut
            else:
                await asyncio.wait_for(asyncio.shield(fut), timeout)
            if throttled and t.state is RUNNING:
                left = None if timeout is None else max(0.0, timeout - (loop.time() - started))
                await asyncio.wait_for(self._throttler.acquire(), left)
                t.entry.dispatched_at = self.clock()  # service is measured from the send
                self._arm_lease(t)
        except BaseException:
            self._abandon(t)
            raise

    def _withdraw(self, t: Ticket) -> None:
        t._in_loop(self._abandon, t)

    def _renew(self, t: Ticket) -> None:
        t._in_loop(self._arm_lease, t)

    def _abandon(self, t: Ticket) -> None:
        """The waiter went away: leave the queue, or hand back a slot granted meanwhile."""
        fut = t._fut
        if fut is not None and fut.done() and not fut.cancelled() and t.state is RUNNING:
            t.release()
            return
        if fut is not None and not fut.done():
            fut.cancel()
        if t.state is DEFERRED:
            self._cancel_deferred(t)
        elif t.state is QUEUED:
            t.state = TicketState.CANCELLED
            if t.entry.supersede is not None:
                self._forget_supersede(t)
            if self.pending.remove(t.entry):
                self.stats.cancelled += 1
                if self.overload is not None:
                    self.overload.left(t.entry)
                self._emit("on_cancel", t.entry)
                self._wake_deferred()

    def _arm_lease(self, t: Ticket) -> None:
        if t._lease is not None:
            t._lease.cancel()
            t._lease = None
        ttl = self.lease_ttl_s
        if ttl and t.state is RUNNING and self._loop is not None:
            t._lease = self._loop.call_later(ttl, t._expire)

    # ---- internals ------------------------------------------------------------------
    def _score(self, t: Ticket) -> None:
        """Score a ticket made with a ``scorer``. A scorer error gives an unscored
        (FCFS-key) entry, as an unscorable body does."""
        scorer, t._scorer = t._scorer, None
        if scorer is None:
            return
        try:
            prediction, meta = scorer()
        except Exception:  # Scheduler's scorer never raises; a custom one might
            log.exception("request scoring failed on backend %s; FCFS order for it", self.name)
            prediction, meta = None, None
        e = t.entry
        fresh = self.policy.make_entry(e.seq, e.arrival, prediction, meta)
        e.key, e.klass, e.expected_tokens, e.fallback = fresh.key, fresh.klass, fresh.expected_tokens, fresh.fallback
        e.priority, e.deadline, e.scored = fresh.priority, fresh.deadline, True
        if t.state is not RUNNING:  # not yet in the queue: who it belongs to may still change
            e.tenant, e.supersede = fresh.tenant, fresh.supersede
        if not math.isnan(e.dispatched_at):  # it was dispatched unscored
            if e.fallback:
                self.stats.fallback += 1
            rescored = getattr(self.pending, "rescored", None)
            if rescored is not None and t.state is RUNNING:
                rescored(e)

    def _enqueue(self, t: Ticket) -> None:
        stats, entry = self.stats, t.entry
        stats.enqueued += 1
        if entry.fallback:
            stats.fallback += 1
        pending = self.pending
        pending.push(entry)
        if self.overload is not None:
            self.overload.enqueued(entry)
        n = len(pending)
        if n > stats.max_waiting:
            stats.max_waiting = n
        self._emit("on_enqueue", entry)
        if self._in_flight < self.slots or self._deferred:
            self._dispatch()

    def _dispatch(self) -> None:
        """Grant free slots to waiters (work-conserving, invariant 3)."""
        pending, stats, ledger = self.pending, self.stats, self.ledger
        reserved = False  # a unit of the ledger taken for the next grant
        while self._in_flight < self.slots and len(pending):
            if ledger is not None and not reserved:
                if not ledger.try_take():  # another path (gate, Redis grant) holds the room
                    break
                reserved = True
            now = self.clock()
            entry = pending.pop(now)
            if entry is None:
                break
            t: Ticket = entry.payload
            fut = t._fut
            if fut is None or fut.done():  # cancelled while being popped
                continue
            reserved = False
            self._in_flight += 1
            stats.dispatched += 1
            if entry.promoted:
                stats.promoted += 1
            if self._in_flight > stats.max_in_flight:
                stats.max_in_flight = self._in_flight
            entry.dispatched_at = now
            if entry.supersede is not None:
                self._forget_supersede(t)
            t.state = RUNNING
            self._running.add(t)
            if self.overload is not None:
                self.overload.dispatched(entry, now)
            if self.lease_ttl_s:
                self._arm_lease(t)
            fut.set_result(True)
            self._emit("on_dispatch", entry, now - entry.arrival)
        if reserved:
            ledger.give(self)
        if self._deferred:
            self._wake_deferred()

    def _finish(self, t: Ticket, answer_tokens: int | None, expired: bool = False) -> None:
        if t._lease is not None:
            t._lease.cancel()
            t._lease = None
        self._in_flight -= 1
        self._running.discard(t)
        stats, entry = self.stats, t.entry
        stats.released += 1
        if expired:
            stats.expired += 1
        service_s = self.clock() - entry.dispatched_at
        true_class = class_of_tokens(answer_tokens) if answer_tokens is not None and answer_tokens >= 0 else None
        if self.overload is not None:
            self.overload.finished(entry)
        t._scorer = None  # if it ran alone, never scored: nothing to score it for now
        try:
            self.pending.observe(entry, service_s, true_class, answer_tokens)
        except Exception:
            log.exception("policy observe failed")
        self._emit("on_complete", entry, service_s, answer_tokens)
        if self.ledger is not None:
            self.ledger.give(self)
        self._dispatch()


__all__ = ["AdmissionQueue", "LocalAdmissionQueue", "QueueEvents", "QueueStats", "Ticket", "TicketState"]
