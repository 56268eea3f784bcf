"""The read-only view of a Redis-backed queue (:meth:`RedisAdmissionQueue.view <sjf_core.admission._redis.RedisAdmissionQueue.view>`).

Reads what the Lua scripts keep (``docs/redis.md``), in two pipelined round trips and no
script: ``TIME``, the waiter and lease info hashes (``HGETALL``), the served-work clock, then
per priority level the work-bound due points (``<vb>:<level>``) and the time bounds
(``<bd>:<level>``, "fcfs-bound" and ``max_wait_s``) with ``ZRANGE``. Times are Redis server
time; a waiter info is ``level klass prio key arrival work owner work_tokens served_at_arrival
[tenant weight]``, a lease info ``id klass dispatched work owner [tenant weight]``. The
per-process fail-open queue, when it holds anything, is added under ``fail_open``. Raises
what redis-py raises when Redis is unreachable.
"""

from __future__ import annotations

import math
from typing import Any

from sjf_core.admission._redis_wire import _KEY_NAMES
from sjf_core.admission._view import class_name, due_in, finite, local_view
from sjf_core.policy.promotion._base import REQUEST_OVERHEAD_TOKENS

__all__ = ["redis_view"]

#: the τ-threshold rules: a waiter is due τ seconds after its arrival
_TAU_RULES = ("strict", "one-in-k")


def _expected_tokens(work_tokens: str) -> float | None:
    w = finite(work_tokens)
    return None if w is None else max(0.0, w - REQUEST_OVERHEAD_TOKENS)


def _waiter(rid: str, f: list[str], now: float, points: dict, served: float, tau_s: float, rule: str) -> dict:
    arrival = float(f[4])
    point = dict(points.get(rid, {}))
    if rule in _TAU_RULES and math.isfinite(tau_s):
        point.setdefault("time", arrival + tau_s)
    v = {"id": rid, "request_id": None, "class": class_name(f[1]), "expected_tokens": _expected_tokens(f[7]) if len(f) > 7 else None,
         "priority": int(f[2]), "tenant": f[9] if len(f) > 9 else None, "waited_s": max(0.0, now - arrival)}
    v.update(due_in(point or None, served, now))
    v["deadline_in_s"] = None  # Redis keeps the latest start time, not the deadline
    return v


def _holder(f: list[str], now: float) -> dict:
    return {"id": f[0], "request_id": None, "class": class_name(f[1]), "expected_tokens": None, "priority": None,
            "tenant": f[5] if len(f) > 5 else None, "waited_s": None,
            "running_s": max(0.0, now - float(f[2])), "promoted": None}


async def _read(q: Any) -> tuple[float, dict, dict, float, dict]:
    keys = dict(zip(_KEY_NAMES, q.keys))
    fast = q.loop_state().fast  # the store's clients on this loop
    pipe = fast.pipeline(transaction=False)
    pipe.time()
    pipe.hgetall(keys["wi"])
    pipe.hgetall(keys["li"])
    pipe.hget(keys["st"], "vw")
    (sec, usec), wi, li, vw = await pipe.execute()
    levels = sorted({info.split()[0] for info in wi.values() if info.split()})
    points: dict[str, dict[str, float]] = {}
    if levels:
        pipe = fast.pipeline(transaction=False)
        for level in levels:
            pipe.zrange(f"{keys['vb']}:{level}", 0, -1, withscores=True)
            pipe.zrange(f"{keys['bd']}:{level}", 0, -1, withscores=True)
        ranges = await pipe.execute()
        for i, rows in enumerate(ranges):
            kind = "work" if i % 2 == 0 else "time"
            for rid, score in rows:
                points.setdefault(rid, {})[kind] = float(score)
    return int(sec) + int(usec) / 1e6, wi, li, float(vw or 0.0), points


async def redis_view(q: Any, limit: int = 100) -> dict:
    """The view of a :class:`~sjf_core.admission._redis.RedisAdmissionQueue` (module docstring)."""
    now, wi, li, served, points = await _read(q)
    rule = getattr(q.policy, "promotion", None)
    rule = rule if isinstance(rule, str) else getattr(rule, "name", None)
    waiters = []
    for rid, info in wi.items():
        f = info.split()
        if len(f) >= 7:
            v = _waiter(rid, f, now, points, served, q.tau_s, rule)
            waiters.append(((-int(f[2]), float(f[3]), rid), v))
    waiters.sort(key=lambda kv: kv[0])
    running = [_holder(f, now) for f in (info.split() for info in li.values()) if len(f) >= 5]
    out = {"store": "redis", "slots": q.slots, "in_flight": len(running), "waiting": len(waiters),
           "promotion": rule, "served_work": served, "running": sorted(running, key=lambda v: v["id"]),
           "waiters": [v for _, v in waiters[:limit]], "truncated": max(0, len(waiters) - limit)}
    if q.local.waiting or q.local.in_flight:
        out["fail_open"] = local_view(q.local, limit=limit)
    return out
