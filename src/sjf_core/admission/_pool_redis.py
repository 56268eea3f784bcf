"""The pool in Redis mode: one shared queue for several backends across proxy workers.

Contract: :class:`RedisPool` has :class:`~sjf_core.admission._pool.PoolQueue`'s ``admit``
(same arguments, same raises). The pool's queue is a
:class:`~sjf_core.admission._redis.RedisAdmissionQueue` of its own (queue key
``pool:<backend>+<backend>...``) whose capacity is the sum of the members' ``slots``
(members taken out of rotation by this process excluded): every process shares its order
(bands, tenants, the starvation guard, run by the store's Lua scripts) and its capacity
(fenced leases), and a released pool slot wakes the next waiter of any process at once
(``BLPOP``). A waiter granted a pool slot then takes a slot on a member's own Redis queue
— the backend's one ledger, shared with everything else that uses the backend: the fastest
member (by this process's measured speed) that Redis says is free, tried with a short wait;
if none is (requests outside the pool hold them), it queues on every member at once and
keeps the first slot granted. It returns a :class:`PooledTicket`:
the member's ticket, whose release also frees the pool slot. So ``slots`` per backend is never
exceeded, whatever the pools and processes.

Limits (docs/pool.md): the rule's "wait for a busy member that finishes it earlier" is in-process
only; each process learns a backend's failure from its own attempts (LiteLLM's retries
carry the request meanwhile).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any, Callable

from sjf_core.policy._placement import TIE

log = logging.getLogger("sjf_core.admission.pool")

#: how long a granted pool waiter waits for a member that looked free before trying the next, s
TRY_MEMBER_S = 0.25
#: rounds of "read which members are free, try them" before waiting on one
ROUNDS = 3


class PooledTicket:
    """A member's ticket that also holds a slot of the pool's queue; everything but
    ``release`` / ``arelease`` / ``renew`` is the member ticket's (the adapters' view)."""

    __slots__ = ("member", "pool")

    def __init__(self, member: Any, pool: Any):
        self.member = member
        self.pool = pool

    def __getattr__(self, name: str) -> Any:
        return getattr(self.member, name)

    def release(self, answer_tokens: int | None = None) -> bool:
        """Release the member's slot, then — once Redis has it back — the pool's, so that the
        waiter the pool's slot wakes finds the member free (idempotent, as each ticket's)."""
        done = self.member.release(answer_tokens)
        loop = self.member.loop
        if loop is None or loop.is_closed():
            self.pool.release(answer_tokens)
            return done
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.create_task(self._pool_after(answer_tokens))
        else:
            asyncio.run_coroutine_threadsafe(self._pool_after(answer_tokens), loop)
        return done

    async def _pool_after(self, answer_tokens: int | None) -> None:
        try:
            await self.member.arelease(answer_tokens)  # released already: waits until Redis has it
        finally:
            self.pool.release(answer_tokens)

    async def arelease(self, answer_tokens: int | None = None) -> bool:
        done = await self.member.arelease(answer_tokens)
        await self.pool.arelease(answer_tokens)
        return done

    def renew(self) -> None:
        self.member.renew()
        self.pool.renew()


class RedisPool:
    """The Redis-mode pool of ``members`` (module docstring); ``queue``: the pool's own
    :class:`~sjf_core.admission._redis.RedisAdmissionQueue`."""

    store = "redis"

    def __init__(self, name: str, queue: Any, members: list):
        self.name = name
        self.queue = queue
        self.members = list(members)
        self._turn = itertools.count()
        self.rule = None
        for m in self.members:
            m.pools.append(self)

    @property
    def waiting(self) -> int:
        """Requests waiting in the pool's shared queue (as last seen by this process)."""
        return self.queue.waiting

    @property
    def slots(self) -> int:
        return sum(m.slots for m in self.members if m.healthy)

    @property
    def in_flight(self) -> int:
        return self.queue.in_flight

    def status(self) -> dict:
        return {"name": self.name, "store": "redis", "waiting": self.waiting, "reserved": 0, "slots": self.slots,
                "in_flight": self.in_flight, "members": [m.status() for m in self.members],
                "stats": dict(vars(self.queue.stats))}

    async def view(self, limit: int = 100) -> dict:
        """The shared queue's view (:meth:`AdmissionQueue.view`; ``reserved`` is empty: the
        "wait for a faster member" rule is in-process only). Raises what redis-py raises."""
        v = dict(await self.queue.view(limit))
        v.setdefault("reserved", [])
        return v

    def observe(self, *args) -> None:
        """The shared queue keeps its own statistics in Redis."""

    def dispatch(self) -> None:
        """A member's state changed: the capacity follows (the shared queue's slots and this
        process's ledger of it); Redis grants on the next release."""
        n = max(1, self.slots)
        self.queue.slots = n
        ledger = getattr(self.queue, "ledger", None)
        if ledger is not None and ledger.slots != n:
            ledger.resize(n)

    async def admit(self, prediction: Any, meta: Any, arrival: float | None,
                    make_ticket: Callable[[str], Any], timeout: float | None = None) -> PooledTicket:
        """Wait for a pool slot in Redis, then hold a member's slot (module docstring)."""
        self.dispatch()
        pool_ticket = self.queue.ticket(prediction, meta, arrival)
        await pool_ticket.acquire(timeout)
        try:
            member_ticket = await self._member_ticket(make_ticket)
        except BaseException:
            pool_ticket.release(None)
            raise
        return PooledTicket(member_ticket, pool_ticket)

    async def _member_ticket(self, make_ticket: Callable[[str], Any]) -> Any:
        healthy = [m for m in self.members if m.healthy] or list(self.members)
        for _ in range(ROUNDS):
            free = await self._free(healthy)
            for m in free:
                t = make_ticket(m.key)
                try:
                    await t.acquire(TRY_MEMBER_S)
                    return t
                except asyncio.TimeoutError:
                    continue  # another process took it: the next one
            if not free:
                break
        return await self._first_granted([make_ticket(m.key) for m in healthy])

    @staticmethod
    async def _first_granted(tickets: list) -> Any:
        """Queue on every member at once (their slots are busy with requests outside this pool);
        keep the first slot granted, give back the others (the store frees a slot granted to
        a cancelled waiter)."""
        waits = {asyncio.ensure_future(t.acquire()): t for t in tickets}
        won, error = None, None
        try:
            while waits and won is None:
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    t = waits.pop(task)
                    if task.cancelled() or task.exception() is not None:
                        error = error or (task.exception() if not task.cancelled() else None)
                    elif won is None:
                        won = t
                    else:
                        t.release(None)
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
            for t in tickets:
                if t is not won and t.running:  # granted while the others were given up
                    t.release(None)
        if won is None:
            raise error if error is not None else asyncio.CancelledError()
        return won

    async def _loads(self, members: list) -> dict:
        """``{key: in flight + waiting}`` of each member's shared queue (unknown: 0)."""
        snaps = await asyncio.gather(*(m.queue.snapshot() for m in members), return_exceptions=True)
        return {m.key: (s["in_flight"] + s["waiting"]) for m, s in zip(members, snaps) if isinstance(s, dict)}

    async def _free(self, members: list) -> list:
        """Members with a free slot in Redis, fastest first (equals in turn)."""
        loads = await self._loads(members)
        free = [m for m in members if loads.get(m.key, m.slots) < m.slots]
        turn = next(self._turn)
        rank = {m.key: (i - turn) % max(1, len(members)) for i, m in enumerate(members)}
        known = [m.s_per_token for m in free if m.s_per_token > 0]
        fastest = min(known) if known else 0.0
        return sorted(free, key=lambda m: (m.s_per_token > fastest * (1.0 + TIE), rank[m.key]))
