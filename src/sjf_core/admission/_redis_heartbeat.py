"""The Redis store's heartbeat: one batched call renews this process's waiters and leases.

A mixin of :class:`~sjf_core.admission._redis.RedisAdmissionQueue`, one task per event loop
while the loop has waiters or holders. It renews them every third of the shorter TTL,
wakes early when a lease is due to expire (so a dead holder's slot is reaped and granted
on time), enforces the ``lease_ttl_s`` hold limit (:meth:`Ticket._expire
<sjf_core.admission._ticket.Ticket._expire>`), counts leases lost while their holder ran
and re-asserts leases after Redis lost its data.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import TYPE_CHECKING

from sjf_core.admission._redis_wire import OWNER, _LoopState

if TYPE_CHECKING:
    from sjf_core.admission._ticket import Ticket

log = logging.getLogger("sjf_core.admission._redis")


class _Heartbeat:
    """Heartbeat methods of the Redis store (see the module docstring)."""

    # ---- internals: heartbeat -------------------------------------------------------------
    def _ensure_heartbeat(self, ls: _LoopState) -> None:
        if ls.hb_task is None or ls.hb_task.done():
            ls.hb_task = ls.loop.create_task(self._heartbeat_loop(ls))

    async def _heartbeat(self, ls: _LoopState, waiters: list[str], holders: list["Ticket"]) -> list:
        """One heartbeat call; returns the waiter statuses then the holder statuses."""
        extra: list = [len(waiters), *waiters, len(holders)]
        for t in holders:
            g = t.grant
            extra += [g.fence, g.epoch, g.rid, t.entry.klass, g.dispatched_server, g.work, OWNER]
        r = await self._run(ls, "heartbeat", extra)
        self._summary(r, 0, ls)
        epoch = r[4]
        for t, st in zip(holders, r[5 + len(waiters):]):
            if st == "lost":
                if ls.held.pop(t.grant.fence, None) is not None:
                    self.stats.lost_leases += 1
                    log.warning("admission lease on backend %s expired while its request ran "
                                "(its process stalled longer than the lease TTL)", self.name)
            elif st == "re":
                t.grant.epoch = epoch
                self.stats.reasserted += 1
        return r[5:]

    async def _heartbeat_loop(self, ls: _LoopState) -> None:
        """While this process has waiters or holders: renew them every third of the shorter
        TTL in one call, and also wake when some lease is due to expire, so that a dead
        holder's slot is reaped (and granted) on time. Enforces the ``lease_ttl_s`` hold limit."""
        interval = min(self.waiter_ttl_s, self.redis_lease_ttl_s) / 3.0
        next_beat = self.clock() + interval
        try:
            while ls.waiting or ls.held:
                now = self.clock()
                ls.hb_wake_at = min(next_beat, ls.expiry_at + 0.002)
                if ls.hb_wake_at > now:
                    ls.hb_kick.clear()
                    try:
                        await asyncio.wait_for(ls.hb_kick.wait(), ls.hb_wake_at - now)
                        continue  # an earlier lease expiry became known: re-plan
                    except asyncio.TimeoutError:
                        pass
                now = self.clock()
                for t in list(ls.held.values()):
                    if t.grant.hold_deadline is not None and now >= t.grant.hold_deadline:
                        t._expire()
                ls.expiry_at = math.inf
                waiters, holders = list(ls.waiting), list(ls.held.values())
                if not (waiters or holders):
                    break
                try:
                    await self._heartbeat(ls, waiters, holders)
                    self._mark_up()
                except self._errors as exc:
                    self._mark_down(exc)
                except Exception:  # never let the heartbeat die: leases would lapse
                    log.exception("Redis heartbeat failed on backend %s", self.name)
                # while Redis is down, beat every retry_s: leases are re-asserted as soon as
                # it is back (the same time new requests start trying it again)
                next_beat = now + (min(interval, self.retry_s) if self._down else interval)
        finally:
            ls.hb_wake_at = math.inf
            if ls.hb_task is asyncio.current_task():
                ls.hb_task = None

