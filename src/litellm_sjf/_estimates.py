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

On a many-model box (``doc["boxes"]``, docs/boxes.md) a runner's waiters may also wait for the
**box's turn**: a runner whose model is not loaded on a full box starts after the loaded
runners' work (their running requests' rest and their waiters, each at its runner's speed) and
its own load (measured, else the rule's ``default_load_s``); ``start_in_s`` adds those seconds.
Where they cannot be told (a box-wide cap with other runners waiting: the turn interleaves them
in seconds; a loaded runner's speed not measured), ``start_in_s`` is None and the waiter gets
``start_after: "box turn"``.

The throughput is answer tokens per second of slot time (``tokens_per_s``, measured per
backend by :class:`litellm_sjf._stats.TokenRates`) times the queue's slots; a pool's is the sum
over its healthy members. Estimates, not promises: the predictions they add up are estimates.
Never raises on a well-formed status document; a row without numbers gets None.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["add_estimates", "throughput", "box_turn_s"]


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


def _estimate(view: Any, tps: float | None, ahead: float = 0.0, ahead_s: float | None = 0.0) -> None:
    """Fill the waiters of ``view``; ``ahead``: work before the first of them (tokens);
    ``ahead_s``: seconds of the box's turn before it (None: not known, module docstring)."""
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
        start = ahead / tps if tps else (0.0 if ahead <= 0 and ahead_s else None)
        if start is not None and w["promote_in_s"] is not None and first_free is not None:  # promoted: next
            start = min(start, w["promote_in_s"] + first_free)
        if ahead_s is None:
            start = None
            w["start_after"] = "box turn"
        elif start is not None:
            start += ahead_s
        w["start_in_s"] = start
        ahead += _num(w.get("expected_tokens")) or 0.0


def _work_s(view: Any, tps: float | None) -> float | None:
    """Seconds of a runner queue's work: its running requests' rest and its waiters (None:
    its speed is not measured and it has work)."""
    if not isinstance(view, dict):
        return 0.0
    work = _left(view, tps / max(1.0, _num(view.get("slots")) or 1.0) if tps else 0.0) \
        + sum(_num(w.get("expected_tokens")) or 0.0 for w in view.get("waiters") or [])
    if work <= 0 and not view.get("running"):
        return 0.0
    return work / tps if tps else None


def box_turn_s(doc: dict, rates: dict) -> dict:
    """``{runner queue key: seconds of the box's turn before its first waiter, or None}`` for
    the runners of a box that wait for it (module docstring); others are absent."""
    out, backends = {}, doc.get("backends") or {}
    for box in doc.get("boxes") or []:
        runners = [r for r in box.get("runners") or [] if isinstance(r, dict) and r.get("queue")]
        cap, most = box.get("cap"), box.get("max_loaded")
        full = most is not None and len(box.get("loaded") or []) >= most
        for r in runners:
            if not r.get("waiting"):
                continue
            others = [o for o in runners if o is not r]
            if cap is not None and any(o.get("waiting") for o in others):
                out[r["queue"]] = None  # the turn interleaves the runners in seconds
                continue
            if r.get("loaded") or not full:
                continue
            ahead = 0.0
            for o in others:
                if not o.get("loaded"):
                    continue
                view = (backends.get(o["queue"]) or {}).get("queue")
                tps = throughput(rates, o["queue"], o.get("slots")) or _num(o.get("tokens_per_s"))
                work = _work_s(view, tps)
                if work is None:
                    ahead = None
                    break
                ahead += work
            load = _num(r.get("load_s")) or _num(box.get("default_load_s")) or 0.0
            out[r["queue"]] = None if ahead is None else ahead + load
    return out


def add_estimates(doc: dict) -> dict:
    """See the module docstring (``doc`` changed in place and returned)."""
    rates = doc.get("tokens_per_s") or {}
    turns = box_turn_s(doc, rates)
    for key, b in (doc.get("backends") or {}).items():
        view = b.get("queue")
        slots = view.get("slots") if isinstance(view, dict) else b.get("slots")
        _estimate(view, throughput(rates, key, slots), ahead_s=turns.get(key, 0.0))
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
