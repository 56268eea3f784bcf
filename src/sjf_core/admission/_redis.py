"""The Redis admission store: one shared admission queue per backend across processes and hosts.

A LiteLLM proxy with ``--num_workers N``, or several replicas, loads the callback once per
process; with in-process queues a serial backend then gets up to N requests at once and SJF
order is lost. :class:`RedisAdmissionQueue` keeps the queue in Redis instead. It implements
the :class:`~sjf_core.admission._base.AdmissionQueue` contract with the same
:class:`~sjf_core.admission._ticket.Ticket` lifecycle as the local queue and the same
:class:`~sjf_core.policy._policies.Policy` objects; only the grant differs. Two collaborators,
given this store as their host (:class:`~sjf_core.admission._redis_wire.RedisHost`): the grant
path (:class:`~sjf_core.admission._redis_grant.RedisGrants`: enqueue script, ``BLPOP``,
release script) and the heartbeat (:class:`~sjf_core.admission._redis_heartbeat.Heartbeat`:
renews waiters and leases in one batched call); scripts, keys and clients are in
:mod:`sjf_core.admission._redis_wire`, settings in :mod:`sjf_core.admission._redis_config`.
The data model (sorted sets, fenced leases, wake lists, τ and service statistics kept on
Redis server time) is described in ``docs/redis.md``.

When Redis is unreachable: ``fail_mode="open"`` (default) delegates new and waiting tickets
to a per-process :class:`~sjf_core.admission._local.LocalAdmissionQueue` with the same slots
and policy (so with N processes the backend may see up to N × slots requests until Redis
is back; waiters keep their arrival); ``fail_mode="closed"`` raises :class:`RedisUnavailable`
(an :class:`~sjf_core._errors.AdmissionRejected`, HTTP 429 through the plugin). A request
already admitted is never failed: its release is best-effort and its lease expires. While
down, new tickets skip Redis for ``retry_s``; after a restart that lost the data, running
tickets re-assert their leases at the next heartbeat. All processes sharing a backend must
use the same slots, policy and TTL settings.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from typing import Any, Callable

from sjf_core._faults import note_fault
from sjf_core.admission._base import AdmissionQueue
from sjf_core.admission._events import QueueEvents
from sjf_core.admission._local import LocalAdmissionQueue
from sjf_core.admission._redis_config import SUPPORTED_PROMOTIONS, ServerPolicy, check_runnable, policy_server_args
from sjf_core.admission._redis_view import redis_view
from sjf_core.admission._redis_grant import RedisGrant, RedisGrants
from sjf_core.admission._redis_heartbeat import Heartbeat
from sjf_core.admission._redis_wire import (_COUNTERS, _KEY_NAMES, OWNER, RedisQueueStats,
                                            RedisUnavailable, _LoopState, hash_tag, lua_sources, redis_errors)
from sjf_core.admission._ticket import Ticket
from sjf_core.policy._entry import class_of_tokens
from sjf_core.settings import DEFAULT_POLICY, FAIL_MODES, RedisSettings
from sjf_core.policy._pending import REQUEST_OVERHEAD_TOKENS, TOKEN_KEY_SPAN, HeapPending
from sjf_core.policy._policies import Policy
from sjf_core.settings import Fairness

log = logging.getLogger("sjf_core.admission._redis")

class RedisAdmissionQueue(AdmissionQueue):
    """Admission queue of one backend, shared through Redis by every process that uses it.

    Args:
        redis: a Redis URL (``redis://host:port/db``, ``rediss://``, ``unix://``) or a
            ``redis.asyncio.Redis`` client (then used for blocking waits too: give it
            ``socket_timeout=None`` or more than ``waiter_ttl_s``).
        slots: maximum concurrent admissions across all processes (>= 1).
        policy: a :class:`~sjf_core.policy._policies.Policy` or its name; its pending structure
            must be a :class:`~sjf_core.policy._pending.HeapPending` (fcfs, sjf, sjf-tokens,
            oracle) with a promotion rule in :data:`SUPPORTED_PROMOTIONS` (all but "aged-sjf").
        name: the backend key (a base URL); part of the Redis keys, never prompt text.
        lease_ttl_s: optional hold limit (s) of a running ticket in a live process, as in
            :class:`~sjf_core.admission._local.LocalAdmissionQueue`: a ticket neither released nor ``renew()``-ed
            within it is force-released (safety net for lost release hooks).
        options: the store's :class:`~sjf_core.settings.RedisSettings` (TTLs, fail mode, key
            prefix, timeouts; checked when made; default: their defaults).
        listeners: :class:`~sjf_core.admission._events.QueueEvents` notified of this process's
            ticket events (``queue`` is this object).
        clock: local monotonic clock (s), for waits and hold limits.
        overload, rate_limit: the door of the per-process fail-open queue (in Redis mode they
            apply only while failing open; they are not shared across processes).
        fairness: fair shares across tenants, kept in Redis (a Fairness or its spec).

    Raises:
        ValueError: bad slots, or a policy the store cannot run.
    """

    store = "redis"
    #: the backend's in-process :class:`~sjf_core.admission._ledger.SlotLedger` (or None)
    ledger = None

    def __init__(self, redis: Any, slots: int = 1, policy: Policy | str = DEFAULT_POLICY, name: str = "default",
                 lease_ttl_s: float | None = None, *, options: RedisSettings | None = None,
                 listeners: list[QueueEvents] | None = None, clock: Callable[[], float] = time.monotonic,
                 overload: Any = None, rate_limit: Any = None, fairness: Any = None):
        o = self.options = options if options is not None else RedisSettings()
        self.redis_lease_ttl_s, self.waiter_ttl_s, self.fail_mode = o.redis_lease_ttl_s, o.waiter_ttl_s, o.fail_mode
        self.prefix, self.op_timeout_s, self.retry_s = o.prefix, o.op_timeout_s, o.retry_s
        self.clock = clock
        self.listeners: list[QueueEvents] = list(listeners or [])
        self.name = name
        self.lease_ttl_s = lease_ttl_s
        # The per-process fallback (fail-open) and the source of Entry objects, so that keys,
        # classes and the unscored fallback are computed exactly as in-process.
        self.local = LocalAdmissionQueue(slots, policy, name, lease_ttl_s, clock, overload=overload,
                                         rate_limit=rate_limit)
        self.slots, self.policy = self.local.slots, self.local.policy
        pending = self.local.pending  # the server reads the policy from this queue's own strategy
        self._policy_args = policy_server_args(self.policy, pending if type(pending) is HeapPending else None)
        #: fair shares across tenants, kept in Redis (tenant queues and service counts)
        self.fairness = Fairness.parse(fairness if fairness is not None else "off")
        self._redis = redis
        self.tag = hash_tag(self.prefix, name)
        self.keys = [f"{self.tag}:{k}" for k in _KEY_NAMES]
        self.stats = RedisQueueStats()
        self._loops: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._down, self._retry_at = False, 0.0
        self._in_flight = self._waiting = 0
        self._tau_s = self.local.tau_s  # the configured initial τ, until Redis reports
        self.redis_errors = redis_errors()  # the exception types that mean "Redis is unusable"
        self.heartbeat = Heartbeat(self)  # renews this process's waiters and leases
        self.grants = RedisGrants(self, self.heartbeat)  # enqueue, BLPOP, release

    # ---- introspection -------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        """Slots in use across all processes, as last seen by this process, plus this
        process's fail-open tickets. Use :meth:`snapshot` for a fresh value."""
        return self._in_flight + self.local.in_flight

    @property
    def waiting(self) -> int:
        """Waiters across all processes, as last seen by this process, plus this
        process's fail-open waiters."""
        return self._waiting + self.local.waiting

    @property
    def tau_s(self) -> float:
        """τ in seconds as last computed by Redis (inf when off; the initial τ before the
        first call)."""
        return self._tau_s

    async def view(self, limit: int = 100) -> dict:
        """Who runs and who waits, read from Redis across all processes (:meth:`AdmissionQueue.view`;
        :func:`sjf_core.admission._redis_view.redis_view`). Raises what redis-py raises when
        Redis is unreachable."""
        return await redis_view(self, limit)

    @property
    def degraded(self) -> bool:
        """True while Redis is marked unreachable (fail-open or fail-closed in effect)."""
        return self._down

    async def snapshot(self) -> dict[str, Any]:
        """Read the shared state from Redis (after reaping the dead and dispatching).

        Returns:
            dict with ``in_flight`` and ``waiting`` (int, all processes), ``tau_s`` (float,
            s; inf when off), ``mean_short_service_s`` (float, s), ``epoch`` (str),
            ``service_s_by_class`` (mean service s per predicted class, shared by all
            processes), ``service_s_per_token`` (NaN until known), ``holders`` (list of
            {owner, held_s, klass}), ``waiting_by_owner`` ({owner: count}; an owner is
            "<pid>@<host>") and the server-side counters (int): enqueued, dispatched, promoted, released,
            cancelled, expired_leases, expired_waiters, reasserted, completed_short,
            aging_rebuilds.

        Raises:
            redis.exceptions.RedisError: Redis is unreachable.
        """
        ls = self.loop_state()
        r = await self.run(ls, "stats", [])
        out: dict[str, Any] = {
            "in_flight": int(r[0]), "waiting": int(r[1]), "tau_s": float(r[2]),
            "epoch": r[4], "mean_short_service_s": float(r[5]),
        }
        fields = dict(zip(r[6::2], r[7::2]))
        for k in _COUNTERS:
            out[k] = int(fields.get(k, 0))
        seeds = self._policy_args.service_seeds
        out["service_s_by_class"] = [float(fields.get(f"sp{c}", seeds[c])) for c in range(3)]
        out["service_s_per_token"] = float(fields.get("spt", "nan"))
        # who holds and who waits (read-only; the owner of an entry is "<pid>@<host>")
        pipe = ls.fast.pipeline(transaction=False)
        pipe.time()
        pipe.hvals(self.keys[_KEY_NAMES.index("li")])
        pipe.hvals(self.keys[_KEY_NAMES.index("wi")])
        (sec, usec), leases, waiters = await pipe.execute()
        now = int(sec) + int(usec) / 1e6
        out["holders"] = []
        for info in leases:
            f = info.split()
            if len(f) >= 5:
                out["holders"].append({"owner": f[4], "held_s": now - float(f[2]), "klass": int(f[1])})
        by_owner: dict[str, int] = {}
        for info in waiters:
            f = info.split()
            if len(f) >= 7:
                by_owner[f[6]] = by_owner.get(f[6], 0) + 1
        out["waiting_by_owner"] = by_owner
        return out

    # ---- tickets ---------------------------------------------------------------------
    def _scores_at_door(self) -> bool:
        return True  # the server orders by the key: it is needed at the enqueue

    def _new_ticket(self, prediction, meta, arrival, scorer) -> Ticket:
        # ``arrival`` is on this process's clock; it is sent to Redis as an age, so the
        # hosts' clocks need not agree
        return Ticket(self, self.local.make_entry(prediction, meta, arrival))

    async def aclose(self) -> None:
        """Close this process's Redis connections for the running loop (tickets still
        held keep their leases until they expire)."""
        loop = asyncio.get_running_loop()
        ls = self._loops.pop(loop, None)
        if ls is None:
            return
        if ls.hb_task is not None:
            ls.hb_task.cancel()
            await asyncio.gather(ls.hb_task, return_exceptions=True)
        for c in {id(ls.fast): ls.fast, id(ls.blocking): ls.blocking}.values():
            try:
                await c.aclose()
            except Exception:  # closing only: nothing depends on it
                note_fault(log, f"a Redis client of backend {self.name} did not close cleanly", level=logging.DEBUG)

    # ---- what the grant path and the heartbeat use (RedisHost) ----------------------------
    def loop_state(self) -> _LoopState:
        """The running loop's clients, scripts and live tickets (made on first use)."""
        loop = asyncio.get_running_loop()
        ls = self._loops.get(loop)
        if ls is None:
            ls = _LoopState(self._redis, self.op_timeout_s, self.waiter_ttl_s, loop)
            self._loops[loop] = ls
        return ls

    def _args(self, extra: list) -> list:
        a = self._policy_args
        return [self.tag, self.slots, a.tau_mode, a.tau_value, a.initial_short_s, a.alpha, a.k,
                self.waiter_ttl_s, self.redis_lease_ttl_s, a.promotion, a.key_span, a.horizon, a.slack, a.floor,
                *a.service_seeds, a.service_alpha, a.slowdown, a.work_slack,
                "" if a.max_wait_s is None else a.max_wait_s, REQUEST_OVERHEAD_TOKENS, TOKEN_KEY_SPAN, *extra]

    async def run(self, ls: _LoopState, name: str, extra: list) -> list:
        """Run script ``name`` with this queue's keys and arguments, then ``extra``; its reply."""
        return await ls.scripts[name](keys=self.keys, args=self._args(extra))

    def summary(self, r: list, at: int, ls: _LoopState | None = None) -> None:
        """Record (in_flight, waiting, tau, next lease expiry) from a script reply. If a lease
        expires before the heartbeat's next wake, wake it then (to reap a dead holder on time)."""
        self._in_flight, self._waiting = int(r[at]), int(r[at + 1])
        self._tau_s = float(r[at + 2])
        if r[at + 3] != "" and ls is not None:
            ls.expiry_at = self.clock() + float(r[at + 3])
            if ls.hb_task is not None and ls.expiry_at < ls.hb_wake_at:
                ls.hb_kick.set()

    # ---- the contract: free a slot ------------------------------------------------------
    def _free(self, t: Ticket, answer_tokens: int | None, expired: bool) -> float:
        self.stats.released += 1
        if expired:
            self.stats.expired += 1
        service_s = self.clock() - t.entry.dispatched_at
        if t.mode != "local":
            self._observe(t.entry, service_s, answer_tokens)
        self.grants.release(t, answer_tokens)
        return service_s

    def _observe(self, entry, service_s: float, answer_tokens) -> None:
        """Feed this process's service statistics (deadlines, fail-open queue)."""
        true_class = None
        try:
            if answer_tokens is not None and answer_tokens >= 0:
                true_class = class_of_tokens(answer_tokens)
        except TypeError:
            answer_tokens = None
        try:
            self.local.pending.observe(entry, service_s, true_class, answer_tokens)
        except Exception:
            log.exception("policy observe failed")

    # ---- internals: availability --------------------------------------------------------
    def should_try_redis(self) -> bool:
        """False while Redis is marked down and ``retry_s`` has not passed."""
        return not self._down or self.clock() >= self._retry_at

    def mark_down(self, exc: BaseException) -> None:
        """A Redis call failed: count it, and on the first failure log the fail mode in effect."""
        self.stats.redis_errors += 1
        with self._lock:
            self._retry_at = self.clock() + self.retry_s
            if self._down:
                return
            self._down = True
        if self.fail_mode == "open":
            what = "fail-open: admitting through the per-process queue"
        else:
            what = "fail-closed: refusing new requests"
        log.warning("Redis admission store unreachable for backend %s (%s); %s", self.name, type(exc).__name__, what)

    def mark_up(self) -> None:
        """A Redis call succeeded: log the recovery once."""
        with self._lock:
            if not self._down:
                return
            self._down = False
        log.warning("Redis admission store reachable again for backend %s; shared queue resumed", self.name)


__all__ = ["RedisAdmissionQueue", "RedisGrant", "RedisGrants", "Heartbeat", "RedisUnavailable", "RedisQueueStats",
           "policy_server_args", "check_runnable", "RedisSettings", "ServerPolicy", "OWNER",
           "hash_tag", "lua_sources", "SUPPORTED_PROMOTIONS", "FAIL_MODES"]
