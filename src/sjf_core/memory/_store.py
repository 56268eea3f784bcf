"""Where the per-key evidence lives: in this process (:class:`LocalStore`) or shared by all
workers through Redis (:class:`RedisStore`, fail-open to its local copy).

A store maps a 16-byte digest to six floats (see :mod:`sjf_core.memory._stats`) and applies
the one update the memory needs, atomically: ``new = γ · old + inc`` (:meth:`add`). It
holds digests and numbers only, never text.

Redis data model (one hash tag ``{<prefix>:mem}`` for every key, like the queue's
``{<prefix>:<backend>}``, so a cluster keeps them in one slot):

* ``{<prefix>:mem}:k:<hex digest>``: a hash with fields ``n sz sd szz szd sdd``
  (floats), updated by one Lua script (decay and add in one step), expiring
  ``ttl_s`` after its last update (default 30 days): bounded by use;
* ``{<prefix>:mem}:ring``: a stream of answered requests for the neighbour ring
  (fields ``w`` worker id, ``g`` group id, ``r`` residual, ``p`` the 32 float32 of the
  point as bytes), capped at ``MAXLEN ~ capacity``. Each worker reads what the others
  added since its last read with the same round trip as the key reads (at most 256
  entries per read: a new worker catches up on a full ring over a few dozen scorings).

Reads are synchronous (one pipelined round trip per scoring, ``op_timeout_s``); writes
go to a background thread (:meth:`RedisStore.flush` waits for them). Any Redis error marks
the store down for ``retry_s``: meanwhile reads and writes use the local copy only.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from typing import Iterable, Sequence

import numpy as np
from sjf_core.settings import MEMORY_REDIS_OP_TIMEOUT_S, MEMORY_REDIS_RETRY_S
from sjf_core._faults import note_fault

log = logging.getLogger("sjf_core.memory")

__all__ = ["LocalStore", "RedisStore", "BYTES_PER_KEY"]

#: Approximate bytes of one key in :class:`LocalStore` (digest, six floats, dict slot).
BYTES_PER_KEY = 16 + 33 + 6 * 8 + 56 + 8 + 100

_FIELDS = ("n", "sz", "sd", "szz", "szd", "sdd")
#: ring entries read per scoring round trip: a worker joining a full ring catches up over a
#: few dozen scorings instead of one slow read
_RING_BATCH = 256

_ADD_LUA = """
-- KEYS: evidence hashes; ARGV[1] gamma, ARGV[2] ttl ms, then 6 increments per key
local g = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local f = {'n', 'sz', 'sd', 'szz', 'szd', 'sdd'}
for i, k in ipairs(KEYS) do
  local old = redis.call('HMGET', k, unpack(f))
  local args = {}
  for j = 1, 6 do
    local o = tonumber(old[j]) or 0
    local v = g * o + tonumber(ARGV[2 + (i - 1) * 6 + j])
    args[#args + 1] = f[j]
    args[#args + 1] = string.format('%.17g', v)
  end
  redis.call('HSET', k, unpack(args))
  redis.call('PEXPIRE', k, ttl)
end
return #KEYS
"""


class LocalStore:
    """In-process evidence, LRU-bounded at ``max_keys`` digests. Thread-safe."""

    def __init__(self, max_keys: int = 50_000):
        self.max_keys = int(max_keys)
        self._d: OrderedDict[bytes, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._d)

    def get_many(self, digests: Sequence[bytes]) -> list[list[float] | None]:
        """Stats of each digest (a copy) or None."""
        with self._lock:
            return [list(v) if (v := self._d.get(k)) is not None else None for k in digests]

    def put(self, digest: bytes, stats: Sequence[float]) -> None:
        """Replace one digest's stats (a value read from Redis, or loaded from disk)."""
        with self._lock:
            self._d[digest] = [float(v) for v in stats]
            self._d.move_to_end(digest)
            while len(self._d) > self.max_keys:
                self._d.popitem(last=False)

    def add(self, items: Iterable[tuple[bytes, Sequence[float]]], gamma: float) -> None:
        """``stats = gamma · stats + inc`` for each ``(digest, inc)`` (missing stats are 0)."""
        with self._lock:
            for k, inc in items:
                old = self._d.get(k)
                if old is None:
                    self._d[k] = [float(v) for v in inc]
                else:
                    for j in range(6):
                        old[j] = gamma * old[j] + inc[j]
                    self._d.move_to_end(k)
            while len(self._d) > self.max_keys:
                self._d.popitem(last=False)

    def items(self) -> list[tuple[bytes, list[float]]]:
        with self._lock:
            return [(k, list(v)) for k, v in self._d.items()]


class RedisStore:
    """Evidence shared through Redis, with a :class:`LocalStore` copy for fail-open.

    Args:
        url: Redis URL.
        prefix: key prefix (the queue's ``SJF_REDIS_PREFIX``, default "sjf").
        max_keys: bound of the local copy.
        capacity: cap of the ring stream.
        ttl_s: expiry of an evidence hash after its last update (seconds).
        op_timeout_s: socket timeout of one round trip (seconds).
        retry_s: how long Redis is left alone after an error (seconds).
    """

    def __init__(self, url: str, prefix: str = "sjf", max_keys: int = 50_000, capacity: int = 10_000,
                 ttl_s: float = 30 * 86400.0, op_timeout_s: float = MEMORY_REDIS_OP_TIMEOUT_S,
                 retry_s: float = MEMORY_REDIS_RETRY_S):
        import redis

        self.local = LocalStore(max_keys)
        self.tag = "{" + f"{prefix}:mem".replace("{", "_").replace("}", "_") + "}"
        self.ring_key = f"{self.tag}:ring"
        self.capacity = int(capacity)
        self.ttl_ms = int(ttl_s * 1000)
        self.retry_s = float(retry_s)
        self.worker = f"{os.getpid()}-{id(self):x}"
        self._r = redis.Redis.from_url(url, socket_timeout=op_timeout_s, socket_connect_timeout=op_timeout_s)
        self._w = redis.Redis.from_url(url, socket_timeout=max(1.0, op_timeout_s),
                                       socket_connect_timeout=max(1.0, op_timeout_s))
        self._add = self._w.register_script(_ADD_LUA)
        self._down_until = 0.0
        self._last_id = "0-0"
        self._rlock = threading.Lock()
        self._q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self.errors = 0
        self._errors_exc = (Exception,)

    def key(self, digest: bytes) -> str:
        return f"{self.tag}:k:{digest.hex()}"

    @property
    def degraded(self) -> bool:
        """True while Redis is being left alone after an error (local evidence only)."""
        return time.monotonic() < self._down_until

    def _mark_down(self, exc: BaseException) -> None:
        self.errors += 1
        self._down_until = time.monotonic() + self.retry_s
        log.warning("length memory: Redis unavailable (%s); local evidence for %.0f s", type(exc).__name__,
                    self.retry_s)

    def __len__(self) -> int:
        return len(self.local)

    def get_many(self, digests: Sequence[bytes]) -> tuple[list[list[float] | None], list[tuple]]:
        """Stats of each digest and the ring entries other workers added since the last call.

        Returns:
            (stats list aligned with ``digests``, [(point float32 [32], group int, resid float)]).
        """
        if self.degraded:
            return self.local.get_many(digests), []
        try:
            with self._rlock:
                p = self._r.pipeline(transaction=False)
                for d in digests:
                    p.hmget(self.key(d), _FIELDS)
                p.xrange(self.ring_key, min="(" + self._last_id, count=_RING_BATCH)
                res = p.execute()
                new: list[tuple] = []
                ring = res[-1]
                if ring:
                    self._last_id = ring[-1][0].decode()
                    for _id, f in ring:
                        if f.get(b"w", b"").decode() == self.worker:
                            continue
                        new.append((np.frombuffer(f[b"p"], dtype=np.float32).copy(), int(f[b"g"]), float(f[b"r"])))
        except Exception as exc:
            self._mark_down(exc)
            return self.local.get_many(digests), []
        out: list[list[float] | None] = []
        for d, vals in zip(digests, res[:-1]):
            if vals and vals[0] is not None:
                st = [float(v) if v is not None else 0.0 for v in vals]
                self.local.put(d, st)
                out.append(st)
            else:
                out.append(None)
        return out, new

    def add(self, items: list[tuple[bytes, Sequence[float]]], gamma: float, ring_entry: tuple | None = None) -> None:
        """Apply the update locally now and in Redis from the background thread."""
        self.local.add(items, gamma)
        self._q.put((items, gamma, ring_entry))
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._writer, name="sjf-memory-writer", daemon=True)
            self._thread.start()

    def flush(self, timeout_s: float | None = 10.0) -> bool:
        """Wait until every update so far was sent (or dropped on error); True if done."""
        done = threading.Event()
        self._q.put(done)
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._writer, name="sjf-memory-writer", daemon=True)
            self._thread.start()
        return done.wait(timeout_s)

    def _writer(self) -> None:
        while True:
            try:
                job = self._q.get(timeout=30.0)
            except queue.Empty:
                return
            if isinstance(job, threading.Event):
                job.set()
                continue
            items, gamma, ring_entry = job
            if self.degraded:
                continue
            try:
                args: list = [repr(float(gamma)), self.ttl_ms]
                for _, inc in items:
                    args.extend(repr(float(v)) for v in inc)
                p = self._w.pipeline(transaction=False)
                self._add(keys=[self.key(d) for d, _ in items], args=args, client=p)
                if ring_entry is not None:
                    point, gid, resid = ring_entry
                    p.xadd(self.ring_key, {"w": self.worker, "g": str(int(gid)), "r": repr(float(resid)),
                                           "p": np.asarray(point, np.float32).tobytes()},
                           maxlen=self.capacity, approximate=True)
                p.execute()
            except Exception as exc:
                self._mark_down(exc)

    def close(self) -> None:
        self.flush(2.0)
        for c in (self._r, self._w):
            try:
                c.close()
            except Exception:  # closing only
                note_fault(log, "a length memory Redis client did not close cleanly", level=logging.DEBUG)
