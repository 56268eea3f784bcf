"""The in-process admission store (asyncio): slots, the door, work-conserving dispatch.

One :class:`LocalAdmissionQueue` per serial backend, implementing the
:class:`~sjf_core.admission._base.AdmissionQueue` contract. Guarantees (DESIGN.md
invariants): 1. never more than ``slots`` tickets running; 2. each granted ticket is released
exactly once (:class:`~sjf_core.admission._ticket.Ticket`; a hold limit force-releases a
ticket whose owner vanished); 3. work-conserving: a release or an arrival dispatches at once,
no polling; 4. τ promotion (:mod:`sjf_core.policy._pending`); 7. a waiter cancelled or timed
out while queued leaves the queue at once. Its collaborators: the door
(:class:`~sjf_core.admission._door.Door`: supersede, overload control) and the grant path
(:class:`~sjf_core.admission._future_grant.FutureGrants`: a future per waiter, the dispatch
rate limit of :mod:`sjf_core.settings._rate_limit`, applied after the slot is granted in
policy order, and the hold limit).
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from typing import Callable

from sjf_core.admission._base import AdmissionQueue
from sjf_core.admission._door import Door
from sjf_core.admission._events import QueueEvents, QueueStats
from sjf_core.admission._future_grant import FutureGrants
from sjf_core.admission._overload import OverloadConfig, OverloadControl
from sjf_core.settings import RateLimit
from sjf_core.admission._ticket import DEFERRED, NEW, QUEUED, RUNNING, Ticket, TicketState
from sjf_core.admission._view import local_view
from sjf_core.settings import DEFAULT_POLICY, check_slots
from sjf_core.policy._entry import Entry, class_of_tokens
from sjf_core.policy._policies import Policy, make_policy

log = logging.getLogger("sjf_core.admission._local")


class LocalAdmissionQueue(AdmissionQueue):
    """Admission queue of one backend, in this process.

    Args:
        slots: maximum concurrent admissions (>= 1). A serial backend has 1.
        policy: a :class:`~sjf_core.policy._policies.Policy` or its name (default
            :data:`sjf_core.settings.DEFAULT_POLICY`).
        name: the backend key, for logs and metrics (never prompt text).
        lease_ttl_s: if set, a running ticket not released or renewed within this
            many seconds is force-released (safety net for lost release hooks).
        clock: monotonic clock in seconds.
        listeners: :class:`QueueEvents` objects notified of queue events.
        overload: overload limits (:class:`~sjf_core.settings.OverloadConfig` or a
            mapping of its fields), or None (no limit).
        rate_limit: maximum dispatch rate (:meth:`~sjf_core.settings._rate_limit.RateLimit.parse`:
            a number per second or "60/min"), or None.
        fairness: a :class:`~sjf_core.settings._tenants.Fairness` (or its spec, e.g. "user"):
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
    #: the :class:`~sjf_core.admission._boxes.BoxGate` of a model runner on a many-model box
    #: (asked before each grant: the box's cap, loaded set and turn), or None
    gate = None

    def __init__(
        self,
        slots: int = 1,
        policy: Policy | str = DEFAULT_POLICY,
        name: str = "default",
        lease_ttl_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        listeners: list[QueueEvents] | None = None,
        overload: OverloadConfig | dict | None = None,
        rate_limit: RateLimit | float | str | None = None,
        fairness=None,
    ):
        self.slots = check_slots(slots)
        self.policy = make_policy(policy)
        self.name = name
        self.lease_ttl_s = lease_ttl_s
        self.clock = clock
        self.listeners: list[QueueEvents] = list(listeners or [])
        from sjf_core.settings import Fairness

        self.fairness = Fairness.parse(fairness if fairness is not None else "off")
        if self.fairness.enabled:
            from sjf_core.policy._fair_share import TenantPending

            self.pending = TenantPending(self._tenant_pending, self.fairness.weight)
        else:
            self.pending = self.policy.new_pending()
        if hasattr(self.pending, "slots"):
            self.pending.slots = self.slots  # "fcfs-bound" runs a virtual FCFS schedule on them
        self.stats = QueueStats()
        self._in_flight = 0
        self._seq = itertools.count()
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
        #: the grant path: a future per waiter, the rate limit, the hold limit
        self.grants = FutureGrants(self, self.rate_limit.throttler() if self.rate_limit is not None else None)
        #: the door: supersede, overload verdicts, deferral, rejection
        self.door = Door(self)

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
    def loop(self):
        """The event loop this queue grants on (None before the first ``acquire``)."""
        return self.grants.loop

    def wake(self) -> None:
        """Grant waiters now if there is room: the backend's ledger freed a unit on another
        path (call it on :attr:`loop`)."""
        self._dispatch()

    @property
    def in_flight(self) -> int:
        """Tickets holding a slot now."""
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Tickets queued for a slot now."""
        return len(self.pending)

    async def view(self, limit: int = 100) -> dict:
        """Who runs and who waits (:meth:`AdmissionQueue.view`; :func:`sjf_core.admission._view.local_view`)."""
        return local_view(self, limit=limit)

    @property
    def tau_s(self) -> float:
        """Current τ of this queue in seconds (inf when off)."""
        return self.pending.tau.tau_s

    # ---- tickets ------------------------------------------------------------------
    def _scores_at_door(self) -> bool:
        return self.overload is not None or self.rate_limit is not None

    def _new_ticket(self, prediction, meta, arrival, scorer) -> Ticket:
        # make_entry inlined (hot path)
        t = Ticket(self, self.policy.make_entry(next(self._seq), self.clock() if arrival is None else float(arrival),
                                                prediction, meta))
        if scorer is not None:
            entry = t.entry
            entry.fallback = False
            entry.scored = False  # not yet: see _score
            t._scorer = scorer
        return t

    def make_entry(self, prediction, meta, arrival: float | None = None) -> Entry:
        """The policy's :class:`~sjf_core.policy._entry.Entry` of one request on this queue:
        the next arrival sequence number, ``arrival`` (this queue's clock; default now), the
        key of ``prediction`` and ``meta`` (unscored when None). Never raises (fail-open)."""
        now = self.clock() if arrival is None else float(arrival)
        return self.policy.make_entry(next(self._seq), now, prediction, meta)

    # ---- the contract: free a slot, refill -------------------------------------------------
    def _free(self, t: Ticket, answer_tokens: int | None, expired: bool = False) -> float:
        self.grants.disarm(t)
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
        return service_s

    def _refill(self) -> None:
        if self.ledger is not None:  # the freed unit: to a waiter of another path, or back
            self.ledger.give(self)
        self._dispatch()

    # ---- what the door and the grant path use (DoorHost, FutureHost) -----------------------
    def submit(self, t: Ticket) -> None:
        """Take a NEW ticket through the door. When it would wait, the order matters now:
        score it, and any request running unscored, first."""
        if (self._in_flight >= self.slots or len(self.pending) or self.door.deferred or self.overload is not None
                or self.rate_limit is not None):  # it would not be granted at once
            if t._scorer is not None:
                self._score(t)
            if self._running:
                for r in tuple(self._running):  # at most `slots` tickets
                    if r._scorer is not None:
                        self._score(r)
        if t.entry.supersede is None and self.overload is None:
            self.enqueue(t)  # nothing for the door to do (hot path)
        else:
            self.door.admit(t)

    def enqueue(self, t: Ticket) -> None:
        """Put an admitted (NEW or deferred) ticket in the pending structure; dispatch."""
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
        t.enqueue()
        if self._in_flight < self.slots or self.door.deferred:
            self._dispatch()

    def fail(self, t: Ticket, exc: BaseException) -> None:
        """Make ``t``'s ``acquire`` raise ``exc``."""
        self.grants.fail(t, exc)

    def leave(self, t: Ticket) -> None:
        """A waiting ticket's owner went away: out of the queue or the door, at once."""
        state = t.state
        if state is DEFERRED:
            self.door.cancel_deferred(t)
        elif state is QUEUED:
            if t.entry.supersede is not None:
                self.door.forget(t)
            if self.pending.remove(t.entry):
                self.stats.cancelled += 1
                if self.overload is not None:
                    self.overload.left(t.entry)
                t.cancel()
                self.door.wake()
            else:
                t.cancel(event=False)
        elif state is NEW:
            t.cancel(event=False)

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

    def _dispatch(self) -> None:
        """Grant free slots to waiters (work-conserving, invariant 3)."""
        pending, stats, grants, ledger = self.pending, self.stats, self.grants, self.ledger
        reserved = False  # a unit of the ledger taken for the next grant
        while self._in_flight < self.slots and len(pending):
            if self.gate is not None and not reserved and not self.gate.may_start(self):
                break  # the box holds this runner back (its cap, its loaded set, another's turn)
            if ledger is not None and not reserved:
                if not ledger.try_take():  # another path (gate, Redis grant) holds the room
                    break
                reserved = True
            now = self.clock()
            entry = pending.pop(now)
            if entry is None:
                break
            t: Ticket = entry.payload
            if grants.gone(t):  # cancelled while being popped
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
                self.door.forget(t)
            self._running.add(t)
            if self.overload is not None:
                self.overload.dispatched(entry, now)
            t.grant(now - entry.arrival)
            grants.wake(t)
        if reserved:
            ledger.give(self)
        if self.door.deferred:
            self.door.wake()


__all__ = ["AdmissionQueue", "LocalAdmissionQueue", "QueueEvents", "QueueStats", "Ticket", "TicketState"]
