"""Latency statistics of one benchmark run (DESIGN.md "Metrics").

Every request of a run becomes a :class:`RequestRecord` with four timestamps on
one monotonic clock (seconds): submit, dispatch (the backend starts serving it),
first byte and end. From them:

* **queue wait** = dispatch − submit (NaN when the backend cannot tell when it
  started serving, e.g. a real llama.cpp server);
* **TTFT** = first byte − submit (first streamed token, or the whole body for a
  non-streaming request);
* **end-to-end** = end − submit.

Everything is reported per **true** class, from the request's actual answer tokens
(Short < 200, Medium 200–799, Long ≥ 800, paper §4.1), never the predicted class.

Percentiles use linear interpolation between order statistics (numpy's default,
Hyndman–Fan type 7), so P50 of an even count is the mean of the two middle values.
Reductions are ratios of two policies measured in the same run on the same arrivals:

* short-P50 reduction = 1 − P50_policy / P50_FCFS (true-Short requests);
* long-P95 inflation = P95_policy / P95_FCFS − 1 (true-Long requests);
* gap to oracle = P50_policy / P50_oracle − 1 (true-Short requests).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from sjf_core.policy._entry import CLASS_NAMES, class_of_tokens

METRICS = ("wait", "ttft", "e2e")
METRIC_LABELS = {"wait": "queue wait", "ttft": "TTFT", "e2e": "end-to-end"}
PERCENTILES = (50, 95, 99)


@dataclass
class RequestRecord:
    """One request of a benchmark run.

    Attributes:
        idx: index of the job in the scenario (same job, same idx, in every policy run).
        policy: the policy (baseline) label that served it, e.g. "fcfs", "sjf".
        true_tokens: the actual answer length in tokens (from ``usage`` or the trace);
            -1 when unknown (the request failed).
        submit: time the client sent it (s, monotonic clock).
        dispatch: time the backend started serving it (s), or NaN when unobservable.
        first_byte: time of the first response byte / streamed token (s), or NaN.
        end: time the response was complete (s), or NaN when it failed.
        ok: True when it completed with HTTP 200 and a full answer.
        predicted_class: the class our predictor gave (0/1/2), or -1 if unknown.
        status: HTTP status (0 when no response arrived).
        error: short error text (never prompt text), or "".
        chunks: streamed content deltas received (one per token on llama.cpp / Ollama).
    """

    idx: int
    policy: str
    true_tokens: int
    submit: float
    dispatch: float = math.nan
    first_byte: float = math.nan
    end: float = math.nan
    ok: bool = True
    predicted_class: int = -1
    status: int = 200
    error: str = ""
    chunks: int = 0

    @property
    def true_class(self) -> int:
        """0 Short, 1 Medium, 2 Long from ``true_tokens``; -1 when unknown."""
        return class_of_tokens(self.true_tokens) if self.true_tokens >= 0 else -1

    @property
    def wait(self) -> float:
        """Queue wait in seconds (NaN if unobservable)."""
        return self.dispatch - self.submit

    @property
    def ttft(self) -> float:
        """Time to first byte/token in seconds."""
        return self.first_byte - self.submit

    @property
    def e2e(self) -> float:
        """End-to-end latency in seconds."""
        return self.end - self.submit

    def to_dict(self) -> dict:
        d = asdict(self)
        d["true_class"] = self.true_class
        for k, v in list(d.items()):
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = None
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "RequestRecord":
        kw = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        for k in ("dispatch", "first_byte", "end"):
            if kw.get(k) is None:
                kw[k] = math.nan
        return cls(**kw)


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (0–100) of the finite ``values``, by linear interpolation.

    Returns NaN for an empty input (or one with no finite value).

    Raises:
        ValueError: ``q`` outside [0, 100].
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q!r}")
    a = np.asarray(list(values), dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return math.nan
    return float(np.percentile(a, q))


@dataclass
class ClassSummary:
    """Latency summary of one true class (or of all requests) under one policy.

    Attributes:
        n: completed requests counted.
        failed: requests of this class that did not complete.
        stats: ``{metric: {"p50", "p95", "p99", "mean"}}`` in seconds, metric in
            :data:`METRICS`; values are NaN when unobservable.
    """

    n: int
    failed: int
    stats: dict[str, dict[str, float]] = field(default_factory=dict)

    def get(self, metric: str, stat: str) -> float:
        return self.stats.get(metric, {}).get(stat, math.nan)


def summarize_class(records: Sequence[RequestRecord]) -> ClassSummary:
    """P50/P95/P99 and mean of queue wait, TTFT and end-to-end over ``records`` (ok ones)."""
    done = [r for r in records if r.ok]
    out = ClassSummary(n=len(done), failed=len(records) - len(done))
    for m in METRICS:
        vals = np.array([getattr(r, m) for r in done], dtype=float)
        vals = vals[np.isfinite(vals)]
        s = {f"p{q}": percentile(vals, q) for q in PERCENTILES}
        s["mean"] = float(vals.mean()) if vals.size else math.nan
        out.stats[m] = s
    return out


@dataclass
class PolicySummary:
    """Summary of one policy's run: per true class and overall.

    Attributes:
        policy: the policy label.
        classes: ``{"short"|"medium"|"long"|"all": ClassSummary}`` (classes with no request omitted).
        throughput_rps: completed requests per second over the run's span
            (first submit → last end).
        throughput_tps: answer tokens per second over the same span.
        makespan_s: first submit → last end, seconds.
        failed: requests that did not complete.
    """

    policy: str
    classes: dict[str, ClassSummary]
    throughput_rps: float
    throughput_tps: float
    makespan_s: float
    failed: int


def summarize(records: Sequence[RequestRecord], policy: str | None = None) -> PolicySummary:
    """Summarise one policy's records (all of ``records`` must come from one policy run)."""
    label = policy if policy is not None else (records[0].policy if records else "?")
    by_class: dict[str, list[RequestRecord]] = {}
    for r in records:
        c = r.true_class
        by_class.setdefault(CLASS_NAMES[c] if c >= 0 else "unknown", []).append(r)
    classes = {name: summarize_class(by_class[name]) for name in (*CLASS_NAMES, "unknown") if name in by_class}
    classes["all"] = summarize_class(records)
    done = [r for r in records if r.ok and math.isfinite(r.end)]
    if done:
        t0 = min(r.submit for r in records)
        t1 = max(r.end for r in done)
        span = max(t1 - t0, 1e-9)
        rps = len(done) / span
        tps = sum(max(r.true_tokens, 0) for r in done) / span
    else:
        span = rps = tps = math.nan
    return PolicySummary(label, classes, rps, tps, span, sum(1 for r in records if not r.ok))


