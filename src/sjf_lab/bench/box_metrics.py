"""The columns of the box tables (``benchmarks/box_bench.py``), from what the client and the
emulated box recorded.

Contract: pure functions, no I/O, no prompt text. ``records`` are the client's
:class:`~sjf_lab.bench.stats.RequestRecord` (``idx`` = the job's), ``stats`` the box
emulator's ``stats()`` (its ``order`` records carry ``model``, ``t_start``, ``t_out``, and
``box`` counts loads and each model's ``max_in_flight``). Latency is end to end at the client,
seconds. Definitions:

* **short P50**: P50 over the requests whose recorded answer is Short (< 200 tokens);
* **chat short-P50** (scenario a): P50 over the chat requests whose answer is below the chat
  requests' median length (the chat answers are 300–1,200 tokens: none is Short);
* **quick P50** (scenario d): P50 over the requests whose service time alone on the box (its
  tokens at its own model's speed) is below the burst's median service time: short *in
  seconds*;
* **max in flight**: per model, the most requests for it the box held at once (its pending
  queue, a load, the runner's queue and slots): what admission per runner bounds;
* **lost**: requests that did not complete; **loads**: loads the box made;
* **makespan**: first submit to last answer; **busy**: the share of the span during which the
  model generated (its answers' slot intervals, merged).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from sjf_lab.bench.box_workload import BoxScenario
from sjf_lab.bench.stats import RequestRecord, percentile


def _e2e(records: Sequence[RequestRecord]) -> list[float]:
    return [r.e2e for r in records if r.ok and math.isfinite(r.end)]


def _merged_length(spans: list[tuple[float, float]]) -> float:
    total, cur = 0.0, None
    for a, b in sorted(spans):
        if cur is None or a > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (cur[1] - cur[0] if cur else 0.0)


def busy_share(order: Sequence[Mapping], model: str, t0: float, t1: float) -> float:
    """The share of [t0, t1] during which ``model`` generated (merged slot intervals)."""
    spans = [(max(t0, float(r["t_start"])), min(t1, float(r.get("t_out", t1)))) for r in order
             if r.get("model") == model and not r.get("probe") and r.get("t_start") is not None]
    spans = [(a, b) for a, b in spans if b > a]
    return _merged_length(spans) / (t1 - t0) if t1 > t0 else math.nan


def rep_metrics(scenario: BoxScenario, records: Sequence[RequestRecord], stats: Mapping) -> dict:
    """The columns of one repetition (module docstring)."""
    model_of = {mj.job.idx: mj.model for mj in scenario.jobs}
    tokens_of = {mj.job.idx: mj.job.tokens for mj in scenario.jobs}
    box = stats.get("box", {})
    speed = {m: float(v["tokens_per_s"]) for m, v in box.get("models", {}).items()}
    by_model: dict[str, list[RequestRecord]] = {}
    for r in records:
        by_model.setdefault(model_of[r.idx], []).append(r)
    out: dict = {"n": len(records), "lost": sum(1 for r in records if not r.ok), "loads": int(box.get("loads", 0)),
                 "max_loaded": int(box.get("max_loaded", 0)),
                 "max_in_flight": {m: int(v["max_in_flight"]) for m, v in box.get("models", {}).items()}}
    lat = _e2e(records)
    out["mean_s"] = sum(lat) / len(lat) if lat else math.nan
    out["short_p50_s"] = percentile(_e2e([r for r in records if tokens_of[r.idx] < 200]), 50)
    ends = [r.end for r in records if r.ok and math.isfinite(r.end)]
    t0 = min(r.submit for r in records) if records else math.nan
    out["makespan_s"] = max(ends) - t0 if ends else math.nan
    for m, rs in by_model.items():
        e = _e2e(rs)
        out[m] = {"n": len(rs), "p50_s": percentile(e, 50), "p95_s": percentile(e, 95),
                  "mean_s": sum(e) / len(e) if e else math.nan,
                  "busy": busy_share(stats.get("order", []), m, t0, max(ends) if ends else t0)}
    if "chat" in by_model:
        chat = by_model["chat"]
        median = percentile([tokens_of[r.idx] for r in chat], 50)
        out["chat"]["short_p50_s"] = percentile(_e2e([r for r in chat if tokens_of[r.idx] < median]), 50)
    if speed:
        service = {i: tokens_of[i] / speed[model_of[i]] for i in tokens_of if model_of[i] in speed}
        cut = percentile(list(service.values()), 50)
        out["quick_p50_s"] = percentile(_e2e([r for r in records if service.get(r.idx, math.inf) < cut]), 50)
    return out


def pooled(scenario: BoxScenario, reps: Sequence[tuple]) -> dict:
    """The row over repetitions: latencies pooled (records of every repetition), loads and
    makespan averaged, max in flight and lost summed/worst."""
    per = [rep_metrics(scenario, recs, st) for recs, st, _ in reps]
    all_records = [r for recs, _, _ in reps for r in recs]
    merged_stats = {"box": reps[0][1].get("box", {}), "order": []}
    out = rep_metrics(scenario, all_records, merged_stats)  # latencies pooled; the rest per repetition
    out["loads"] = sum(p["loads"] for p in per) / len(per)
    out["loads_per_rep"] = [p["loads"] for p in per]
    out["makespan_s"] = sum(p["makespan_s"] for p in per) / len(per)
    out["lost"] = sum(p["lost"] for p in per)
    out["max_in_flight"] = {m: max(p["max_in_flight"].get(m, 0) for p in per) for m in per[0]["max_in_flight"]}
    out["max_loaded"] = max(p["max_loaded"] for p in per)
    for m in scenario.models():
        if m in out and m in per[0]:
            out[m]["busy"] = sum(p[m]["busy"] for p in per) / len(per)
    out["reps"] = len(per)
    return out


__all__ = ["rep_metrics", "pooled", "busy_share"]
