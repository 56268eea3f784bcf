"""The Redis admission store: one shared admission queue per backend across processes and hosts.

A LiteLLM proxy with ``--num_workers N``, or several replicas, loads the callback once per
process; with in-process queues a serial backend then gets up to N requests at once and
SJF order is lost. :class:`RedisAdmissionQueue` keeps the queue in Redis instead, behind the
interface of :class:`sjf_core.admission._local.AdmissionQueue` (``.ticket(prediction, meta,
arrival)`` → ticket with ``await acquire(timeout)``, idempotent ``release(answer_tokens)``,
``renew()``, ``async with``; ``in_flight``, ``waiting``, ``stats``, listeners), driven by the
same :class:`~sjf_core.policy._policies.Policy` objects.

Data model (server-side Lua scripts in ``sjf_core/admission/lua/``, run through redis-py's
``register_script``; every key of a backend shares the hash tag ``{<prefix>:<backend>}``, so
one backend lives in one Redis Cluster slot):

* waiting tickets: a sorted set per priority level scored by the policy key, members are
  ticket ids from a monotonic counter (``INCR``), so equal keys are served in arrival
  order; a second sorted set by arrival time (server ``TIME``) finds the oldest waiter for
  τ in O(log n) (DESIGN.md invariant 4);
* slots: leases in a sorted set scored by expiry (server time). Each grant gets a fresh
  fencing token (``INCR``); only the holder of that token can free the lease, so a stale
  holder whose lease expired never frees someone else's slot. The holder's process renews
  its leases every ``redis_lease_ttl_s / 3`` s in one batched call; if the process dies,
  the slot comes back at most ``redis_lease_ttl_s`` later (reaped by any live process);
* wake-ups: each waiter blocks in ``BLPOP`` on its own list, into which the dispatching
  script pushes the grant in the same atomic step that grants it. Nothing polls. A grant
  is state (the ``held`` hash), the list element only a signal, so a wake-up that crosses a
  cancellation is never lost: the cancel script frees a slot granted meanwhile;
* dead waiters: waiters are kept alive by the same batched heartbeat; a waiter whose
  process died is removed ``waiter_ttl_s`` later by the next script that runs;
* τ: the mean Short service time (EWMA, as :class:`~sjf_core.policy._tau.TauEstimator`) lives in
  Redis and is measured on Redis server time, so clock skew between hosts does not matter.
  The dispatch rule mirrors :class:`~sjf_core.policy._pending.HeapPending`: due deadlines (latest
  start time, EDF), then the promotion rule (any of :data:`SUPPORTED_PROMOTIONS`: "work-bound"
  (the default), "work-aging", "fcfs-bound", "strict", "one-in-k", "aging", with ``max_wait_s``;
  every rule of :mod:`sjf_core.policy.promotion` but "aged-sjf"; their state, e.g. the
  served-work clock of "work-bound", kept in Redis), then priority, key, arrival. The service
  statistics behind expected service times (deadlines, FCFS bounds; as
  :class:`~sjf_core.policy._service.ServiceStats`) are kept in Redis too, fed by every process.

When Redis is unreachable (connection refused, timeout, a restart that lost the data):

* ``fail_mode="open"`` (default): requests are admitted through a per-process
  :class:`AdmissionQueue` with the same slots and policy (so with N processes the backend
  may see up to N × slots requests until Redis is back); waiters blocked on Redis move to
  it at once, keeping their arrival time;
* ``fail_mode="closed"``: new and waiting requests fail with :class:`RedisUnavailable`
  (an :class:`~sjf_core._errors.AdmissionRejected`, i.e. HTTP 429 with ``Retry-After``
  through the LiteLLM plugin).

Either way each transition (down, back up) is logged once per backend, and a request
already admitted is never failed: its release is best-effort and its lease expires. While
down, new tickets go straight to the fallback for ``retry_s`` seconds before Redis is tried
again. After a restart that lost the data, running tickets re-assert their leases at the
next heartbeat (every ``retry_s`` while Redis is down), so the slot bound holds again.

All processes sharing a backend must use the same slots, policy and TTL settings.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import socket
import threading
import time
import weakref
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable

from sjf_core.admission._local import AdmissionQueue, QueueEvents, QueueStats, Ticket
from sjf_core.policy._entry import class_of_tokens
from sjf_core._errors import AdmissionRejected, Superseded
from sjf_core.policy._pending import REQUEST_OVERHEAD_TOKENS, TOKEN_KEY_SPAN, HeapPending
from sjf_core.policy.promotion import WIRE_DEFAULTS
from sjf_core.policy._policies import Policy, RequestMeta, make_policy
from sjf_core.predict._prediction import Prediction
from sjf_core.admission._ticket import TicketState as S, TicketView

log = logging.getLogger("sjf_core.admission._redis")

#: Promotion rules the server-side dispatcher implements (see :mod:`sjf_core.policy.promotion`).
SUPPORTED_PROMOTIONS = ("strict", "one-in-k", "aging", "fcfs-bound", "work-aging", "work-bound")
_SCRIPTS = ("enqueue", "heartbeat", "release", "cancel", "stats")
_KEY_NAMES = ("seq", "fence", "lv", "age", "alive", "wi", "held", "leases", "li", "st", "epoch", "dl", "bd", "vb")
FAIL_MODES = ("open", "closed")
#: This process as an owner of queue entries and leases in Redis: "<pid>@<host>".
OWNER = f"{os.getpid()}@{re.sub(r'[^A-Za-z0-9._-]', '_', socket.gethostname())}"
_COUNTERS = ("enqueued", "dispatched", "promoted", "released", "cancelled", "expired_leases",
             "expired_waiters", "reasserted", "completed_short", "aging_rebuilds")


class RedisUnavailable(AdmissionRejected):
    """Fail-closed mode: Redis cannot be reached, so the request is refused before admission.

    Adapters map it like any :class:`AdmissionRejected` (HTTP 429 + ``Retry-After``).
    """


@dataclass
class RedisQueueStats(QueueStats):
    """Counters of this process's tickets on one Redis-backed queue.

    Extra attributes: ``failopen`` (tickets admitted through the per-process fallback
    queue), ``lost_leases`` (leases found expired while their holder still ran),
    ``reasserted`` (leases re-created after Redis lost its data), ``reenqueued``
    (waiters re-enqueued after Redis forgot them), ``redis_errors``.
    """

    failopen: int = 0
    lost_leases: int = 0
    reasserted: int = 0
    reenqueued: int = 0
    redis_errors: int = 0


def _load_lua() -> dict[str, str]:
    pkg = resources.files("sjf_core.admission") / "lua"
    lib = (pkg / "lib.lua").read_text(encoding="utf-8")
    return {name: lib + "\n" + (pkg / f"{name}.lua").read_text(encoding="utf-8") for name in _SCRIPTS}


_LUA: dict[str, str] | None = None


def lua_sources() -> dict[str, str]:
    """The full source of each server-side script (prelude + body), by name."""
    global _LUA
    if _LUA is None:
        _LUA = _load_lua()
    return _LUA


def hash_tag(prefix: str, backend: str) -> str:
    """The key prefix of one backend: ``{<prefix>:<backend>}`` (braces inside are replaced)."""
    safe = re.sub(r"[{}\s]", "_", f"{prefix}:{backend}")
    return "{" + safe + "}"


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis.exceptions as rex

    # RedisError covers connection loss, timeouts, BUSY/LOADING after a restart and
    # script faults; OSError covers socket errors raised before redis-py wraps them.
    return (rex.RedisError, OSError)


class _LoopState:
    """Clients, scripts and this process's live tickets, for one event loop."""

    def __init__(self, store: "RedisAdmissionQueue", loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.fast, self.blocking = store._make_clients()
        self.scripts = {name: self.fast.register_script(src) for name, src in lua_sources().items()}
        self.waiting: dict[str, RedisTicket] = {}
        self.held: dict[str, RedisTicket] = {}
        self.hb_task: asyncio.Task | None = None
        self.hb_kick = asyncio.Event()
        self.hb_wake_at = math.inf  # local clock (s) of the heartbeat's next planned wake
        self.expiry_at = math.inf  # local clock (s) of the earliest lease expiry last seen
        self.tasks: set[asyncio.Task] = set()

    def spawn(self, coro) -> asyncio.Task:
        t = self.loop.create_task(coro)
        self.tasks.add(t)
        t.add_done_callback(self._done)
        return t

    def _done(self, t: asyncio.Task) -> None:
        self.tasks.discard(t)
        if not t.cancelled():
            t.exception()  # retrieved: an abandoned wait's error is not an error


class RedisAdmissionQueue:
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
            :class:`AdmissionQueue`: a ticket neither released nor :meth:`RedisTicket.renew`-ed
            within it is force-released (safety net for lost release hooks).
        redis_lease_ttl_s: lease time-to-live in Redis (s). The holder's process renews it
            every third of it; a crashed holder's slot returns at most this long after its
            last renewal.
        waiter_ttl_s: liveness time-to-live of a queued ticket (s), renewed likewise; a dead
            waiter is removed at most this long after its process died.
        fail_mode: "open" (fall back to a per-process queue) or "closed" (raise
            :class:`RedisUnavailable`) when Redis is unreachable.
        prefix: first part of every key (default "sjf").
        op_timeout_s: socket timeout of non-blocking Redis calls (s).
        retry_s: while Redis is marked down, new tickets skip it for this long (s).
        listeners: :class:`~sjf_core.admission._local.QueueEvents` notified of this process's
            ticket events (``queue`` is this object).
        clock: local monotonic clock (s), for waits and hold limits.
        local_options: extra keyword arguments of the per-process fail-open
            :class:`AdmissionQueue` (e.g. ``overload``, ``rate_limit``: in Redis mode these
            apply only while failing open; they are not shared across processes).

    Raises:
        ValueError: bad slots, fail_mode or TTLs, or a policy the store cannot run.
    """

    store = "redis"

    def __init__(
        self,
        redis: Any,
        slots: int = 1,
        policy: Policy | str = "sjf",
        name: str = "default",
        lease_ttl_s: float | None = None,
        *,
        redis_lease_ttl_s: float = 10.0,
        waiter_ttl_s: float = 10.0,
        fail_mode: str = "open",
        prefix: str = "sjf",
        op_timeout_s: float = 2.0,
        retry_s: float = 1.0,
        listeners: list[QueueEvents] | None = None,
        clock: Callable[[], float] = time.monotonic,
        local_options: dict[str, Any] | None = None,
        fairness: Any = None,
    ):
        if int(slots) < 1:
            raise ValueError(f"slots must be >= 1, got {slots!r}")
        if fail_mode not in FAIL_MODES:
            raise ValueError(f"fail_mode must be one of {FAIL_MODES}, got {fail_mode!r}")
        if not (redis_lease_ttl_s > 0 and waiter_ttl_s > 0 and op_timeout_s > 0 and retry_s >= 0):
            raise ValueError("redis_lease_ttl_s, waiter_ttl_s and op_timeout_s must be > 0, retry_s >= 0")
        self.slots = int(slots)
        self.policy = make_policy(policy)
        self._policy_args = policy_server_args(self.policy)
        from sjf_core.policy._tenants import Fairness

        #: fair shares across tenants, kept in Redis (tenant queues and service counts)
        self.fairness = Fairness.parse(fairness if fairness is not None else "off")
        self.name = name
        self.lease_ttl_s = lease_ttl_s
        self.redis_lease_ttl_s = float(redis_lease_ttl_s)
        self.waiter_ttl_s = float(waiter_ttl_s)
        self.fail_mode = fail_mode
        self.prefix = prefix
        self.op_timeout_s = float(op_timeout_s)
        self.retry_s = float(retry_s)
        self.clock = clock
        self.listeners: list[QueueEvents] = list(listeners or [])
        self._redis = redis
        self.tag = hash_tag(prefix, name)
        self.keys = [f"{self.tag}:{k}" for k in _KEY_NAMES]
        self.stats = RedisQueueStats()
        # The per-process fallback (fail-open) and the source of Entry objects, so that keys,
        # classes and the unscored fallback are computed exactly as in-process.
        self.local = AdmissionQueue(self.slots, self.policy, name, lease_ttl_s, clock, **dict(local_options or {}))
        self._loops: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._down = False
        self._retry_at = 0.0
        self._in_flight = 0
        self._waiting = 0
        self._tau_s = self.local.tau_s  # the configured initial τ, until Redis reports
        self._errors = _redis_errors()

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
        ls = self._state()
        r = await self._run(ls, "stats", [])
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
    def ticket(
        self,
        prediction: Prediction | None = None,
        meta: RequestMeta | None = None,
        arrival: float | None = None,
    ) -> "RedisTicket":
        """Make a ticket for one request (it waits only once acquired).

        Args: as :meth:`AdmissionQueue.ticket` (``arrival`` on this queue's local clock;
        it is sent to Redis as an age, so the hosts' clocks need not agree).
        """
        return RedisTicket(self, self.local.ticket(prediction, meta, arrival))

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
            except Exception:
                pass

    # ---- internals: connections and scripts -----------------------------------------
    def _make_clients(self):
        import redis.asyncio as ra
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        if not isinstance(self._redis, str):
            return self._redis, self._redis
        # No automatic retries: a retried enqueue could run twice. Stale pooled connections
        # (after a Redis restart) are replaced by the pool's health check at checkout.
        # client name "sjf-<pid>": CLIENT LIST shows which processes share the queue
        common = dict(decode_responses=True, socket_connect_timeout=self.op_timeout_s, retry=Retry(NoBackoff(), 0),
                      client_name=f"sjf-{os.getpid()}")
        fast = ra.Redis.from_url(self._redis, socket_timeout=self.op_timeout_s, **common)
        blocking = ra.Redis.from_url(self._redis, socket_timeout=self.waiter_ttl_s + self.op_timeout_s + 5.0, **common)
        return fast, blocking

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        ls = self._loops.get(loop)
        if ls is None:
            ls = _LoopState(self, loop)
            self._loops[loop] = ls
        return ls

    def _args(self, extra: list) -> list:
        a = self._policy_args
        return [self.tag, self.slots, a.tau_mode, a.tau_value, a.initial_short_s, a.alpha, a.k,
                self.waiter_ttl_s, self.redis_lease_ttl_s, a.promotion, a.key_span, a.horizon, a.slack, a.floor,
                *a.service_seeds, a.service_alpha, a.slowdown, a.work_slack,
                "" if a.max_wait_s is None else a.max_wait_s, REQUEST_OVERHEAD_TOKENS, TOKEN_KEY_SPAN, *extra]

    async def _run(self, ls: _LoopState, name: str, extra: list) -> list:
        return await ls.scripts[name](keys=self.keys, args=self._args(extra))

    def _summary(self, r: list, at: int, ls: _LoopState | None = None) -> None:
        """Record (in_flight, waiting, tau, next lease expiry) from a script reply. If a lease
        expires before the heartbeat's next wake, wake it then (to reap a dead holder on time)."""
        self._in_flight, self._waiting = int(r[at]), int(r[at + 1])
        self._tau_s = float(r[at + 2])
        if r[at + 3] != "" and ls is not None:
            ls.expiry_at = self.clock() + float(r[at + 3])
            if ls.hb_task is not None and ls.expiry_at < ls.hb_wake_at:
                ls.hb_kick.set()

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
    def _should_try_redis(self) -> bool:
        return not self._down or self.clock() >= self._retry_at

    def _mark_down(self, exc: BaseException) -> None:
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

    def _mark_up(self) -> None:
        with self._lock:
            if not self._down:
                return
            self._down = False
        log.warning("Redis admission store reachable again for backend %s; shared queue resumed", self.name)

    # ---- internals: events --------------------------------------------------------------
    def _emit(self, name: str, *args) -> None:
        for listener in self.listeners:
            try:
                getattr(listener, name)(self, *args)
            except Exception:  # a listener must never break admission
                log.exception("queue listener %s.%s failed", type(listener).__name__, name)

    # ---- internals: heartbeat -------------------------------------------------------------
    def _ensure_heartbeat(self, ls: _LoopState) -> None:
        if ls.hb_task is None or ls.hb_task.done():
            ls.hb_task = ls.loop.create_task(self._heartbeat_loop(ls))

    async def _heartbeat(self, ls: _LoopState, waiters: list[str], holders: list["RedisTicket"]) -> list:
        """One heartbeat call; returns the waiter statuses then the holder statuses."""
        extra: list = [len(waiters), *waiters, len(holders)]
        for t in holders:
            extra += [t.fence, t.epoch, t.rid, t.entry.klass, t.dispatched_server, t.work, OWNER]
        r = await self._run(ls, "heartbeat", extra)
        self._summary(r, 0, ls)
        epoch = r[4]
        for t, st in zip(holders, r[5 + len(waiters):]):
            if st == "lost":
                if ls.held.pop(t.fence, None) is not None:
                    self.stats.lost_leases += 1
                    log.warning("admission lease on backend %s expired while its request ran "
                                "(its process stalled longer than the lease TTL)", self.name)
            elif st == "re":
                t.epoch = epoch
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
                    if t._hold_deadline is not None and now >= t._hold_deadline:
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


@dataclass(frozen=True)
class ServerPolicy:
    """What the server-side dispatcher needs from a policy: its τ setting, the service seeds of
    its pending structure, and the promotion fields of ``strategy.wire()``.

    Attributes:
        tau_mode: "off", "seconds" or "multiple" (:class:`~sjf_core.policy._tau.TauConfig`).
        tau_value: τ in seconds, or the multiple of the mean Short service time.
        initial_short_s: seed of the mean Short service time (s).
        alpha: EWMA weight of each completed Short request.
        k: promotion k (1 for "strict").
        promotion: one of :data:`SUPPORTED_PROMOTIONS`.
        key_span: key distance between a typical Short and Long (aging scale).
        horizon: aging horizon in multiples of τ.
        slack, floor: "fcfs-bound" parameters.
        service_seeds: seeds of the mean service seconds of Short, Medium, Long
            (:class:`~sjf_core.policy._service.ServiceStats`, paper Table 1 scaled).
        service_alpha: EWMA weight of the service statistics.
        slowdown, work_slack: "work-aging" / "work-bound" parameters.
        max_wait_s: absolute wait bound (s) or None.
    """

    tau_mode: str
    tau_value: float
    initial_short_s: float
    alpha: float
    k: int
    promotion: str
    key_span: float
    horizon: float
    slack: float
    floor: float
    service_seeds: tuple = (2.0, 8.5, 30.1)
    service_alpha: float = 0.1
    slowdown: float = 8.0
    work_slack: float = 0.2
    max_wait_s: float | None = None


def policy_server_args(policy: Policy) -> ServerPolicy:
    """The server-side parameters of a policy: its τ setting and service seeds, and its
    promotion strategy as the strategy serialises itself (``strategy.wire()``).

    Raises:
        ValueError: the policy's pending structure is not a
            :class:`~sjf_core.policy._pending.HeapPending` with a promotion rule in
            :data:`SUPPORTED_PROMOTIONS` (e.g. the DRR ``fair`` policy, "aged-sjf").
    """
    pending = policy.new_pending()
    strategy = getattr(pending, "strategy", None)
    wire = dict(WIRE_DEFAULTS, **strategy.wire()) if strategy is not None else {}
    promotion = wire.get("promotion")
    if type(pending) is not HeapPending or promotion not in SUPPORTED_PROMOTIONS:
        raise ValueError(
            f"the Redis store cannot run policy {getattr(policy, 'name', policy)!r} "
            f"({type(pending).__name__}, promotion {promotion!r}); it runs key-ordered "
            f"policies (HeapPending) with promotion in {SUPPORTED_PROMOTIONS}"
        )
    c = pending.tau.config
    value = c.multiple if c.mode == "multiple" else (c.seconds if c.mode == "seconds" else 0.0)
    return ServerPolicy(
        tau_mode=c.mode, tau_value=float(value), initial_short_s=float(c.initial_short_service_s),
        alpha=float(c.ewma_alpha), service_seeds=tuple(repr(float(x)) for x in pending.service.by_predicted),
        service_alpha=float(pending.service.alpha), **{f: wire[f] for f in WIRE_DEFAULTS},
    )


#: Options of the Redis store (the ``redis`` settings map; ``SJF_REDIS_*`` in :mod:`sjf_core.config`).
_OPTION_NAMES = {"fail_mode", "redis_lease_ttl_s", "waiter_ttl_s", "prefix", "op_timeout_s", "retry_s"}


def redis_config(url: Any = None, options: Any = None, policy: Policy | None = None) -> tuple[str | None, dict[str, Any]]:
    """Check the Redis settings of a :class:`~sjf_core._scheduler.Scheduler` (reads no environment).

    Args:
        url: a Redis URL; None, "" or False disables Redis.
        options: store options (see :class:`RedisAdmissionQueue`: ``fail_mode``,
            ``redis_lease_ttl_s``, ``waiter_ttl_s``, ``prefix``, ``op_timeout_s``, ``retry_s``).
        policy: the policy, checked with :func:`policy_server_args` when Redis is on.

    Returns:
        (url or None, options dict).

    Raises:
        ValueError: unknown option, bad value, or a policy the store cannot run.
    """
    if not url:
        return None, {}
    opts = dict(options or {})
    unknown = set(opts) - _OPTION_NAMES
    if unknown:
        raise ValueError(f"unknown Redis options {sorted(unknown)}; known: {sorted(_OPTION_NAMES)}")
    if opts.get("fail_mode", "open") not in FAIL_MODES:
        raise ValueError(f"fail_mode must be one of {FAIL_MODES}, got {opts['fail_mode']!r}")
    if policy is not None:
        policy_server_args(policy)
    return str(url), opts


class RedisTicket(TicketView):
    """One request's admission on a :class:`RedisAdmissionQueue` (same API as :class:`Ticket`).

    States: "new" → "queued" → "running" → "released"; or "queued" → "cancelled".
    ``mode`` is "redis" (admitted through the shared queue) or "local" (fail-open).
    """

    def __init__(self, queue: RedisAdmissionQueue, local: Ticket):
        self.queue = queue
        self.entry = local.entry
        self._local = local
        self.state = S.NEW
        self.mode: str | None = None
        self.rid: str | None = None
        self.epoch: str | None = None
        self.fence: str | None = None
        self.dispatched_server: str | None = None
        self.server_arrival: str | None = None
        self.work = "0"
        self._ls: _LoopState | None = None
        self._lock = threading.Lock()
        self._hold_deadline: float | None = None
        self._enqueue_task: asyncio.Task | None = None
        self._acq_task: asyncio.Task | None = None
        self._release_task: asyncio.Task | None = None

    @property
    def wait_s(self) -> float:
        """Seconds spent queued (NaN until dispatched)."""
        return self.entry.dispatched_at - self.entry.arrival

    # ---- acquire ---------------------------------------------------------------------
    async def acquire(self, timeout: float | None = None) -> None:
        """Wait for a slot.

        Args:
            timeout: seconds to wait at most, or None.

        Raises:
            asyncio.TimeoutError: the timeout expired while queued (the ticket left the queue).
            asyncio.CancelledError: the caller was cancelled while queued (it left the queue).
            RedisUnavailable: fail-closed mode and Redis cannot be reached.
            RuntimeError: the ticket was already used.
        """
        if self.state != S.NEW:
            raise RuntimeError(f"ticket already {self.state}")
        self.state = S.QUEUED
        self._ls = self.queue._state()
        # A task of its own, so that release() while queued can cancel the wait.
        self._acq_task = self._ls.loop.create_task(self._acquire())
        try:
            if timeout is None:
                await self._acq_task
            else:
                await asyncio.wait_for(self._acq_task, timeout)
        except BaseException:
            cleanup = self._ls.spawn(self._abandon())
            try:
                await asyncio.shield(cleanup)
            except BaseException:
                pass
            raise

    async def _acquire(self) -> None:
        q, ls = self.queue, self._ls
        q.stats.enqueued += 1
        if self.entry.fallback:
            q.stats.fallback += 1
        q._emit("on_enqueue", self.entry)
        if not q._should_try_redis():
            return await self._unavailable(None)
        while True:
            age = max(0.0, q.clock() - self.entry.arrival)
            prio = max(-(10**9), min(10**9, int(self.entry.priority)))
            args = [repr(float(self.entry.key)), prio, int(self.entry.klass), f"{age:.6f}",
                    q._deadline_in(self.entry), q._tokens(self.entry), OWNER, *q._tenant_args(self.entry),
                    q._supersede_arg(self.entry)]
            self._enqueue_task = ls.spawn(q._run(ls, "enqueue", args))
            try:
                r = await asyncio.shield(self._enqueue_task)
            except q._errors as exc:
                return await self._unavailable(exc)
            q._mark_up()
            self.rid, self.epoch, self.server_arrival = r[0], r[1], r[2]
            q._summary(r, 4, ls)
            if r[3]:
                self._granted(r[3])
                return
            ls.waiting[self.rid] = self
            q._ensure_heartbeat(ls)
            try:
                status = await self._wait_for_grant()
            except q._errors as exc:
                ls.waiting.pop(self.rid, None)
                return await self._unavailable(exc)
            if status == "granted":
                return
            if status == "superseded":
                ls.waiting.pop(self.rid, None)
                q.stats.superseded += 1
                q._emit("on_cancel", self.entry)
                self.state = S.SUPERSEDED
                raise Superseded(q.name)
            # Redis no longer knows this waiter (its data was lost, or the heartbeat came
            # too late): enqueue again with the original arrival.
            ls.waiting.pop(self.rid, None)
            q.stats.reenqueued += 1
            self.rid = None

    async def _wait_for_grant(self) -> str:
        q, ls = self.queue, self._ls
        wake = f"{q.tag}:w:{self.rid}"
        while True:
            # Shielded: a cancelled caller leaves at once, without cancelling redis-py in
            # the middle of a blocking read; the cancel script then unblocks this BLPOP.
            item = await asyncio.shield(ls.spawn(ls.blocking.blpop([wake], timeout=q.waiter_ttl_s)))
            if item is not None:
                value = item[1]
                if value in ("gone", "superseded"):
                    return value
                ls.waiting.pop(self.rid, None)
                self._granted(value)
                return "granted"
            # No signal for a while: ask (also renews this waiter).
            statuses = await q._heartbeat(ls, [self.rid], [])
            if statuses and statuses[0] == "gone":
                # the script pushed "gone" to the wake list: consume it
                await ls.fast.delete(wake)
                return "gone"
            if statuses and statuses[0] == "superseded":
                await ls.fast.delete(wake)
                return "superseded"

    def _granted(self, signal: str) -> None:
        q = self.queue
        fence, dispatched, promoted, in_flight, *rest = signal.split()
        self.fence, self.dispatched_server = fence, dispatched
        self.work = rest[0] if rest else "0"
        self.mode = "redis"
        now = q.clock()
        self.entry.dispatched_at = now
        self.entry.promoted = promoted == "1"
        self.state = S.RUNNING
        q.stats.dispatched += 1
        if self.entry.promoted:
            q.stats.promoted += 1
        q.stats.max_in_flight = max(q.stats.max_in_flight, int(in_flight))
        if q.lease_ttl_s:
            self._hold_deadline = now + float(q.lease_ttl_s)
        self._ls.held[fence] = self
        q._ensure_heartbeat(self._ls)
        q._emit("on_dispatch", self.entry, now - self.entry.arrival)

    async def _unavailable(self, exc: BaseException | None) -> None:
        """Redis cannot be used for this ticket: fail open (per-process queue) or closed."""
        q, ls = self.queue, self._ls
        if exc is not None:
            q._mark_down(exc)
            if self.rid is not None:  # best effort: do not leave an entry that nobody waits for
                ls.spawn(self._cancel_quietly(self.rid))
                self.rid = None
        if q.fail_mode == "closed":
            raise RedisUnavailable(q.retry_s, "redis_unavailable", q.name)
        self.mode = "local"
        q.stats.failopen += 1
        await self._local.acquire()
        self.state = S.RUNNING
        q.stats.dispatched += 1
        q._emit("on_dispatch", self.entry, self.entry.dispatched_at - self.entry.arrival)

    async def _cancel_quietly(self, rid: str) -> None:
        try:
            await self.queue._run(self._ls, "cancel", [rid])
        except Exception:
            pass

    async def _abandon(self) -> None:
        """The waiter went away: leave the queue, or hand back a slot granted meanwhile."""
        q, ls = self.queue, self._ls
        if self.state == S.RUNNING:
            self.release()
            if self._release_task is not None:
                await asyncio.gather(self._release_task, return_exceptions=True)
            return
        if self.state != S.QUEUED:
            return
        self.state = S.CANCELLED
        q.stats.cancelled += 1
        q._emit("on_cancel", self.entry)
        if self.mode == "local":
            # the local ticket left its queue itself; it may hold a slot granted meanwhile
            if self._local.state == S.RUNNING:
                self._local.release()
            return
        t = self._enqueue_task
        if t is not None and not t.done():
            await asyncio.gather(t, return_exceptions=True)
        if t is not None and self.rid is None and t.done() and not t.cancelled() and t.exception() is None:
            self.rid = t.result()[0]
        if self.rid is None:
            return
        ls.waiting.pop(self.rid, None)
        try:
            r = await q._run(ls, "cancel", [self.rid])
            q._summary(r, 1, ls)
        except q._errors as exc:  # Redis gone: the waiter TTL / lease TTL cleans up
            q._mark_down(exc)

    # ---- release -----------------------------------------------------------------------
    def release(self, answer_tokens: int | None = None) -> bool:
        """Give the slot back (idempotent, thread-safe, never raises).

        Args:
            answer_tokens: the true answer length when known (from ``usage``); its class
                feeds the τ estimate (mean Short service time, in Redis).

        Returns:
            True if this call released a held slot; False if it was already released, or
            if the ticket was still queued (it is then withdrawn from the queue).
        """
        with self._lock:
            if self.state == S.QUEUED:
                if self._acq_task is not None:  # acquire() then raises CancelledError and leaves
                    self._in_loop(self._acq_task.cancel)
                return False
            if self.state != S.RUNNING:
                return False
            self.state = S.RELEASED
        self._in_loop(self._finish, answer_tokens, False)
        return True

    async def arelease(self, answer_tokens: int | None = None) -> bool:
        """:meth:`release`, then wait until Redis has processed it (or failed)."""
        done = self.release(answer_tokens)
        await asyncio.sleep(0)
        t = self._release_task
        if t is not None:
            await asyncio.gather(asyncio.shield(t), return_exceptions=True)
        return done

    def renew(self) -> None:
        """Restart the hold limit ``lease_ttl_s`` (call during long streams). The Redis
        lease itself is renewed automatically while this process lives."""
        if self.state == S.RUNNING:
            if self.mode == "local":
                self._local.renew()
            elif self.queue.lease_ttl_s:
                self._hold_deadline = self.queue.clock() + float(self.queue.lease_ttl_s)

    def _in_loop(self, fn, *args) -> None:
        loop = self._ls.loop if self._ls is not None else None
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop or loop.is_closed():
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    def _finish(self, answer_tokens: int | None, expired: bool) -> None:
        q = self.queue
        q.stats.released += 1
        if expired:
            q.stats.expired += 1
        service_s = q.clock() - self.entry.dispatched_at
        q._emit("on_complete", self.entry, service_s, answer_tokens)
        if self.mode == "local":
            self._local.release(answer_tokens)
            return
        q._observe(self.entry, service_s, answer_tokens)
        ls = self._ls
        ls.held.pop(self.fence, None)
        true_class = -1
        if answer_tokens is not None:
            try:
                if answer_tokens >= 0:
                    true_class = class_of_tokens(answer_tokens)
            except TypeError:
                pass
        tokens = answer_tokens if isinstance(answer_tokens, (int, float)) and answer_tokens > 0 else -1
        self._release_task = ls.spawn(self._send_release(true_class, tokens))

    async def _send_release(self, true_class: int, answer_tokens: float) -> None:
        q, ls = self.queue, self._ls
        try:
            r = await q._run(ls, "release", [self.fence, true_class, answer_tokens])
            q._summary(r, 2, ls)
            q._mark_up()
        except q._errors as exc:  # the lease expires by itself; the request is not affected
            q._mark_down(exc)
        except Exception:
            log.exception("Redis release failed on backend %s; the lease will expire", q.name)

    def _expire(self) -> None:
        with self._lock:
            if self.state != S.RUNNING:
                return
            self.state = S.RELEASED
        log.warning("admission lease expired on backend %s; slot force-released", self.queue.name)
        self._finish(None, True)

    async def __aenter__(self) -> "RedisTicket":
        await self.acquire()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.arelease()


__all__ = ["RedisAdmissionQueue", "RedisTicket", "RedisUnavailable", "RedisQueueStats", "policy_server_args",
           "redis_config", "ServerPolicy",
           "hash_tag", "lua_sources", "SUPPORTED_PROMOTIONS", "FAIL_MODES"]