def _ratio(a: float, b: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b)) or b <= 0:
        return math.nan
    return a / b


def short_p50_reduction(policy: PolicySummary, fcfs: PolicySummary, metric: str = "e2e") -> float:
    """1 − P50_policy / P50_FCFS of true-Short requests (fraction; 0.8 = 80 % faster). NaN if undefined."""
    a = policy.classes.get("short")
    b = fcfs.classes.get("short")
    if a is None or b is None:
        return math.nan
    r = _ratio(a.get(metric, "p50"), b.get(metric, "p50"))
    return 1.0 - r if math.isfinite(r) else math.nan


def long_p95_inflation(policy: PolicySummary, fcfs: PolicySummary, metric: str = "e2e") -> float:
    """P95_policy / P95_FCFS − 1 of true-Long requests (fraction; 0.2 = 20 % slower). NaN if undefined."""
    a = policy.classes.get("long")
    b = fcfs.classes.get("long")
    if a is None or b is None:
        return math.nan
    r = _ratio(a.get(metric, "p95"), b.get(metric, "p95"))
    return r - 1.0 if math.isfinite(r) else math.nan


def gap_to_oracle(policy: PolicySummary, oracle: PolicySummary, metric: str = "e2e") -> float:
    """P50_policy / P50_oracle − 1 of true-Short requests (0.1 = 10 % slower than oracle SJF)."""
    a = policy.classes.get("short")
    b = oracle.classes.get("short")
    if a is None or b is None:
        return math.nan
    r = _ratio(a.get(metric, "p50"), b.get(metric, "p50"))
    return r - 1.0 if math.isfinite(r) else math.nan


