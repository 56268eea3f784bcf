"""Measuring a pool of serial backends behind one model group (``benchmarks/pool_bench.py``).

Contract: pure functions over what the client recorded (:class:`~sjf_lab.bench.stats.RequestRecord`)
and what each emulator recorded (``stats()["order"]``: per request ``hash``, ``t_in``,
``t_start``, ``t_out``, all on the machine's monotonic clock). No I/O, no prompt text.

* :func:`starts_by_job` — when and where each job started: the last emulator record whose
  prompt hash is the job's (a job retried after a backend died counts where it was served).
* :func:`idle_while_waiting` — per backend, the seconds after ``t0`` during which it held no
  user request while some job of the burst had been submitted and had not yet started
  anywhere: the figure of issue 22 ("backend idle while a request waited"). With
  ``handoffs=False`` the backend's own hand-offs do not count: the gap between the end of
  one of its requests and the start of its next one when that next one was already
  waiting (the proxy's per-request latency: the response's end reaching the proxy, the
  slot's release, the next request's trip through LiteLLM), so what remains is idle time
  with no request on its way to that backend — the cost of queues that are not
  work-conserving. :func:`handoff_gaps` lists those gaps.
* :func:`pool_row` — one row of the pool table: short P50/P95, long P95 (end to end from
  ``t0``), served per backend, idle while waiting, max in flight per backend, failures.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from sjf_lab.bench.stats import RequestRecord, summarize
from sjf_lab.bench.workload import Job
from sjf_lab.emulator import short_hash


def starts_by_job(jobs: Sequence[Job], orders: Sequence[Sequence[Mapping]]) -> dict[int, tuple[int, float]]:
    """``{job idx: (backend index, t_start)}`` for every job some backend started."""
    by_hash = {short_hash(j.prompt): j.idx for j in jobs}
    out: dict[int, tuple[int, float]] = {}
    for b, order in enumerate(orders):
        for rec in order:
            idx = by_hash.get(rec.get("hash"))
            if idx is None or rec.get("probe") or rec.get("t_start") is None:
                continue
            prev = out.get(idx)
            if prev is None or float(rec["t_start"]) > prev[1]:
                out[idx] = (b, float(rec["t_start"]))
    return out


def _served(order: Sequence[Mapping]) -> list[Mapping]:
    return sorted((r for r in order if not r.get("probe") and r.get("t_start") is not None),
                  key=lambda r: float(r["t_start"]))


def handoff_gaps(order: Sequence[Mapping], t0: float) -> list[tuple[float, float]]:
    """``(end, next start)`` of each hand-off of one backend after ``t0``: a request ended and
    the next one it served started later (every request of a held burst waits from ``t0``)."""
    rs = _served(order)
    out = []
    for a, n in zip(rs, rs[1:]):
        end = float(a.get("t_out", math.inf))
        if t0 <= end < float(n["t_start"]):
            out.append((end, float(n["t_start"])))
    return out


def _busy(order: Sequence[Mapping], t0: float, t_end: float, handoffs: bool = True) -> list[tuple[float, float]]:
    spans = [(max(t0, float(r["t_start"])), min(t_end, float(r.get("t_out", t_end)))) for r in _served(order)]
    if not handoffs:
        spans += [(a, min(b, t_end)) for a, b in handoff_gaps(order, t0)]
    spans.sort()
    merged: list[tuple[float, float]] = []
    for a, b in spans:
        if b <= a:
            continue
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _waiting(jobs: Sequence[Job], records: Sequence[RequestRecord], starts: Mapping, t0: float) -> list:
    spans = []
    for r in records:
        s = starts.get(r.idx)
        end = s[1] if s is not None else (r.end if math.isfinite(r.end) else None)
        if end is not None and end > max(t0, r.submit):
            spans.append((max(t0, r.submit), end))
    return sorted(spans)


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Seconds covered by both interval lists (``a`` merged, ``b`` any)."""
    total = 0.0
    for x0, x1 in a:
        for y0, y1 in b:
            lo, hi = max(x0, y0), min(x1, y1)
            if hi > lo:
                total += hi - lo
    return total


def _merge(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def idle_while_waiting(jobs: Sequence[Job], records: Sequence[RequestRecord],
                       orders: Sequence[Sequence[Mapping]], t0: float,
                       alive_until: Sequence[float] | None = None, handoffs: bool = True) -> list[float]:
    """Per backend: seconds after ``t0`` it was idle while a job waited (module docstring).
    ``alive_until[b]``: a backend killed at that moment is not counted idle afterwards;
    ``handoffs`` False: its own hand-offs do not count."""
    starts = starts_by_job(jobs, orders)
    waiting = _merge(_waiting(jobs, records, starts, t0))
    if not waiting:
        return [0.0] * len(orders)
    t_end = waiting[-1][1]
    out = []
    for b, order in enumerate(orders):
        stop = min(t_end, alive_until[b]) if alive_until is not None else t_end
        busy = _busy(order, t0, stop, handoffs)
        idle, cur = [], t0
        for a, e in busy:
            if a > cur:
                idle.append((cur, a))
            cur = max(cur, e)
        if stop > cur:
            idle.append((cur, stop))
        out.append(_overlap(waiting, idle))
    return out


def pool_row(jobs: Sequence[Job], records: Sequence[RequestRecord], stats: Sequence[Mapping], t0: float,
             label: str, alive_until: Sequence[float] | None = None) -> dict:
    """One row of the pool table (module docstring); ``stats``: each emulator's ``stats()``."""
    orders = [s.get("order", []) for s in stats]
    hashes = {short_hash(j.prompt) for j in jobs}
    summ = summarize(records, label)
    idle = idle_while_waiting(jobs, records, orders, t0, alive_until)
    idle_x = idle_while_waiting(jobs, records, orders, t0, alive_until, handoffs=False)
    gaps = sorted(b - a for o in orders for a, b in handoff_gaps(o, t0))
    return {
        "label": label,
        "short_p50_s": summ.classes["short"].get("e2e", "p50") if "short" in summ.classes else math.nan,
        "short_p95_s": summ.classes["short"].get("e2e", "p95") if "short" in summ.classes else math.nan,
        "long_p95_s": summ.classes["long"].get("e2e", "p95") if "long" in summ.classes else math.nan,
        "served": [sum(1 for r in o if r.get("hash") in hashes and r.get("outcome") == "ok") for o in orders],
        "idle_while_waiting_s": idle,
        "idle_while_waiting_total_s": sum(idle),
        "idle_no_request_on_its_way_s": sum(idle_x),
        "handoff_gap_p50_s": gaps[len(gaps) // 2] if gaps else math.nan,
        "handoff_gap_max_s": gaps[-1] if gaps else math.nan,
        "max_in_flight": [int(s.get("max_in_flight", 0)) for s in stats],
        # seconds each backend spent serving the burst (its serial work)
        "busy_s": [sum(min(float(r.get("t_out", r["t_start"])), math.inf) - float(r["t_start"]) for r in _served(o)
                       if r.get("hash") in hashes and float(r["t_start"]) >= t0) for o in orders],
        "failed": summ.failed,
        "completed": len(records) - summ.failed,
        "makespan_s": max((r.end for r in records if math.isfinite(r.end)), default=math.nan) - t0,
    }
