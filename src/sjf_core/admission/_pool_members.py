"""The members of pools: one per backend, shared by every pool that holds it, and their health.

Contract:

* :class:`LiveMember` is a :class:`~sjf_core.policy._box.Runner` whose free slots
  are read from the backend's own admission queue and its in-process slot ledger
  (:mod:`sjf_core.admission._ledger`, shared with the last-resort gate): ``slots − units held
  or waited for − waiting there − slots handed to pool waiters not yet taken``. So a
  backend in several pools, or also used outside any pool (a request pinned to one
  deployment), never gets more than its ``slots``.
* :class:`MemberWatch` is the listener put on each member's queue: it keeps the member's
  running requests (for the rule's expected free time) and speed, feeds the pool's own
  statistics (τ, service) for requests a pool handed over, and asks every pool of the member
  to dispatch when a slot frees (on the queue's own loop, before the queue's own waiters are
  served: the member stays busy for them, ``waiting`` counts them).
* Health: :meth:`LiveMember.mark_down` takes a member out of rotation (its reservations go
  to the others) until :meth:`LiveMember.mark_up`; while down, a watch task asks
  ``health_check`` (an async callable returning True when the backend answers) every
  ``retry_s`` seconds, doubling up to :data:`MAX_RETRY_S`; without one, the member comes
  back after ``retry_s`` and the next failure takes it out again. Never raises.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any, Callable

from sjf_core._faults import note_fault
from sjf_core.admission._events import QueueEvents
from sjf_core.policy._entry import class_of_tokens
from sjf_core.policy._box import MIN_SPEED_TOKENS, Runner
from sjf_core.policy.promotion import REQUEST_OVERHEAD_TOKENS

log = logging.getLogger("sjf_core.admission.pool")

#: first wait before a down member is checked again, seconds (LiteLLM's default cooldown is 5 s)
DOWN_RETRY_S = 1.0
#: longest wait between two health checks of a down member, seconds
MAX_RETRY_S = 10.0


class LiveMember(Runner):
    """One backend of one or more pools (module docstring). ``queue``: its admission queue."""

    def __init__(self, key: str, queue: Any, clock: Callable[[], float] = time.monotonic):
        super().__init__(key, slots=queue.slots)
        self.queue = queue
        self.clock = clock
        self.handoffs = 0  # slots handed to pool waiters that have not taken their ticket yet
        self.pools: list = []
        self.health_check: Callable[[], Any] | None = None
        self.down_reason = ""
        self.failures = 0
        self.watch: MemberWatch | None = None  # its queue's listener (PoolRegistry.member)
        self.ledger_wake: Any = None  # its ledger's watcher (PoolRegistry.member)
        self.live_box: Any = None  # its LiveBox when it is a model runner of a many-model box
        self._recovery: asyncio.Task | None = None

    @property
    def busy_elsewhere(self) -> int:
        """Slots of its ledger held by paths the watch does not see (the last-resort gate)."""
        ledger = getattr(self.queue, "ledger", None) if hasattr(self, "queue") else None
        return max(0, ledger.used - len(self.running)) if ledger is not None else 0

    @busy_elsewhere.setter
    def busy_elsewhere(self, value: int) -> None:
        pass  # read from the ledger

    def free(self) -> int:
        if not self.healthy:
            return 0
        q = self.queue
        ledger = getattr(q, "ledger", None)  # the backend's in-process slot ledger (every path's units)
        used = q.in_flight if ledger is None else max(q.in_flight, ledger.used + ledger.waiting)
        return max(0, q.slots - used - q.waiting - self.handoffs)

    def wake_pools(self) -> None:
        """Every pool of this member dispatches (a slot may be free)."""
        for pool in list(self.pools):
            pool.dispatch()

    # ---- health -------------------------------------------------------------------------
    def mark_down(self, reason: str) -> None:
        """Out of rotation until a health check passes (module docstring)."""
        self.failures += 1
        if self.healthy:
            self.healthy = False
            self.down_reason = reason
            log.warning("pool member %s taken out of rotation (%s)", self.key, reason)
        if self._recovery is None or self._recovery.done():
            try:
                self._recovery = asyncio.get_running_loop().create_task(self._recover())
            except RuntimeError:  # no loop: it comes back at the next mark_up
                self._recovery = None
        self.wake_pools()

    def mark_up(self) -> None:
        """Back in rotation (a request it served, or a passed health check)."""
        self.failures = 0
        if not self.healthy:
            self.healthy = True
            self.down_reason = ""
            log.warning("pool member %s back in rotation", self.key)
            self.wake_pools()

    async def _recover(self) -> None:
        delay = DOWN_RETRY_S
        while not self.healthy:
            await asyncio.sleep(delay)
            if self.health_check is None:
                ok = True
            else:
                try:
                    ok = bool(await self.health_check())
                except Exception:
                    note_fault(log, f"pool member health check failed; {self.key} stays out of rotation", level=logging.DEBUG)
                    ok = False
            if ok:
                self.mark_up()
                return
            delay = min(MAX_RETRY_S, delay * 2)

    def status(self) -> dict:
        """What status pages show of this member (numbers only)."""
        tps = self.tokens_per_s
        return {"backend": self.key, "healthy": self.healthy, "down_reason": self.down_reason, "slots": self.slots,
                "in_flight": self.queue.in_flight, "waiting_outside_pool": self.queue.waiting,
                "tokens_per_s": None if math.isnan(tps) else round(tps, 1), "served": self.served}


class MemberWatch(QueueEvents):
    """The listener on a member's queue (module docstring)."""

    def __init__(self, member: LiveMember):
        self.member = member
        self.linked: dict = {}  # the member queue's entry -> (pool, the pool's entry)
        self.loading: dict = {}  # entries whose start loaded the runner's model

    def on_dispatch(self, queue, entry, wait_s: float) -> None:
        m = self.member
        now = m.clock()
        load_s = 0.0
        if m.box is not None and m.box.start(m, now):  # its model was not loaded: this start loads it
            load_s = m.load_s if m.load_s > 0 else (m.live_box.rule.default_load_s if m.live_box else 0.0)
            self.loading[entry] = True
            if m.live_box is not None:
                m.live_box.refresh(m.model)  # does the box load it, or wait for room?
        m.running[entry] = (now, m.expected_s(entry) + load_s)

    def on_complete(self, queue, entry, service_s: float, answer_tokens: int | None) -> None:
        m = self.member
        m.running.pop(entry, None)
        load_s = 0.0
        loaded = self.loading.pop(entry, False)
        if answer_tokens is not None and m.s_per_token > 0 and (loaded or m.live_box is not None):
            # what the answer took beyond its generation at the runner's measured speed: a load
            # when the start loaded the model, or (on a box) when it is far beyond: a load the
            # tracking did not see (another worker's, an eviction): never the speed's
            extra = service_s - (answer_tokens + REQUEST_OVERHEAD_TOKENS) * m.s_per_token
            if loaded or (answer_tokens >= MIN_SPEED_TOKENS and extra > max(1.0, 2.0 * (service_s - extra))):
                load_s = max(0.0, extra)
                m.observe_load(load_s)
                loaded = True
        m.observe(answer_tokens, service_s, load_s)
        if m.box is not None:
            m.box.touch(m, m.clock())
        if not m.running:
            m.idle_since = m.clock()
        if m.live_box is not None:
            if loaded or not (m.live_box.fit_known or m.live_box.listed_all):
                # what the box holds now (and what fits): after a load; and while what fits is
                # unknown on a box not seen holding all its models, after each answer, for the
                # tracking (every model started counts as loaded) may miss the box's swaps
                m.live_box.refresh()
            if m.live_box.shared is not None:
                m.live_box.shared.note_runner(m.key, m.s_per_token, m.load_s, m.clock())
            m.live_box.wake_all(but=m)
        link = self.linked.pop(entry, None)
        if link is not None:
            pool, pool_entry = link
            true_class = class_of_tokens(answer_tokens) if answer_tokens is not None and answer_tokens >= 0 else None
            pool.observe(pool_entry, service_s, true_class, answer_tokens)
        self._soon()

    def on_cancel(self, queue, entry) -> None:
        self.linked.pop(entry, None)
        self._soon()  # one waiter fewer there: a slot may be the pools' again
        if self.member.live_box is not None:
            self.member.live_box.wake_all(but=self.member)

    def _soon(self) -> None:
        """Wake the pools once the queue has finished this event (its unit back in the
        ledger, its own waiters served first)."""
        try:
            asyncio.get_running_loop().call_soon(self.member.wake_pools)
        except RuntimeError:
            self.member.wake_pools()


