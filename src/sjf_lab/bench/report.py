"""Benchmark output: plain/markdown tables, a JSON file and PNG plots (matplotlib, Agg).

Tables give, per scenario: P50/P95/P99 of queue wait, TTFT and end-to-end latency
per true class and contender; then the same-run ratios (short-P50 reduction vs
FCFS with a bootstrap 95 % interval, long-P95 inflation, gap to oracle SJF) and
throughput. Latencies are in seconds, ratios in percent.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

from sjf_lab.bench.runner import BenchResult, Scenario, ScenarioResult
from sjf_lab.bench.stats import (METRIC_LABELS, METRICS, RequestRecord, compare, service_stats, summarize,
                                 to_jsonable)

CLASS_ORDER = ("short", "medium", "long", "all")


def repo_root() -> Path:
    """The repository root (where docs/ lives): the current directory if it has pyproject.toml,
    else the checkout this package was installed from in editable mode."""
    cwd = Path.cwd()
    if (cwd / "pyproject.toml").is_file():
        return cwd
    return Path(__file__).resolve().parents[3]


def scenario_from_json(d: dict) -> ScenarioResult:
    """A scenario as stored in a results JSON (``docs/results/``), with its summaries and ratios recomputed."""
    records = {k: [RequestRecord.from_dict(r) for r in v] for k, v in d["records"].items()}
    sums = {k: summarize(v, k) for k, v in records.items()}
    comps = compare(sums, records, fcfs="fcfs", oracle="oracle" if "oracle" in sums else None)
    svc = d.get("service_times") or service_stats(records.get("fcfs", []))
    return ScenarioResult(Scenario(d["name"], [], d.get("settings") or {}), records, sums, comps, svc,
                          d.get("backend_stats") or {}, d.get("workload") or {}, d.get("wall_s") or 0.0)


def _s(x: float, digits: int = 2) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _pct(x: float, signed: bool = False) -> str:
    if x is None or not math.isfinite(x):
        return "–"
    return f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out)
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])


def latency_table(res: ScenarioResult, markdown: bool = False, metrics: Sequence[str] = METRICS) -> str:
    """P50/P95/P99 per contender and true class (seconds)."""
    header = ["policy", "class", "n"]
    for m in metrics:
        header += [f"{METRIC_LABELS[m]} p50", "p95", "p99"]
    rows = []
    for label, s in res.summaries.items():
        for c in CLASS_ORDER:
            cs = s.classes.get(c)
            if cs is None or (c == "medium" and cs.n == 0):
                continue
            row = [label, c, str(cs.n) + (f" ({cs.failed} failed)" if cs.failed else "")]
            for m in metrics:
                row += [_s(cs.get(m, "p50")), _s(cs.get(m, "p95")), _s(cs.get(m, "p99"))]
            rows.append(row)
    return _table(header, rows, markdown)


def ratio_table(res: ScenarioResult, markdown: bool = False) -> str:
    """Same-run ratios per contender (end-to-end unless named) and throughput."""
    header = ["policy", "short-P50 reduction (e2e)", "95% CI", "short-P50 red. (wait)", "short-P50 red. (TTFT)",
              "long-P95 inflation (e2e)", "gap to oracle (short P50)", "throughput req/s", "tokens/s"]
    rows = []
    for label, c in res.comparisons.items():
        s = res.summaries[label]
        lo, hi = c.short_p50_reduction_ci
        ci = "–" if not (math.isfinite(lo) and math.isfinite(hi)) or label == "fcfs" else f"[{100 * lo:.0f}, {100 * hi:.0f}]%"
        rows.append([
            label, _pct(c.short_p50_reduction["e2e"]), ci, _pct(c.short_p50_reduction["wait"]),
            _pct(c.short_p50_reduction["ttft"]), _pct(c.long_p95_inflation["e2e"], signed=True),
            _pct(c.gap_to_oracle["e2e"], signed=True), _s(s.throughput_rps, 3), _s(s.throughput_tps, 0),
        ])
    return _table(header, rows, markdown)


def service_table(res: ScenarioResult, markdown: bool = False) -> str:
    """Measured service time per true class (FCFS run), when dispatch times are observable."""
    if not res.service:
        return ""
    rows = [[c, str(v["n"]), _s(v["tokens_mean"], 0), _s(v["mean"]), _s(v["p50"]), _s(v["p95"])]
            for c, v in res.service.items()]
    return _table(["class", "n", "mean tokens", "mean S (s)", "p50 S (s)", "p95 S (s)"], rows, markdown)


def workload_line(res: ScenarioResult) -> str:
    w = res.workload
    parts = [f"{w['n']} requests", ", ".join(f"{v} {k}" for k, v in w["classes"].items() if v)]
    if "mean_service_s" in w:
        parts.append(f"E[S] = {w['mean_service_s']:.3f} s, C² = {w['service_scv']:.2f}")
    if "offered_rho" in w:
        parts.append(f"realised offered ρ = {w['offered_rho']:.2f}")
    if "measured_busy_fcfs" in w:
        parts.append(f"backend busy {100 * w['measured_busy_fcfs']:.0f}% of the FCFS run")
    for k, v in res.scenario.settings.items():
        parts.append(f"{k} = {v}")
    return "; ".join(parts)


def render_text(result: BenchResult, markdown: bool = False) -> str:
    """The full report as text (plain or markdown)."""
    out = []
    env = result.environment
    out.append(f"sjf bench · {env['date_utc']} · path: {result.path} · backend: {result.backend} · "
               f"repeat {result.settings.get('repeat', 1)} · load avg {env['load_avg_start']} → {env.get('load_avg_end')}")
    for res in result.scenarios:
        out.append("")
        out.append(("### " if markdown else "== ") + f"{res.scenario.name}" + ("" if markdown else " =="))
        out.append(workload_line(res))
        out.append("")
        out.append(latency_table(res, markdown))
        out.append("")
        out.append(ratio_table(res, markdown))
        svc = service_table(res, markdown)
        if svc:
            out.append("")
            out.append("Measured service times (FCFS run):" if not markdown else "Measured service times (FCFS run):\n")
            out.append(svc)
        viol = {k: v.get("max_generating") for k, v in res.backend_stats.items() if v.get("max_generating", 0) > v.get("slots", 1)}
        if viol:
            out.append(f"WARNING: backend saw more than its slots in flight: {viol}")
    return "\n".join(out)


def to_json(result: BenchResult) -> dict:
    """JSON-ready dict of the whole run (records without prompt text)."""
    scen = []
    for res in result.scenarios:
        scen.append({
            "name": res.scenario.name,
            "settings": to_jsonable(res.scenario.settings),
            "workload": to_jsonable(res.workload),
            "wall_s": res.wall_s,
            "summaries": to_jsonable(res.summaries),
            "comparisons": to_jsonable(res.comparisons),
            "service_times": to_jsonable(res.service),
            "backend_stats": to_jsonable(res.backend_stats),
            "records": {k: [r.to_dict() for r in v] for k, v in res.records.items()},
        })
    return {"path": result.path, "backend": result.backend, "policies": result.policies,
            "environment": to_jsonable(result.environment), "settings": to_jsonable(result.settings),
            "scenarios": scen}


def write_json(result: BenchResult, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(to_json(result), f, indent=1)


def plot(res: ScenarioResult, out_dir: str | Path, prefix: str = "", metric: str = "e2e") -> list[str]:
    """Two PNGs for one scenario: latency CDF per contender (Short and Long panels) and
    per-class P50/P95 bars. Returns the file paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    import re

    raw = (prefix + res.scenario.name).replace("ρ", "rho").replace(".", "")
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", raw).strip("_")
    files = []
    labels = list(res.records)
    colors = {lab: plt.cm.tab10(i % 10) for i, lab in enumerate(labels)}

    classes = [c for c in ("short", "medium", "long") if any(c in s.classes for s in res.summaries.values())]
    fig, axes = plt.subplots(1, len(classes), figsize=(5.2 * len(classes), 3.8), squeeze=False)
    for ax, cname in zip(axes[0], classes):
        k = ("short", "medium", "long").index(cname)
        for lab in labels:
            v = np.sort([getattr(r, metric) for r in res.records[lab] if r.ok and r.true_class == k])
            v = v[np.isfinite(v)]
            if v.size:
                ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=lab, color=colors[lab])
        ax.set_title(f"{res.scenario.name}: true {cname}")
        ax.set_xlabel(f"{METRIC_LABELS[metric]} latency (s)")
        ax.set_ylabel("fraction of requests")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    f1 = out_dir / f"{name}_cdf.png"
    fig.savefig(f1, dpi=110)
    plt.close(fig)
    files.append(str(f1))

    fig, axes = plt.subplots(1, len(classes), figsize=(5.2 * len(classes), 3.8), squeeze=False)
    width = 0.8 / max(1, len(labels))
    for ax, cname in zip(axes[0], classes):
        x = np.arange(2)
        for i, lab in enumerate(labels):
            cs = res.summaries[lab].classes.get(cname)
            vals = [cs.get(metric, "p50"), cs.get(metric, "p95")] if cs else [np.nan, np.nan]
            ax.bar(x + (i - (len(labels) - 1) / 2) * width, vals, width, label=lab, color=colors[lab])
        ax.set_xticks(x, ["P50", "P95"])
        ax.set_title(f"{res.scenario.name}: true {cname}")
        ax.set_ylabel(f"{METRIC_LABELS[metric]} latency (s)")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    f2 = out_dir / f"{name}_bars.png"
    fig.savefig(f2, dpi=110)
    plt.close(fig)
    files.append(str(f2))
    return files