def bootstrap_reduction(
    policy: Sequence[RequestRecord],
    fcfs: Sequence[RequestRecord],
    metric: str = "e2e",
    klass: int = 0,
    q: float = 50,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of 1 − Pq_policy / Pq_FCFS for one true class.

    Requests of class ``klass`` are resampled with replacement, independently in
    each policy. Returns ``(low, high)`` fractions, or ``(nan, nan)`` when a
    side has no completed request of that class.
    """
    a = np.array([getattr(r, metric) for r in policy if r.ok and r.true_class == klass], dtype=float)
    b = np.array([getattr(r, metric) for r in fcfs if r.ok and r.true_class == klass], dtype=float)
    a = a[np.isfinite(a)]
    b = b[np.isfinite(b)]
    if a.size == 0 or b.size == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    pa = np.percentile(a[rng.integers(0, a.size, (n_boot, a.size))], q, axis=1)
    pb = np.percentile(b[rng.integers(0, b.size, (n_boot, b.size))], q, axis=1)
    ok = pb > 0
    red = 1.0 - pa[ok] / pb[ok]
    if red.size == 0:
        return (math.nan, math.nan)
    lo, hi = np.percentile(red, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return (float(lo), float(hi))


@dataclass
class Comparison:
    """Same-run ratios of one policy against FCFS and oracle SJF (fractions, NaN if undefined)."""

    policy: str
    short_p50_reduction: dict[str, float]
    long_p95_inflation: dict[str, float]
    gap_to_oracle: dict[str, float]
    short_p50_reduction_ci: tuple[float, float] = (math.nan, math.nan)


def compare(
    summaries: Mapping[str, PolicySummary],
    records: Mapping[str, Sequence[RequestRecord]] | None = None,
    fcfs: str = "fcfs",
    oracle: str | None = "oracle",
    ci_metric: str = "e2e",
) -> dict[str, Comparison]:
    """Ratios of every policy vs the ``fcfs`` baseline and the ``oracle`` policy.

    Args:
        summaries: ``{label: PolicySummary}`` from one run.
        records: ``{label: records}``; when given, a bootstrap 95 % interval of the
            short-P50 reduction (``ci_metric``) is added.
        fcfs: label of the FCFS baseline.
        oracle: label of oracle SJF, or None.

    Raises:
        KeyError: ``fcfs`` is not among ``summaries``.
    """
    base = summaries[fcfs]
    orc = summaries.get(oracle) if oracle else None
    out = {}
    for label, s in summaries.items():
        c = Comparison(
            policy=label,
            short_p50_reduction={m: short_p50_reduction(s, base, m) for m in METRICS},
            long_p95_inflation={m: long_p95_inflation(s, base, m) for m in METRICS},
            gap_to_oracle={m: (gap_to_oracle(s, orc, m) if orc is not None else math.nan) for m in METRICS},
        )
        if records is not None and label in records and fcfs in records:
            c.short_p50_reduction_ci = bootstrap_reduction(records[label], records[fcfs], ci_metric)
        out[label] = c
    return out


def service_stats(records: Sequence[RequestRecord]) -> dict[str, dict[str, float]]:
    """Measured service time (end − dispatch, seconds) per true class: n, mean, p50, p95.

    Needs observable dispatch times; classes with none are omitted.
    """
    out: dict[str, dict[str, float]] = {}
    for c, name in enumerate(CLASS_NAMES):
        v = np.array([r.end - r.dispatch for r in records if r.ok and r.true_class == c], dtype=float)
        v = v[np.isfinite(v)]
        if v.size:
            out[name] = {"n": int(v.size), "mean": float(v.mean()), "p50": percentile(v, 50), "p95": percentile(v, 95),
                         "tokens_mean": float(np.mean([r.true_tokens for r in records if r.ok and r.true_class == c]))}
    return out


def scv(values: Iterable[float]) -> float:
    """Squared coefficient of variation C² = Var / Mean² of the finite ``values`` (NaN if < 2 values)."""
    a = np.asarray(list(values), dtype=float)
    a = a[np.isfinite(a)]
    if a.size < 2 or a.mean() == 0:
        return math.nan
    return float(a.var() / a.mean() ** 2)


def finite(x: float) -> float | None:
    """``x`` or None when not finite (for JSON)."""
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def to_jsonable(obj):
    """Dataclasses/dicts/tuples of floats → JSON-ready structures (NaN/inf → None)."""
    if hasattr(obj, "__dataclass_fields__"):
        return {k: to_jsonable(getattr(obj, k)) for k in obj.__dataclass_fields__}
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float):
        return finite(obj)
    if isinstance(obj, (np.floating, np.integer)):
        return to_jsonable(obj.item())
    return obj
