"""How the Redis store grants and frees a slot: enqueue script, ``BLPOP``, release script.

:class:`RedisGrants` is the Redis store's :class:`~sjf_core.admission._ticket.GrantPath`, a
collaborator of :class:`~sjf_core.admission._redis.RedisAdmissionQueue` given its host
(:class:`~sjf_core.admission._redis_wire.RedisHost`) and heartbeat
(:class:`~sjf_core.admission._redis_heartbeat.Heartbeat`); the ticket lifecycle itself is
:class:`~sjf_core.admission._ticket.Ticket`. A waiter runs the enqueue script
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
from typing import TYPE_CHECKING

from sjf_core._errors import Superseded
from sjf_core.admission._redis_wire import OWNER, RedisUnavailable, _LoopState
from sjf_core.admission._ticket import NEW, QUEUED, RUNNING, Ticket
from sjf_core.policy._entry import class_of_tokens
from sjf_core._faults import note_fault

if TYPE_CHECKING:
    from sjf_core.admission._redis_heartbeat import Heartbeat
    from sjf_core.admission._redis_wire import RedisHost

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


class RedisGrants:
    """The Redis grant path (see the module docstring).

    Args:
        host: the store. heartbeat: its heartbeat (renews waiters and holders; asked for a
            waiter's status when its ``BLPOP`` times out).
    """

    __slots__ = ("host", "heartbeat")

    def __init__(self, host: "RedisHost", heartbeat: "Heartbeat"):
        self.host = host
        self.heartbeat = heartbeat

    # ---- the GrantPath ----------------------------------------------------------------------
    async def wait(self, t: Ticket, timeout: float | None) -> None:
        """Wait until ``t`` holds a slot (see :meth:`~sjf_core.admission._ticket.Ticket.acquire`)."""
        host = self.host
        if t.state is not NEW:
            raise RuntimeError(f"ticket already {t.state}")
        host.stats.enqueued += 1
        if t.entry.fallback:
            host.stats.fallback += 1
        t.enqueue()
        g = t.redis = RedisGrant(host.loop_state())
        t.loop = g.ls.loop
        # A task of its own, so that release() while queued can cancel the wait.
        g.acq_task = g.ls.loop.create_task(self._acquire(t))
        try:
            if timeout is None:
                await g.acq_task
            else:
                await asyncio.wait_for(g.acq_task, timeout)
        except BaseException:
            cleanup = g.ls.spawn(self.abandon(t))
            try:
                await asyncio.shield(cleanup)
            except asyncio.CancelledError:  # cancelled again while cleaning up: the cleanup goes on
                pass
            except Exception:
                note_fault(log, f"leaving the Redis queue of backend {host.name} failed; its waiter TTL cleans up")
            raise

    def withdraw(self, t: Ticket) -> None:
        """``t`` is waiting and its owner released it: ``acquire`` raises CancelledError and leaves."""
        if t.redis is not None and t.redis.acq_task is not None:
            t.in_loop(t.redis.acq_task.cancel)

    def renew(self, t: Ticket) -> None:
        """Restart ``t``'s hold limit (``lease_ttl_s``; enforced by the heartbeat)."""
        host = self.host
        if t.mode == "local":
            t.redis.delegate.renew()
        elif host.lease_ttl_s:
            t.redis.hold_deadline = host.clock() + float(host.lease_ttl_s)

    async def settled(self, t: Ticket) -> None:
        """Wait until ``t``'s release script has run (or failed)."""
        task = t.redis.release_task if t.redis is not None else None
        if task is not None:
            await asyncio.gather(asyncio.shield(task), return_exceptions=True)

    # ---- what the store calls ----------------------------------------------------------------
    def release(self, t: Ticket, answer_tokens: int | None) -> None:
        """``t`` was released: give its slot back (the delegate's, or the lease in Redis)."""
        g = t.redis
        if t.mode == "local":
            g.delegate.release(answer_tokens)
            return
        g.ls.held.pop(g.fence, None)
        if g.unit:
            g.unit = False
            self.host.ledger.give()
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
        from sjf_core.settings import hash_id

        return hash_id("supersede", entry.supersede)

    def _tenant_args(self, entry) -> list:
        """``[tenant, weight]`` enqueue arguments: the entry's tenant id (no spaces, at most
        64 characters) with fair shares on, else ``["", 1]`` (one shared order)."""
        t, fairness = entry.tenant, self.host.fairness
        if not fairness.enabled or not isinstance(t, str) or not t:
            return ["", "1"]
        return ["".join(c if c.isalnum() or c in "-_.:" else "_" for c in t)[:64], repr(float(fairness.weight(t)))]

    @staticmethod
    def _tokens(entry) -> str:
        """Predicted answer tokens (for the server's expected service time), or "0"."""
        x = float(entry.expected_tokens or 0.0)
        return repr(x) if math.isfinite(x) and x > 0 else "0"

    def _enqueue_args(self, entry) -> list:
        """The enqueue script's arguments: key, band, class, age, deadline (relative to now, s;
        the server subtracts the expected service time), tokens, owner, tenant, supersede."""
        now = self.host.clock()
        age = max(0.0, now - entry.arrival)
        prio = max(-(10**9), min(10**9, int(entry.priority)))
        deadline = "" if entry.deadline is None or not math.isfinite(entry.deadline) else f"{entry.deadline - now:.6f}"
        return [repr(float(entry.key)), prio, int(entry.klass), f"{age:.6f}", deadline, self._tokens(entry), OWNER,
                *self._tenant_args(entry), self._supersede_arg(entry)]

    async def _acquire(self, t: Ticket) -> None:
        host, g = self.host, t.redis
        ls = g.ls
        if not host.should_try_redis():
            return await self._unavailable(t, None)
        while True:
            g.enqueue_task = ls.spawn(host.run(ls, "enqueue", self._enqueue_args(t.entry)))
            try:
                r = await asyncio.shield(g.enqueue_task)
            except host.redis_errors as exc:
                return await self._unavailable(t, exc)
            host.mark_up()
            g.rid, g.epoch, g.server_arrival = r[0], r[1], r[2]
            host.summary(r, 4, ls)
            if r[3]:
                self._granted(t, r[3])
                return await self._room(t)
            ls.waiting[g.rid] = t
            self.heartbeat.ensure(ls)
            try:
                status = await self._wait_for_grant(t)
            except host.redis_errors as exc:
                ls.waiting.pop(g.rid, None)
                return await self._unavailable(t, exc)
            if status == "granted":
                return await self._room(t)
            ls.waiting.pop(g.rid, None)
            if status == "superseded":
                host.stats.superseded += 1
                t.supersede()
                raise Superseded(host.name)
            # Redis no longer knows this waiter (its data was lost, or the heartbeat came
            # too late): enqueue again with the original arrival.
            host.stats.reenqueued += 1
            g.rid = None

    async def _wait_for_grant(self, t: Ticket) -> str:
        host, g = self.host, t.redis
        ls = g.ls
        wake = f"{host.tag}:w:{g.rid}"
        while True:
            # Shielded: a cancelled caller leaves at once, without cancelling redis-py in
            # the middle of a blocking read; the cancel script then unblocks this BLPOP.
            item = await asyncio.shield(ls.spawn(ls.blocking.blpop([wake], timeout=host.waiter_ttl_s)))
            if item is not None:
                value = item[1]
                if value in ("gone", "superseded"):
                    return value
                ls.waiting.pop(g.rid, None)
                self._granted(t, value)
                return "granted"
            # No signal for a while: ask (also renews this waiter).
            statuses = await self.heartbeat.beat(ls, [g.rid], [])
            if statuses and statuses[0] in ("gone", "superseded"):
                # the script pushed the status to the wake list: consume it
                await ls.fast.delete(wake)
                return statuses[0]

    async def _room(self, t: Ticket) -> None:
        """Hold a unit of the in-process ledger too: a grant of Redis waits while this
        process's other paths (fail-open local queue, last-resort gate) fill the backend."""
        ledger = self.host.ledger
        if ledger is not None:
            if not ledger.try_take():
                await ledger.take()
            t.redis.unit = True

    def _granted(self, t: Ticket, signal: str) -> None:
        host, g = self.host, t.redis
        stats = host.stats
        fence, dispatched, promoted, in_flight, *rest = signal.split()
        g.fence, g.dispatched_server = fence, dispatched
        g.work = rest[0] if rest else "0"
        t.mode = "redis"
        now = host.clock()
        t.entry.dispatched_at = now
        t.entry.promoted = promoted == "1"
        stats.dispatched += 1
        if t.entry.promoted:
            stats.promoted += 1
        stats.max_in_flight = max(stats.max_in_flight, int(in_flight))
        if host.lease_ttl_s:
            g.hold_deadline = now + float(host.lease_ttl_s)
        g.ls.held[fence] = t
        self.heartbeat.ensure(g.ls)
        t.grant(now - t.entry.arrival)

    async def _unavailable(self, t: Ticket, exc: BaseException | None) -> None:
        """Redis cannot be used for this ticket: fail open (delegate to the local queue) or closed."""
        host, g = self.host, t.redis
        if exc is not None:
            host.mark_down(exc)
            if g.rid is not None:  # best effort: do not leave an entry that nobody waits for
                g.ls.spawn(self._cancel_quietly(g.ls, g.rid))
                g.rid = None
        if host.fail_mode == "closed":
            raise RedisUnavailable(host.retry_s, "redis_unavailable", host.name)
        t.mode = "local"
        host.stats.failopen += 1
        g.delegate = Ticket(host.local, t.entry)
        await g.delegate.acquire()
        t.entry.payload = t
        host.stats.dispatched += 1
        t.grant(t.entry.dispatched_at - t.entry.arrival)

    async def _cancel_quietly(self, ls: _LoopState, rid: str) -> None:
        try:
            await self.host.run(ls, "cancel", [rid])
        except Exception:  # best effort: the waiter TTL removes the entry anyway
            note_fault(log, f"cancelling a waiter on backend {self.host.name} failed; its waiter TTL cleans up",
                       level=logging.DEBUG)

    async def abandon(self, t: Ticket) -> None:
        """The waiter went away: leave the queue, or hand back a slot granted meanwhile."""
        host, g = self.host, t.redis
        ls = g.ls
        if t.state is RUNNING:
            t.release()
            if g.release_task is not None:
                await asyncio.gather(g.release_task, return_exceptions=True)
            return
        if t.state is not QUEUED:
            return
        host.stats.cancelled += 1
        t.cancel()
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
            r = await host.run(ls, "cancel", [g.rid])
            host.summary(r, 1, ls)
        except host.redis_errors as exc:  # Redis gone: the waiter TTL / lease TTL cleans up
            host.mark_down(exc)

    async def _send_release(self, t: Ticket, true_class: int, answer_tokens: float) -> None:
        host, ls = self.host, t.redis.ls
        try:
            r = await host.run(ls, "release", [t.redis.fence, true_class, answer_tokens])
            host.summary(r, 2, ls)
            host.mark_up()
        except host.redis_errors as exc:  # the lease expires by itself; the request is not affected
            host.mark_down(exc)
        except Exception:
            log.exception("Redis release failed on backend %s; the lease will expire", host.name)
