"""The in-process admission queue (asyncio): slots, tickets, work-conserving dispatch.

One :class:`AdmissionQueue` per serial backend. A caller takes a :class:`Ticket`,
awaits :meth:`Ticket.acquire` (or uses it as ``async with``), runs its request, and
releases. Guarantees (DESIGN.md invariants):

1. never more than ``slots`` tickets running;
2. each granted ticket is released exactly once (``release`` is idempotent, and a
   lease time-to-live force-releases a ticket whose owner vanished);
3. work-conserving: a release or an arrival dispatches at once, no polling;
4. τ promotion (see :mod:`sjf_core.policy._pending`);
7. a waiter cancelled or timed out while queued leaves the queue at once.

Optional, per queue: overload control (:mod:`sjf_core.admission._overload`: a new request may
be deferred or rejected with :class:`~sjf_core._errors.AdmissionRejected` before it
enters the queue; an admitted request is never dropped) and a maximum dispatch rate
(:mod:`sjf_core.admission._ratelimit`, asyncio-throttle, applied after the slot is granted in
policy order).
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

from sjf_core.policy._entry import Entry, class_of_tokens
from sjf_core._errors import AdmissionRejected, Superseded
from sjf_core.admission._overload import OverloadConfig, OverloadControl, Verdict
from sjf_core.policy._policies import Policy, RequestMeta, make_policy
from sjf_core.predict._prediction import Prediction
from sjf_core.admission._ratelimit import RateLimit
from sjf_core.admission._ticket import TicketState as S, TicketView

log = logging.getLogger("sjf_core.admission._local")


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
    rejected: int = 0
    deferred: int = 0
    max_waiting: int = 0
    superseded: int = 0


class QueueEvents:
    """Listener interface for queue events; override what you need (metrics, plugins)."""

    def on_enqueue(self, queue: "AdmissionQueue", entry: Entry) -> None: ...

    def on_dispatch(self, queue: "AdmissionQueue", entry: Entry, wait_s: float) -> None: ...

    def on_complete(self, queue: "AdmissionQueue", entry: Entry, service_s: float, answer_tokens: int | None) -> None: ...

    def on_cancel(self, queue: "AdmissionQueue", entry: Entry) -> None: ...

    def on_reject(self, queue: "AdmissionQueue", entry: Entry, reason: str) -> None:
        """Overload control refused ``entry`` (it never entered the queue)."""


class AdmissionQueue:
    """Admission queue of one backend.

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
        self._supersede: dict[tuple, "Ticket"] = {}
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
    def ticket(
        self,
        prediction: Prediction | None = None,
        meta: RequestMeta | None = None,
        arrival: float | None = None,
        scorer: Callable[[], tuple[Prediction | None, RequestMeta | None]] | None = None,
    ) -> "Ticket":
        """Make a ticket for one request (it waits only once acquired).

        Args:
            prediction: the predicted length, or None for an unscored request,
                which is placed at the policy's neutral key (fail-open).
            meta: request metadata (max_tokens, priority, deadline).
            arrival: original arrival on this queue's clock (seconds), e.g. for an
                SDK retry; default now.
            scorer: with ``prediction`` None, a callable returning this request's
                ``(prediction, meta)`` (it parses and scores the body; ``meta``
                then replaces the argument), called only when there is an
                order to decide: at submit when the request would wait, or when a
                later request arrives while it runs (the backlog estimate of
                "fcfs-bound" needs it). A request granted a slot at once at zero
                contention and alone until its release is never scored: its events
                carry ``entry.scored = False`` (metrics label it ``idle``) and it
                feeds only true-class statistics (paper §3.4 needs no prediction
                when nothing waits).
        """
        now = self.clock()
        entry = self.policy.make_entry(next(self._seq), now if arrival is None else float(arrival), prediction, meta)
        t = Ticket(self, entry)
        if scorer is not None and prediction is None:
            entry.fallback = False
            entry.scored = False  # not yet: see _score
            t._scorer = scorer
        return t

    # ---- internals ------------------------------------------------------------------
    def _bind_loop(self) -> None:
        loop = asyncio.get_running_loop()
        # Rebind when idle: tests and CLIs may run several event loops in turn.
        if self._loop is None or self._loop.is_closed() or (self._in_flight == 0 and len(self.pending) == 0):
            self._loop = loop

    def _emit(self, name: str, *args) -> None:
        for listener in self.listeners:
            fn = getattr(listener, name, None)
            if fn is None:
                continue
            try:
                fn(self, *args)
            except Exception:  # a listener must never break admission
                log.exception("queue listener %s.%s failed", type(listener).__name__, name)

    def _submit(self, t: "Ticket") -> None:
        """Admission: enqueue, defer or reject ``t`` (overload control)."""
        if not self._dispatches_at_once():
            # the order matters now: score the newcomer and any request running unscored
            if t._scorer is not None:
                self._score(t)
            for r in [r for r in self._running if r._scorer is not None]:  # at most `slots` tickets
                self._score(r)
        if t.entry.supersede is not None:
            self._supersede_older(t)
        verdict = self._check(t)
        if verdict is None:
            self._enqueue(t)
        elif self.overload.config.defer_s > 0:
            t.state = S.DEFERRED
            self.stats.deferred += 1
            self._deferred.append(t)
            t._defer_timer = self._loop.call_later(self.overload.config.defer_s, self._defer_expired, t)
        else:
            self._reject(t, verdict)

    def _supersede_older(self, t: "Ticket") -> None:
        """``t`` replaces the queued ticket with its (tenant, supersede key), if any."""
        key = (t.entry.tenant, t.entry.supersede)
        old = self._supersede.get(key)
        self._supersede[key] = t
        if old is None or old is t or old.state not in (S.QUEUED, S.DEFERRED):
            return
        was_deferred = old.state == S.DEFERRED
        old.state = S.SUPERSEDED
        if was_deferred:
            if old in self._deferred:
                self._deferred.remove(old)
            if old._defer_timer is not None:
                old._defer_timer.cancel()
                old._defer_timer = None
        elif self.pending.remove(old.entry) and self.overload is not None:
            self.overload.left(old.entry)
        self.stats.superseded += 1
        self._emit("on_cancel", old.entry)
        if old._fut is not None and not old._fut.done():
            old._fut.set_exception(Superseded(self.name))

    def _forget_supersede(self, t: "Ticket") -> None:
        key = (t.entry.tenant, t.entry.supersede)
        if self._supersede.get(key) is t:
            del self._supersede[key]

    def _dispatches_at_once(self) -> bool:
        """True when a request submitted now is granted a slot without waiting."""
        return (self._in_flight < self.slots and not len(self.pending) and not self._deferred
                and self.overload is None and self._throttler is None)

    def _score(self, t: "Ticket") -> None:
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
        if t.state != S.RUNNING:  # not yet in the queue: who it belongs to may still change
            e.tenant, e.supersede = fresh.tenant, fresh.supersede
        if not math.isnan(e.dispatched_at):  # it was dispatched unscored
            if e.fallback:
                self.stats.fallback += 1
            rescored = getattr(self.pending, "rescored", None)
            if rescored is not None and t.state == S.RUNNING:
                rescored(e)

    def _check(self, t: "Ticket") -> Verdict | None:
        if self.overload is None:
            return None
        try:
            return self.overload.check(t.entry, len(self.pending), self.clock())
        except Exception:  # overload control must never fail a request: admit
            log.exception("overload check failed on backend %s; admitting", self.name)
            return None

    def _reject(self, t: "Ticket", verdict: Verdict) -> None:
        t.state = S.REJECTED
        self.stats.rejected += 1
        if self.overload is not None:
            self.overload.rejected[verdict.klass] += 1
        self._emit("on_reject", t.entry, verdict.reason)
        if t._fut is not None and not t._fut.done():
            t._fut.set_exception(AdmissionRejected(verdict.retry_after_s, verdict.reason, self.name))

    def _defer_expired(self, t: "Ticket") -> None:
        if t.state != S.DEFERRED:
            return
        self._deferred.remove(t)
        t._defer_timer = None
        verdict = self._check(t)
        if verdict is None:
            t.state = S.QUEUED
            self._enqueue(t)
        else:
            self._reject(t, verdict)

    def _wake_deferred(self) -> None:
        """Re-check deferred tickets in arrival order after the queue drained a little."""
        if not self._deferred or self._waking:
            return
        self._waking = True
        try:
            for t in list(self._deferred):
                if t.state != S.DEFERRED or self._check(t) is not None:
                    continue
                self._deferred.remove(t)
                if t._defer_timer is not None:
                    t._defer_timer.cancel()
                    t._defer_timer = None
                t.state = S.QUEUED
                self._enqueue(t)
        finally:
            self._waking = False

    def _enqueue(self, t: "Ticket") -> None:
        self.stats.enqueued += 1
        if t.entry.fallback:
            self.stats.fallback += 1
        self.pending.push(t.entry)
        if self.overload is not None:
            self.overload.enqueued(t.entry)
        self.stats.max_waiting = max(self.stats.max_waiting, len(self.pending))
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
            if entry.supersede is not None:
                self._forget_supersede(t)
            t.state = S.RUNNING
            self._running.add(t)
            if self.overload is not None:
                self.overload.dispatched(entry, now)
            t._arm_lease()
            t._fut.set_result(True)
            self._emit("on_dispatch", entry, now - entry.arrival)
        self._wake_deferred()

    def _finish(self, t: "Ticket", answer_tokens: int | None, expired: bool = False) -> None:
        self._in_flight -= 1
        self._running.discard(t)
        self.stats.released += 1
        if expired:
            self.stats.expired += 1
        service_s = self.clock() - t.entry.dispatched_at
        true_class = class_of_tokens(answer_tokens) if answer_tokens is not None and answer_tokens >= 0 else None
        if self.overload is not None:
            self.overload.finished(t.entry)
        t._scorer = None  # if it ran alone, never scored: nothing to score it for now
        try:
            self.pending.observe(t.entry, service_s, true_class, answer_tokens)
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


