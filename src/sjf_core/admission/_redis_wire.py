"""Redis store plumbing: key names, server-side scripts, clients and per-loop state.

The Lua scripts live in ``sjf_core/admission/lua/`` (a shared prelude ``lib.lua`` +
``dispatch.lua``, then one body per script), run through redis-py's ``register_script``. Every key of a backend shares
the hash tag ``{<prefix>:<backend>}`` (:func:`hash_tag`), so one backend lives in one Redis
Cluster slot. :data:`OWNER` ("<pid>@<host>") names this process in Redis entries (never
prompt text). The data model is described in ``docs/redis.md`` ("How it works").
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import socket
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Callable, Protocol

from sjf_core._errors import AdmissionRejected
from sjf_core.admission._events import QueueStats

if TYPE_CHECKING:
    from sjf_core.admission._local import LocalAdmissionQueue
    from sjf_core.admission._ticket import Ticket
    from sjf_core.settings import Fairness

_SCRIPTS = ("enqueue", "heartbeat", "release", "cancel", "stats")
#: The shared prelude of every script, in order: keys, arguments and helpers; the dispatch rule.
_PRELUDE = ("lib", "dispatch")
_KEY_NAMES = ("seq", "fence", "lv", "age", "alive", "wi", "held", "leases", "li", "st", "epoch", "dl", "bd", "vb")
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
    prelude = "\n".join((pkg / f"{part}.lua").read_text(encoding="utf-8") for part in _PRELUDE)
    return {name: prelude + "\n" + (pkg / f"{name}.lua").read_text(encoding="utf-8") for name in _SCRIPTS}


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


def redis_errors() -> tuple[type[BaseException], ...]:
    import redis.exceptions as rex

    # RedisError covers connection loss, timeouts, BUSY/LOADING after a restart and
    # script faults; OSError covers socket errors raised before redis-py wraps them.
    return (rex.RedisError, OSError)



def make_clients(redis: Any, op_timeout_s: float, waiter_ttl_s: float):
    """``(fast, blocking)`` redis-py asyncio clients for a URL (a client object is used for both)."""
    import redis.asyncio as ra
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    if not isinstance(redis, str):
        return redis, redis
    # No automatic retries: a retried enqueue could run twice. Stale pooled connections
    # (after a Redis restart) are replaced by the pool's health check at checkout.
    # client name "sjf-<pid>": CLIENT LIST shows which processes share the queue
    common = dict(decode_responses=True, socket_connect_timeout=op_timeout_s, retry=Retry(NoBackoff(), 0),
                  client_name=f"sjf-{os.getpid()}")
    fast = ra.Redis.from_url(redis, socket_timeout=op_timeout_s, **common)
    blocking = ra.Redis.from_url(redis, socket_timeout=waiter_ttl_s + op_timeout_s + 5.0, **common)
    return fast, blocking


class _LoopState:
    """Clients, scripts and this process's live tickets, for one event loop.

    Args:
        redis: a Redis URL or client (:func:`make_clients`). op_timeout_s, waiter_ttl_s: the
            store's timeouts (s). loop: the event loop.
    """

    def __init__(self, redis: Any, op_timeout_s: float, waiter_ttl_s: float, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.fast, self.blocking = make_clients(redis, op_timeout_s, waiter_ttl_s)
        self.scripts = {name: self.fast.register_script(src) for name, src in lua_sources().items()}
        self.waiting: dict[str, "Ticket"] = {}
        self.held: dict[str, "Ticket"] = {}
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



class RedisHost(Protocol):
    """What the Redis store's collaborators (its grant path and heartbeat) use of it.

    Attributes: ``name`` (backend key), ``tag`` (key prefix), ``stats``, ``clock``,
    ``lease_ttl_s`` (hold limit or None), ``waiter_ttl_s`` / ``redis_lease_ttl_s`` /
    ``retry_s`` (s), ``fail_mode``, ``fairness``, ``local`` (the fail-open queue),
    ``redis_errors`` (the exception types that mean "Redis unusable"), ``degraded``,
    ``ledger`` (the backend's in-process :class:`~sjf_core.admission._ledger.SlotLedger`, or None).
    """

    name: str
    tag: str
    stats: RedisQueueStats
    clock: Callable[[], float]
    lease_ttl_s: float | None
    waiter_ttl_s: float
    redis_lease_ttl_s: float
    retry_s: float
    fail_mode: str
    fairness: "Fairness"
    local: "LocalAdmissionQueue"
    redis_errors: tuple[type[BaseException], ...]
    degraded: bool
    ledger: Any

    def loop_state(self) -> _LoopState:
        """The running loop's clients, scripts and live tickets."""

    async def run(self, ls: _LoopState, name: str, extra: list) -> list:
        """Run script ``name`` with the queue's arguments and ``extra``; its reply."""

    def summary(self, r: list, at: int, ls: _LoopState | None = None) -> None:
        """Record the in-flight / waiting / τ / next-expiry summary at ``r[at:]``."""

    def should_try_redis(self) -> bool:
        """False while Redis is marked down and the retry time has not come."""

    def mark_up(self) -> None:
        """A Redis call succeeded."""

    def mark_down(self, exc: BaseException) -> None:
        """A Redis call failed with ``exc`` (one of ``redis_errors``)."""