class _LedgerWake:
    """Watches a member's slot ledger for the pools: a unit freed by another path (the
    last-resort gate) wakes them (the ledger's watcher protocol: ``loop``, ``wake()``)."""

    def __init__(self, member: LiveMember):
        self.member = member
        self.loop: asyncio.AbstractEventLoop | None = None

    def wake(self) -> None:
        self.member.wake_pools()


class PoolRegistry:
    """The pools and members of one scheduler: one :class:`LiveMember` per backend key, one
    :class:`~sjf_core.admission._pool.PoolQueue` per set of backend keys.

    Args:
        queue: ``queue(key) -> AdmissionQueue`` (the scheduler's, made on first use).
        policy: ``() -> Policy`` for a new pool. fairness: the scheduler's Fairness.
        redis: True in Redis mode: pools are :class:`~sjf_core.admission._pool_redis.RedisPool`
            over a shared queue ``queue("pool:<keys>")``.
    """

    def __init__(self, queue: Callable[[str], Any], policy: Callable[[], Any], fairness: Any = None,
                 redis: bool = False):
        self._queue = queue
        self._policy = policy
        self._fairness = fairness
        self.redis = redis
        self.members: dict[str, LiveMember] = {}
        self.pools: dict[frozenset, Any] = {}

    @classmethod
    def of(cls, scheduler: Any) -> "PoolRegistry":
        """The registry of a :class:`~sjf_core._scheduler.Scheduler` (set as its ``pools``)."""
        reg = scheduler.pools = cls(scheduler.queue, scheduler.make_policy, scheduler.config.fairness,
                                    bool(scheduler.config.redis_url))
        return reg

    def member(self, key: str) -> LiveMember:
        """The member of backend ``key`` (its queue gets the watch listener once)."""
        m = self.members.get(key)
        if m is None:
            q = self._queue(key)
            m = self.members[key] = LiveMember(key, q)
            m.watch = MemberWatch(m)
            q.listeners.append(m.watch)
            ledger = getattr(q, "ledger", None)
            if ledger is not None and hasattr(ledger, "watch"):
                m.ledger_wake = _LedgerWake(m)
                ledger.watch(m.ledger_wake)
        return m

    def pool(self, keys) -> Any:
        """The pool of the backends ``keys`` (made on first use; the same set, the same pool)."""
        ids = frozenset(keys)
        p = self.pools.get(ids)
        if p is None:
            ordered = sorted(ids)
            name, members = "+".join(ordered), [self.member(k) for k in ordered]
            if self.redis:
                from sjf_core.admission._pool_redis import RedisPool

                p = RedisPool(name, self._queue("pool:" + name), members)
                p.dispatch()
            else:
                from sjf_core.admission._pool import PoolQueue

                p = PoolQueue(name, members, self._policy(), self._fairness)
            self.pools[ids] = p
        return p

    def status(self) -> list[dict]:
        """Every pool's :meth:`~sjf_core.admission._pool.PoolQueue.status`."""
        return [p.status() for p in list(self.pools.values())]