class Ticket(TicketView):
    """One request's admission: an async context manager holding a slot.

    States: "new" → "queued" → "running" → "released"; or "queued" → "cancelled";
    or "queued" → "superseded" (a newer request with its supersede key);
    with overload control also "new" → "rejected", and "new" → "deferred" →
    "queued" | "rejected" | "cancelled".

    Example::

        async with queue.ticket(prediction):
            await call_backend()
    """

    __slots__ = ("queue", "entry", "state", "_fut", "_lease", "_lock", "_defer_timer", "_scorer", "__weakref__")

    def __init__(self, queue: AdmissionQueue, entry: Entry):
        self.queue = queue
        self.entry = entry
        entry.payload = self
        self.state = S.NEW
        self._fut: asyncio.Future | None = None
        self._lease: asyncio.TimerHandle | None = None
        self._lock = threading.Lock()
        self._defer_timer: asyncio.TimerHandle | None = None
        self._scorer = None  # see AdmissionQueue.ticket(scorer=)

    @property
    def wait_s(self) -> float:
        """Seconds spent queued (NaN until dispatched)."""
        return self.entry.dispatched_at - self.entry.arrival

    async def acquire(self, timeout: float | None = None) -> None:
        """Wait for a slot.

        Args:
            timeout: seconds to wait at most, or None.

        Raises:
            asyncio.TimeoutError: the timeout expired while queued, deferred or
                rate-limited (the ticket left the queue; a granted slot is released).
            asyncio.CancelledError: the caller was cancelled while waiting (same).
            sjf_core._errors.AdmissionRejected: overload control refused the request
                (it never entered the queue; ``release`` is then a no-op).
            sjf_core._errors.Superseded: a newer request with the same supersede key
                replaced it while it was queued (``release`` is then a no-op).
            RuntimeError: the ticket was already used.
        """
        if self.state != S.NEW:
            raise RuntimeError(f"ticket already {self.state}")
        q = self.queue
        q._bind_loop()
        loop = q._loop
        self._fut = loop.create_future()
        self.state = S.QUEUED
        started = loop.time()
        q._submit(self)
        try:
            if self._fut.done():
                self._fut.result()  # raises AdmissionRejected when refused
            elif timeout is None:
                await self._fut
            else:
                await asyncio.wait_for(asyncio.shield(self._fut), timeout)
            if q._throttler is not None and self.state == S.RUNNING:
                left = None if timeout is None else max(0.0, timeout - (loop.time() - started))
                await asyncio.wait_for(q._throttler.acquire(), left)
                self.entry.dispatched_at = q.clock()  # service is measured from the send
                self._arm_lease()
        except BaseException:
            self._abandon()
            raise

    def _abandon(self) -> None:
        """The waiter went away: leave the queue, or hand back a slot granted meanwhile."""
        fut = self._fut
        if fut is not None and fut.done() and not fut.cancelled() and self.state == S.RUNNING:
            self.release()
            return
        if fut is not None and not fut.done():
            fut.cancel()
        if self.state == S.DEFERRED:
            self.state = S.CANCELLED
            q = self.queue
            if self in q._deferred:
                q._deferred.remove(self)
            if self._defer_timer is not None:
                self._defer_timer.cancel()
                self._defer_timer = None
            q.stats.cancelled += 1
            q._emit("on_cancel", self.entry)
            return
        if self.state == S.QUEUED:
            self.state = S.CANCELLED
            if self.entry.supersede is not None:
                self.queue._forget_supersede(self)
            if self.queue.pending.remove(self.entry):
                self.queue.stats.cancelled += 1
                if self.queue.overload is not None:
                    self.queue.overload.left(self.entry)
                self.queue._emit("on_cancel", self.entry)
                self.queue._wake_deferred()

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
            if self.state in (S.QUEUED, S.DEFERRED):
                self.queue._call_in_loop(self._abandon)
                return False
            if self.state != S.RUNNING:
                return False
            self.state = S.RELEASED
        self._cancel_lease()
        self.queue._call_in_loop(self.queue._finish, self, answer_tokens)
        return True

    async def arelease(self, answer_tokens: int | None = None) -> bool:
        """:meth:`release` (the local store has nothing more to wait for)."""
        return self.release(answer_tokens)

    def renew(self) -> None:
        """Restart the lease time-to-live (call during long streams)."""
        if self.state == S.RUNNING:
            self.queue._call_in_loop(self._arm_lease)

    def _arm_lease(self) -> None:
        self._cancel_lease()
        ttl = self.queue.lease_ttl_s
        if ttl and self.state == S.RUNNING and self.queue._loop is not None:
            self._lease = self.queue._loop.call_later(ttl, self._expire)

    def _cancel_lease(self) -> None:
        if self._lease is not None:
            self._lease.cancel()
            self._lease = None

    def _expire(self) -> None:
        with self._lock:
            if self.state != S.RUNNING:
                return
            self.state = S.RELEASED
        log.warning("admission lease expired on backend %s; slot force-released", self.queue.name)
        self.queue._finish(self, None, expired=True)

    async def __aenter__(self) -> "Ticket":
        await self.acquire()
        return self

    async def __aexit__(self, *exc) -> None:
        self.release()
