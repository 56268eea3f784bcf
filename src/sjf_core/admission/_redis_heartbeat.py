"""The Redis store's heartbeat: one batched call renews this process's waiters and leases.

:class:`Heartbeat` is a collaborator of :class:`~sjf_core.admission._redis.RedisAdmissionQueue`,
given its host (:class:`~sjf_core.admission._redis_wire.RedisHost`); one task per event loop
while the loop has waiters or holders. It renews them every third of the shorter TTL,
wakes early when a lease is due to expire (so a dead holder's slot is reaped and granted
on time), enforces the ``lease_ttl_s`` hold limit (:meth:`Ticket.expire
<sjf_core.admission._ticket.Ticket.expire>`), counts leases lost while their holder ran
and re-asserts leases after Redis lost its data.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import TYPE_CHECKING

from sjf_core.admission._redis_wire import OWNER, _LoopState

if TYPE_CHECKING:
    from sjf_core.admission._redis_wire import RedisHost
    from sjf_core.admission._ticket import Ticket

log = logging.getLogger("sjf_core.admission._redis")


class Heartbeat:
    """The heartbeat of one Redis store (see the module docstring)."""

    __slots__ = ("host",)

    def __init__(self, host: "RedisHost"):
        self.host = host

    def ensure(self, ls: _LoopState) -> None:
        """Start the loop's heartbeat task unless it runs."""
        if ls.hb_task is None or ls.hb_task.done():
            ls.hb_task = ls.loop.create_task(self._run(ls))

    async def beat(self, ls: _LoopState, waiters: list[str], holders: list["Ticket"]) -> list:
        """One heartbeat call; returns the waiter statuses then the holder statuses.

        Raises:
            the host's ``redis_errors``: Redis is unreachable.
        """
        host = self.host
        extra: list = [len(waiters), *waiters, len(holders)]
        for t in holders:
            g = t.redis
            extra += [g.fence, g.epoch, g.rid, t.entry.klass, g.dispatched_server, g.work, OWNER]
        r = await host.run(ls, "heartbeat", extra)
        host.summary(r, 0, ls)
        epoch = r[4]
        for t, st in zip(holders, r[5 + len(waiters):]):
            if st == "lost":
                if ls.held.pop(t.redis.fence, None) is not None:
                    host.stats.lost_leases += 1
                    log.warning("admission lease on backend %s expired while its request ran "
                                "(its process stalled longer than the lease TTL)", host.name)
            elif st == "re":
                t.redis.epoch = epoch
                host.stats.reasserted += 1
        return r[5:]

    async def _run(self, ls: _LoopState) -> None:
        """While this process has waiters or holders: renew them every third of the shorter
        TTL in one call, and also wake when some lease is due to expire, so that a dead
        holder's slot is reaped (and granted) on time. Enforces the ``lease_ttl_s`` hold limit."""
        host = self.host
        interval = min(host.waiter_ttl_s, host.redis_lease_ttl_s) / 3.0
        next_beat = host.clock() + interval
        try:
            while ls.waiting or ls.held:
                if await self._sleep(ls, next_beat):
                    continue  # an earlier lease expiry became known: re-plan
                now = host.clock()
                for t in list(ls.held.values()):
                    if t.redis.hold_deadline is not None and now >= t.redis.hold_deadline:
                        t.expire()
                ls.expiry_at = math.inf
                waiters, holders = list(ls.waiting), list(ls.held.values())
                if not (waiters or holders):
                    break
                try:
                    await self.beat(ls, waiters, holders)
                    host.mark_up()
                except host.redis_errors as exc:
                    host.mark_down(exc)
                except Exception:  # never let the heartbeat die: leases would lapse
                    log.exception("Redis heartbeat failed on backend %s", host.name)
                # while Redis is down, beat every retry_s: leases are re-asserted as soon as
                # it is back (the same time new requests start trying it again)
                next_beat = now + (min(interval, host.retry_s) if host.degraded else interval)
        finally:
            ls.hb_wake_at = math.inf
            if ls.hb_task is asyncio.current_task():
                ls.hb_task = None

    async def _sleep(self, ls: _LoopState, next_beat: float) -> bool:
        """Sleep until the next beat or the earliest lease expiry; True when woken early by
        ``ls.hb_kick`` (an earlier expiry became known: re-plan)."""
        now = self.host.clock()
        ls.hb_wake_at = min(next_beat, ls.expiry_at + 0.002)
        if ls.hb_wake_at > now:
            ls.hb_kick.clear()
            try:
                await asyncio.wait_for(ls.hb_kick.wait(), ls.hb_wake_at - now)
                return True
            except asyncio.TimeoutError:
                pass
        return False
