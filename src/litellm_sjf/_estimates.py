"""Seconds for the operator's view: when the starvation guard promotes a waiter, and when a
waiter may expect to start.

Contract: :func:`add_estimates(doc) <add_estimates>` adds to every waiter row of a live status
document (``backends[k]["queue"]["waiters"]`` and ``pools[i]["queue"]["waiters"]``), in place:

* ``promote_in_s`` — seconds until the guard promotes it: ``due_in_s`` where the rule keeps a
  clock time; for the served-work rules (the default ``work-bound``), ``due_in_tokens`` (work
  the queue must still dispatch, in answer tokens) divided by the queue's measured throughput;
  0 once due; None when no rule will promote it or nothing has been measured yet.
* ``start_in_s`` — a rough expected start if nothing else arrives: the predicted work still to
  run ahead of it (the running requests' rest — a pool's: its members' — then the waiters due
  now, then those listed before it) over the throughput, as if the slots were one fluid server, and never later
  than its promotion plus the running requests' rest. None until a throughput is measured.

The throughput is answer tokens per second of slot time (``tokens_per_s``, measured per
backend by :class:`litellm_sjf._stats.TokenRates`) times the queue's slots; a pool's is the sum
over its healthy members. Estimates, not promises: the predictions they add up are estimates.
Never raises on a well-formed status document; a row without numbers gets None.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["add_estimates", "throughput"]


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def throughput(rates: dict, backend: str, slots: Any) -> float | None:
    """Answer tokens per second of the backend's ``slots`` together (None: not measured)."""
    rate, n = _num(rates.get(backend)), _num(slots)
    return rate * n if rate and rate > 0 and n and n > 0 else None


def _pool_throughput(rates: dict, pool: dict) -> float | None:
    total = 0.0
    for m in pool.get("members") or []:
        if m.get("healthy", True):
            total += throughput(rates, m.get("backend"), m.get("slots")) or 0.0
    return total or None


def _promote_in_s(w: dict, tps: float | None) -> float | None:
    at, work = _num(w.get("due_in_s")), _num(w.get("due_in_tokens"))
    options = [max(0.0, at)] if at is not None else []
    if work is not None and (work <= 0 or tps):
        options.append(max(0.0, work) / tps if work > 0 else 0.0)
    return min(options) if options else None


def _left(view: Any, per_slot: float) -> float:
    """Predicted answer tokens the running requests of ``view`` still have to generate."""
    left = 0.0
    for r in (view.get("running") or []) if isinstance(view, dict) else []:
        expected, ran = _num(r.get("expected_tokens")) or 0.0, _num(r.get("running_s")) or 0.0
        left += max(0.0, expected - ran * per_slot)
    return left


def _estimate(view: Any, tps: float | None, ahead: float = 0.0) -> None:
    """Fill the waiters of ``view``; ``ahead``: work before the first of them (tokens)."""
    if not isinstance(view, dict):
        return
    per_slot = tps / max(1.0, _num(view.get("slots")) or 1.0) if tps else 0.0
    ahead += _left(view, per_slot)
    first_free = ahead / tps if tps else None  # when the running requests' work is done
    waiters = view.get("waiters") or []
    for w in waiters:
        w["promote_in_s"] = _promote_in_s(w, tps)
    # the guard's due waiters go first, in the order listed; then the others
    for w in [w for w in waiters if w["promote_in_s"] == 0.0] + [w for w in waiters if w["promote_in_s"] != 0.0]:
        start = ahead / tps if tps else None
        if start is not None and w["promote_in_s"] is not None:  # promoted: it goes next
            start = min(start, w["promote_in_s"] + first_free)
        w["start_in_s"] = start
        ahead += _num(w.get("expected_tokens")) or 0.0


def add_estimates(doc: dict) -> dict:
    """See the module docstring (``doc`` changed in place and returned)."""
    rates = doc.get("tokens_per_s") or {}
    for key, b in (doc.get("backends") or {}).items():
        view = b.get("queue")
        slots = view.get("slots") if isinstance(view, dict) else b.get("slots")
        _estimate(view, throughput(rates, key, slots))
    backends = doc.get("backends") or {}
    for p in doc.get("pools") or []:
        # a pool's waiters start as its members' running requests end (one fluid queue)
        ahead = 0.0
        for m in p.get("members") or []:
            b = backends.get(m.get("backend")) or {}
            tps = throughput(rates, m.get("backend"), 1)
            ahead += _left(b.get("queue"), tps) if tps else 0.0
        _estimate(p.get("queue"), _pool_throughput(rates, p), ahead)
    return doc
