"""A read-only view of one admission queue: who holds a slot, who waits, in which order, and
when the starvation guard will promote each waiter. Numbers, classes and hashed tenant ids
only, never prompt text (DESIGN.md invariant 6).

Contract:

* ``await queue.view(limit=100) -> dict`` (:meth:`AdmissionQueue.view
  <sjf_core.admission._base.AdmissionQueue.view>`) for either store: :func:`local_view` here
  (synchronous) for the in-process queue, :func:`~sjf_core.admission._redis_view.redis_view`
  for the Redis store (it reads the hashes and sorted sets, ``HGETALL`` / ``ZRANGE``, and
  runs no script; it raises what redis-py raises when Redis is unreachable). Neither changes
  the queue; call them on the queue's event loop (the local queue is not thread-safe).
* The dict: ``store`` ("local" / "redis"), ``slots``, ``in_flight``, ``waiting``,
  ``promotion`` (the rule's name), ``served_work`` (tokens on the served-work clock, or
  None), ``running`` and ``waiters`` (lists of request views, waiters in policy order:
  band, then ordering key, then arrival; at most ``limit``), ``truncated`` (waiters left
  out). A request view: ``id`` (its number in this queue), ``request_id`` (the adapter's id
  of the request, the same in a pool and on its backend: ``RequestMeta.request_id``, or
  None), ``class`` (predicted, the most likely class: short / medium / long, or
  ``unscored``), ``expected_tokens`` (predicted, the expected mean: it can pass a class
  bound, e.g. a Short at 300 when a Long answer is possible), ``priority`` (the band), ``tenant`` (hashed id or
  None), ``waited_s``; waiters add ``due_in_tokens`` (served work still to go before the
  guard promotes it; <= 0: due now) and/or ``due_in_s`` (seconds; <= 0: due now), None when
  no rule will promote it, and ``deadline_in_s``; running ones add ``running_s`` and
  ``promoted``.
* :func:`pool_view` (``await pool.view(limit)`` of an in-process
  :class:`~sjf_core.admission._pool.PoolQueue`): the same keys for the pool's own waiters
  (``running`` is empty: what a pool hands over runs on its members' queues), and
  ``reserved``: the waiters the pool already took from its queue that wait for one member
  (one waiting for a busy member that finishes it earlier: ``for_member`` its key; None: any).
"""

from __future__ import annotations

import math
from typing import Any

from sjf_core.policy._entry import CLASS_NAMES

__all__ = ["local_view", "pool_view", "due_in", "class_name", "finite"]


def class_name(klass: Any, scored: bool = True, fallback: bool = False) -> str:
    try:
        return "unscored" if (fallback or not scored) else CLASS_NAMES[int(klass)]
    except (ValueError, IndexError, TypeError):
        return "unscored"


def finite(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _request(e: Any, now: float) -> dict:
    return {"id": e.seq, "request_id": e.request_id, "class": class_name(e.klass, e.scored, e.fallback),
            "expected_tokens": finite(e.expected_tokens), "priority": e.priority, "tenant": e.tenant,
            "waited_s": max(0.0, now - e.arrival)}


def _structures(pending: Any) -> list:
    """The pending structures holding the waiters: one, or one per tenant."""
    subs = getattr(pending, "_subs", None)
    return list(subs.values()) if isinstance(subs, dict) else [pending]


def due_in(point: dict | None, served: float, now: float) -> dict:
    work = None if point is None else point.get("work")
    at = None if point is None else point.get("time")
    return {"due_in_tokens": None if work is None else finite(work - served),
            "due_in_s": None if at is None else finite(at - now)}


def _waiters(pending: Any, now: float) -> tuple[list[dict], float | None]:
    """The live entries of ``pending`` as waiter views, in policy order, and the served work."""
    waiters: list[tuple[tuple, dict]] = []
    served = None
    for s in _structures(pending):
        strategy = getattr(s, "strategy", None)
        points = strategy.due_points() if strategy is not None else {}
        work = float(getattr(s, "served_work", 0.0))
        served = work if served is None else max(served, work)
        for e in s.live_entries():
            v = _request(e, now)
            v.update(due_in(points.get(e.seq), work, now))
            v["deadline_in_s"] = None if e.deadline is None else finite(e.deadline - now)
            waiters.append(((-e.priority, e.key, e.seq), v))
    waiters.sort(key=lambda kv: kv[0])
    return [v for _, v in waiters], served


def _promotion(q: Any) -> Any:
    return getattr(getattr(q.pending, "strategy", None), "name", None) or getattr(getattr(q, "policy", None),
                                                                                    "promotion", None)


def local_view(q: Any, now: float | None = None, limit: int = 100) -> dict:
    """The view of an in-process queue (module docstring); ``now`` on the queue's clock."""
    now = q.clock() if now is None else now
    waiters, served = _waiters(q.pending, now)
    running = []
    for t in sorted(getattr(q, "_running", ()), key=lambda t: t.entry.seq):
        e = t.entry
        v = _request(e, now)
        v["waited_s"] = finite(e.dispatched_at - e.arrival)
        v.update(running_s=finite(now - e.dispatched_at), promoted=bool(e.promoted))
        running.append(v)
    return {"store": "local", "slots": q.slots, "in_flight": q.in_flight, "waiting": q.waiting,
            "promotion": _promotion(q), "served_work": served, "running": running, "waiters": waiters[:limit],
            "truncated": max(0, len(waiters) - limit)}


def pool_view(pool: Any, now: float | None = None, limit: int = 100) -> dict:
    """The view of an in-process pool (module docstring); ``now`` on the pool's clock."""
    now = pool.clock() if now is None else now
    waiters, served = _waiters(pool.pending, now)
    reserved = []
    for r in list(pool.rule.waiting):
        v = _request(r.entry, now)
        v["for_member"] = getattr(r.target, "key", None)
        reserved.append(v)
    return {"store": "local", "slots": pool.slots, "in_flight": pool.in_flight, "waiting": pool.waiting,
            "promotion": _promotion(pool), "served_work": served, "running": [], "waiters": waiters[:limit],
            "reserved": reserved[:limit], "truncated": max(0, len(waiters) - limit)}
