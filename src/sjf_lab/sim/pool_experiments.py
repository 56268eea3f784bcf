"""The M/G/k pool comparison (``sjf simulate --scenario pool``): per-backend queues vs one pool queue.

Every row of one table runs on the same arrivals, service times and predictions per seed
(common random numbers); statistics are averaged over seeds. Workload: the Table-1
calibration (:func:`~sjf_lab.sim.workload.spec_table1`), Poisson arrivals at ρ = λ·E[S] /
Σ speeds, predictor of ranking accuracy 0.765 (the shipped model's measured Eq. 2 on held-out
ShareGPT), ``sjf-tokens`` with the default starvation guard; the oracle rows order by the
true length with τ off.

* ``equal``: k = 2 and 4 equal members at ρ = 0.74 and 0.85: no plugin (random routing,
  FCFS: each backend's own FIFO), today's per-backend SJF queues behind random
  (LiteLLM's ``simple-shuffle``) and round-robin routing, pool FCFS, pool SJF, pool oracle.
* ``speeds``: one member at half speed (k = 2: speeds 1, ½; k = 3: 1, 1, ½), plus a burst of
  20 Short + 20 Long: per-backend SJF (random), pool SJF speed-blind (any free member),
  fastest free member, and the shipped rule (fastest free + a predicted Long waits for a
  faster member that frees in time), for SJF and oracle.
"""

from __future__ import annotations

import math

import numpy as np

from sjf_core.policy._entry import LONG, SHORT
from sjf_core.policy._policies import make_policy
from sjf_lab.sim.noise import PredictorModel
from sjf_lab.sim.pool import simulate_pool
from sjf_lab.sim.workload import burst_workload, poisson_workload, spec_table1

ACCURACY = 0.765
EQUAL_ROWS = (
    ("no plugin: random routing, backend FIFO", "fcfs", "random", {}),
    ("per-backend SJF, random routing (today)", "sjf-tokens", "random", {}),
    ("per-backend SJF, round-robin routing", "sjf-tokens", "round-robin", {}),
    ("pool FCFS", "fcfs", "pool", {}),
    ("pool SJF", "sjf-tokens", "pool", {}),
    ("pool oracle SJF", "oracle", "pool", {}),
)
SPEED_ROWS = (
    ("per-backend SJF, random routing (today)", "sjf-tokens", "random", {}),
    ("pool SJF, speed-blind", "sjf-tokens", "pool", {"speed_aware": False}),
    ("pool SJF, fastest free", "sjf-tokens", "pool", {"reserve": False}),
    ("pool SJF, shipped rule", "sjf-tokens", "pool", {}),
    ("pool oracle, speed-blind", "oracle", "pool", {"speed_aware": False}),
    ("pool oracle, fastest free", "oracle", "pool", {"reserve": False}),
    ("pool oracle, shipped rule", "oracle", "pool", {}),
)
BASELINE = EQUAL_ROWS[0][0]


def _predictions(wl, policy: str, seed: int, mix):
    pm = PredictorModel("none") if policy == "fcfs" else PredictorModel("oracle") if policy == "oracle" \
        else PredictorModel("class", ACCURACY)
    preds, _ = pm.predict(wl, np.random.default_rng(10_000 + seed), mix)
    return preds


def _row(wls, spec, policy: str, layout: str, speeds, kw: dict) -> dict:
    per: dict[str, list] = {}
    for s, wl in enumerate(wls):
        opts = {"tau": "off"} if policy == "oracle" else {}
        r = simulate_pool(wl, _predictions(wl, policy, s, spec.class_mix), make_policy(policy, **opts),
                          speeds=speeds, layout=layout, seed=s, **kw)
        busy_s = float(np.nansum(r.sojourn - r.wait))
        vals = {"short_p50": r.stat("sojourn", SHORT, 50), "short_p95": r.stat("sojourn", SHORT, 95),
                "long_p95": r.stat("sojourn", LONG, 95), "long_p99": r.stat("sojourn", LONG, 99),
                "mean": float(np.nanmean(r.sojourn)), "makespan": r.makespan,
                "idle_waiting_pct": 100.0 * r.idle_waiting_s / max(busy_s, 1e-9),
                "served_share": [x / max(1, sum(r.served)) for x in r.served]}
        for k, v in vals.items():
            per.setdefault(k, []).append(v)
    out = {k: float(np.nanmean(v)) for k, v in per.items() if k != "served_share"}
    out["served_share"] = [float(x) for x in np.mean(per["served_share"], axis=0)]
    return out


