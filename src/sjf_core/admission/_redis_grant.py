"""How the Redis store grants and frees a slot: enqueue script, ``BLPOP``, release script.

A mixin of :class:`~sjf_core.admission._redis.RedisAdmissionQueue`; the ticket lifecycle
itself is :class:`~sjf_core.admission._ticket.Ticket`. A waiter runs the enqueue script
(granted at once if a slot is free), else blocks in ``BLPOP`` on its own wake list, into
which the dispatching script pushes the grant ("<fence> <dispatched> <promoted>
<in_flight> [<work>]") or "gone" / "superseded". A grant is state in Redis, the list
element only a signal, so a wake-up that crosses a cancellation is never lost: the cancel
script frees a slot granted meanwhile. When Redis cannot be used the ticket fails open
(:attr:`RedisGrant.delegate`, a ticket of the per-process local queue) or closed
(:class:`~sjf_core.admission._redis_wire.RedisUnavailable`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from sjf_core._errors import Superseded
from sjf_core.admission._redis_wire import OWNER, RedisUnavailable, _LoopState
from sjf_core.admission._ticket import QUEUED, RUNNING, Ticket, TicketState
from sjf_core.policy._entry import class_of_tokens

log = logging.getLogger("sjf_core.admission._redis")


class RedisGrant:
    """The Redis side of one ticket: its waiter id, lease fence and the tasks in flight.

    Attributes: ``ls`` (the loop's :class:`~sjf_core.admission._redis_wire._LoopState`),
    ``rid`` (waiter id, str, None until Redis has it), ``epoch``, ``fence`` (the lease's
    fencing token), ``dispatched_server`` (server time of the grant), ``server_arrival``,
    ``work`` (served-work clock at the grant), ``hold_deadline`` (local clock, s, or None),
    ``delegate`` (the fail-open local ticket, or None).
    """

    __slots__ = ("ls", "rid", "epoch", "fence", "dispatched_server", "server_arrival", "work", "hold_deadline",
                 "enqueue_task", "acq_task", "release_task", "delegate", "unit")

    def __init__(self, ls: _LoopState):
        self.ls = ls
        self.rid = self.epoch = self.fence = self.dispatched_server = self.server_arrival = None
        self.work = "0"
        self.hold_deadline: float | None = None
        self.enqueue_task: asyncio.Task | None = None
        self.acq_task: asyncio.Task | None = None
        self.release_task: asyncio.Task | None = None
        self.delegate: Ticket | None = None
        self.unit = False  # it holds a unit of the backend's in-process ledger (_ledger.py)


class _RedisGrants:
    """Grant and release methods of the Redis store (see the module docstring)."""

    # ---- the contract ---------------------------------------------------------------------
    async def _grant(self, t: Ticket, timeout: float | None) -> None:
        t._start()
        g = t.grant = RedisGrant(self._state())
        t.loop = g.ls.loop
        # A task of its own, so that release() while queued can cancel the wait.
        g.acq_task = g.ls.loop.create_task(self._acquire(t))
        try:
            if timeout is None:
                await g.acq_task
            else:
                await asyncio.wait_for(g.acq_task, timeout)
        except BaseException:
            cleanup = g.ls.spawn(self._abandon(t))
            try:
                await asyncio.shield(cleanup)
            except BaseException:
                pass
            raise

    def _withdraw(self, t: Ticket) -> None:
        if t.grant is not None and t.grant.acq_task is not None:  # acquire() raises CancelledError and leaves
            t._in_loop(t.grant.acq_task.cancel)

    def _renew(self, t: Ticket) -> None:
        if t.mode == "local":
            t.grant.delegate.renew()
        elif self.lease_ttl_s:
            t.grant.hold_deadline = self.clock() + float(self.lease_ttl_s)

    async def _settled(self, t: Ticket) -> None:
        task = t.grant.release_task if t.grant is not None else None
        if task is not None:
            await asyncio.gather(asyncio.shield(task), return_exceptions=True)

    def _finish(self, t: Ticket, answer_tokens: int | None, expired: bool) -> None:
        self.stats.released += 1
        if expired:
            self.stats.expired += 1
        service_s = self.clock() - t.entry.dispatched_at
        self._emit("on_complete", t.entry, service_s, answer_tokens)
        g = t.grant
        if t.mode == "local":
            g.delegate.release(answer_tokens)
            return
        self._observe(t.entry, service_s, answer_tokens)
        g.ls.held.pop(g.fence, None)
        if g.unit:
            g.unit = False
            self.ledger.give()
        true_class = -1
        if answer_tokens is not None:
            try:
                if answer_tokens >= 0:
                    true_class = class_of_tokens(answer_tokens)
            except TypeError:
                pass
        tokens = answer_tokens if isinstance(answer_tokens, (int, float)) and answer_tokens > 0 else -1
        g.release_task = g.ls.spawn(self._send_release(t, true_class, tokens))

    # ---- the Redis wait -----------------------------------------------------------------------
    # enqueue arguments (numbers and hashes only, never prompt text)
    @staticmethod
    def _supersede_arg(entry) -> str:
        """The entry's supersede key as stored in Redis: a hash of it (never the key itself), or ""."""
        if not isinstance(entry.supersede, str) or not entry.supersede:
            return ""
        from sjf_core.policy._tenants import hash_id

        return hash_id("supersede", entry.supersede)

    def _tenant_args(self, entry) -> list:
        """``[tenant, weight]`` enqueue arguments: the entry's tenant id (no spaces, at most
        64 characters) with fair shares on, else ``["", 1]`` (one shared order)."""
        t = entry.tenant
        if not self.fairness.enabled or not isinstance(t, str) or not t:
            return ["", "1"]
        return ["".join(c if c.isalnum() or c in "-_.:" else "_" for c in t)[:64], repr(float(self.fairness.weight(t)))]

    @staticmethod
    def _tokens(entry) -> str:
        """Predicted answer tokens (for the server's expected service time), or "0"."""
        x = float(entry.expected_tokens or 0.0)
        return repr(x) if math.isfinite(x) and x > 0 else "0"

    def _deadline_in(self, entry) -> str:
        """The deadline relative to now (s), or "" without one. The server subtracts the
        expected service time (shared statistics) to get the latest start time."""
        if entry.deadline is None or not math.isfinite(entry.deadline):
            return ""
        return f"{entry.deadline - self.clock():.6f}"

    async def _acquire(self, t: Ticket) -> None:
        g, ls, entry = t.grant, t.grant.ls, t.entry
        self.stats.enqueued += 1
        if entry.fallback:
            self.stats.fallback += 1
        self._emit("on_enqueue", entry)
        if not self._should_try_redis():
            return await self._unavailable(t, None)
        while True:
            age = max(0.0, self.clock() - entry.arrival)
            prio = max(-(10**9), min(10**9, int(entry.priority)))
            args = [repr(float(entry.key)), prio, int(entry.klass), f"{age:.6f}",
                    self._deadline_in(entry), self._tokens(entry), OWNER, *self._tenant_args(entry),
                    self._supersede_arg(entry)]
            g.enqueue_task = ls.spawn(self._run(ls, "enqueue", args))
            try:
                r = await asyncio.shield(g.enqueue_task)
            except self._errors as exc:
                return await self._unavailable(t, exc)
            self._mark_up()
            g.rid, g.epoch, g.server_arrival = r[0], r[1], r[2]
            self._summary(r, 4, ls)
            if r[3]:
                self._granted(t, r[3])
                return await self._room(t)
            ls.waiting[g.rid] = t
            self._ensure_heartbeat(ls)
            try:
                status = await self._wait_for_grant(t)
            except self._errors as exc:
                ls.waiting.pop(g.rid, None)
                return await self._unavailable(t, exc)
            if status == "granted":
                return await self._room(t)
            ls.waiting.pop(g.rid, None)
            if status == "superseded":
                self.stats.superseded += 1
                self._emit("on_cancel", entry)
                t.state = TicketState.SUPERSEDED
                raise Superseded(self.name)
            # Redis no longer knows this waiter (its data was lost, or the heartbeat came
            # too late): enqueue again with the original arrival.
            self.stats.reenqueued += 1
            g.rid = None

    async def _wait_for_grant(self, t: Ticket) -> str:
        g, ls = t.grant, t.grant.ls
        wake = f"{self.tag}:w:{g.rid}"
        while True:
            # Shielded: a cancelled caller leaves at once, without cancelling redis-py in
            # the middle of a blocking read; the cancel script then unblocks this BLPOP.
            item = await asyncio.shield(ls.spawn(ls.blocking.blpop([wake], timeout=self.waiter_ttl_s)))
            if item is not None:
                value = item[1]
                if value in ("gone", "superseded"):
                    return value
                ls.waiting.pop(g.rid, None)
                self._granted(t, value)
                return "granted"
            # No signal for a while: ask (also renews this waiter).
            statuses = await self._heartbeat(ls, [g.rid], [])
            if statuses and statuses[0] in ("gone", "superseded"):
                # the script pushed the status to the wake list: consume it
                await ls.fast.delete(wake)
                return statuses[0]

    async def _room(self, t: Ticket) -> None:
        """Hold a unit of the in-process ledger too: a grant of Redis waits while this
        process's other paths (fail-open local queue, last-resort gate) fill the backend."""
        if self.ledger is not None:
            if not self.ledger.try_take():
                await self.ledger.take()
            t.grant.unit = True

    def _granted(self, t: Ticket, signal: str) -> None:
        g, stats = t.grant, self.stats
        fence, dispatched, promoted, in_flight, *rest = signal.split()
        g.fence, g.dispatched_server = fence, dispatched
        g.work = rest[0] if rest else "0"
        t.mode = "redis"
        now = self.clock()
        t.entry.dispatched_at = now
        t.entry.promoted = promoted == "1"
        t.state = RUNNING
        stats.dispatched += 1
        if t.entry.promoted:
            stats.promoted += 1
        stats.max_in_flight = max(stats.max_in_flight, int(in_flight))
        if self.lease_ttl_s:
            g.hold_deadline = now + float(self.lease_ttl_s)
        g.ls.held[fence] = t
        self._ensure_heartbeat(g.ls)
        self._emit("on_dispatch", t.entry, now - t.entry.arrival)

    async def _unavailable(self, t: Ticket, exc: BaseException | None) -> None:
        """Redis cannot be used for this ticket: fail open (delegate to the local queue) or closed."""
        g = t.grant
        if exc is not None:
            self._mark_down(exc)
            if g.rid is not None:  # best effort: do not leave an entry that nobody waits for
                g.ls.spawn(self._cancel_quietly(g.ls, g.rid))
                g.rid = None
        if self.fail_mode == "closed":
            raise RedisUnavailable(self.retry_s, "redis_unavailable", self.name)
        t.mode = "local"
        self.stats.failopen += 1
        g.delegate = Ticket(self.local, t.entry)
        await g.delegate.acquire()
        t.entry.payload = t
        t.state = RUNNING
        self.stats.dispatched += 1
        self._emit("on_dispatch", t.entry, t.entry.dispatched_at - t.entry.arrival)

    async def _cancel_quietly(self, ls: _LoopState, rid: str) -> None:
        try:
            await self._run(ls, "cancel", [rid])
        except Exception:
            pass

    async def _abandon(self, t: Ticket) -> None:
        """The waiter went away: leave the queue, or hand back a slot granted meanwhile."""
        g, ls = t.grant, t.grant.ls
        if t.state is RUNNING:
            t.release()
            if g.release_task is not None:
                await asyncio.gather(g.release_task, return_exceptions=True)
            return
        if t.state is not QUEUED:
            return
        t.state = TicketState.CANCELLED
        self.stats.cancelled += 1
        self._emit("on_cancel", t.entry)
        if t.mode == "local":
            # the local ticket left its queue itself; it may hold a slot granted meanwhile
            if g.delegate is not None and g.delegate.running:
                g.delegate.release()
            return
        task = g.enqueue_task
        if task is not None and not task.done():
            await asyncio.gather(task, return_exceptions=True)
        if task is not None and g.rid is None and task.done() and not task.cancelled() and task.exception() is None:
            g.rid = task.result()[0]
        if g.rid is None:
            return
        ls.waiting.pop(g.rid, None)
        try:
            r = await self._run(ls, "cancel", [g.rid])
            self._summary(r, 1, ls)
        except self._errors as exc:  # Redis gone: the waiter TTL / lease TTL cleans up
            self._mark_down(exc)

    async def _send_release(self, t: Ticket, true_class: int, answer_tokens: float) -> None:
        ls = t.grant.ls
        try:
            r = await self._run(ls, "release", [t.grant.fence, true_class, answer_tokens])
            self._summary(r, 2, ls)
            self._mark_up()
        except self._errors as exc:  # the lease expires by itself; the request is not affected
            self._mark_down(exc)
        except Exception:
            log.exception("Redis release failed on backend %s; the lease will expire", self.name)