def _table(spec, rows, speeds, rho: float | None, n: int, seeds: int) -> dict:
    if rho is None:
        wls = [burst_workload(spec, (20, 0, 20), s) for s in range(seeds)]
    else:
        wls = [poisson_workload(spec, rho, n, s, sum(speeds)) for s in range(seeds)]
    return {label: _row(wls, spec, pol, layout, speeds, kw) for label, pol, layout, kw in rows}


def pool_comparison(n: int = 2000, seeds: int = 5) -> dict:
    """Both tables (module docstring); a JSON-able dict."""
    spec = spec_table1()
    out: dict = {"n": n, "seeds": seeds, "accuracy": ACCURACY, "equal": {}, "speeds": {}}
    for k in (2, 4):
        for rho in (0.74, 0.85):
            out["equal"][f"k={k} ρ={rho}"] = _table(spec, EQUAL_ROWS, [1.0] * k, rho, n, seeds)
    for speeds in ((1.0, 0.5), (1.0, 1.0, 0.5)):
        for rho in (0.74, 0.85, None):
            name = f"speeds {'/'.join(f'{s:g}' for s in speeds)} " + (f"ρ={rho}" if rho else "burst 20S+20L")
            out["speeds"][name] = _table(spec, SPEED_ROWS, list(speeds), rho, n, 8 * seeds if rho is None else seeds)
    return out


def _pct(x: float, base: float) -> str:
    return "–" if not (base and math.isfinite(x)) else f"{100.0 * (x / base - 1):+.1f}%"


def pool_markdown(res: dict) -> str:
    """Markdown tables of :func:`pool_comparison`."""
    lines = [f"**M/G/k pool comparison** (Table-1 service model, predictor accuracy {res['accuracy']}, "
             f"{res['seeds']} seeds × {res['n']} requests; sojourn seconds; idle while waiting: member-seconds "
             "idle while a request waited, % of busy member-seconds)"]
    for name, rows in res["equal"].items():
        base = rows[BASELINE]
        lines += ["", f"*{name}*", "", "| layout | short P50 | vs no plugin | long P95 | vs no plugin | long P99 "
                  "| idle while waiting |", "|---|---|---|---|---|---|---|"]
        for label, r in rows.items():
            lines.append(f"| {label} | {r['short_p50']:.2f} | {_pct(r['short_p50'], base['short_p50'])} | "
                         f"{r['long_p95']:.1f} | {_pct(r['long_p95'], base['long_p95'])} | {r['long_p99']:.1f} | "
                         f"{r['idle_waiting_pct']:.1f}% |")
    for name, rows in res["speeds"].items():
        lines += ["", f"*{name}* (long P95 vs the same policy's speed-blind pool)", "",
                  "| layout / rule | short P50 | long P95 | vs blind | mean | makespan | served share | "
                  "idle while waiting |", "|---|---|---|---|---|---|---|---|"]
        for label, r in rows.items():
            base = rows["pool oracle, speed-blind" if "oracle" in label else "pool SJF, speed-blind"]
            share = " / ".join(f"{x:.2f}" for x in r["served_share"])
            lines.append(f"| {label} | {r['short_p50']:.2f} | {r['long_p95']:.1f} | "
                         f"{_pct(r['long_p95'], base['long_p95'])} | {r['mean']:.1f} | {r['makespan']:.0f} | "
                         f"{share} | {r['idle_waiting_pct']:.1f}% |")
    return "\n".join(lines)
