"""``sjf simulate``: discrete-event simulation of the admission policies (virtual clock).

Examples::

    sjf simulate                                   # one comparison at ρ=0.74, C²=2
    sjf simulate --policy fair --predictor acc=0.8 --rho 0.85
    sjf simulate --scenario table10 --out sim-out  # paper Table 10 + Figure 4
    sjf simulate --scenario all --out sim-out      # every experiment, JSON + PNG
    sjf simulate --scenario pool                   # M/G/k: per-backend queues vs one pool queue
    sjf simulate --scenario boxes --seeds 20       # many-model boxes and pools (issue 28's scenarios)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HELP = "simulate admission policies on a virtual clock (M/G/k, bursts, paper Table 10, τ variants)"

SCENARIOS = ("single", "table10", "rho", "variants", "bursts", "noise", "frontier", "guard", "speed", "tenants",
             "pool", "boxes", "all")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", choices=SCENARIOS, default="single",
                   help="single (one comparison, default) or an experiment; 'all' runs every experiment")
    p.add_argument("--out", default=None, help="folder for JSON results and PNG plots (default: print only)")
    p.add_argument("--requests", type=int, default=2000, help="requests per seed (default 2000)")
    p.add_argument("--seeds", type=int, default=5, help="seeds (default 5)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    g = p.add_argument_group("single scenario")
    g.add_argument("--policy", default="sjf-tokens", help="policy (fcfs, sjf, sjf-tokens, fair, oracle)")
    g.add_argument("--tau", default="3x", help="τ: '3x' (× mean Short service), seconds, or 'off'")
    g.add_argument("--promotion", default=None, help="work-bound (default), work-aging, fcfs-bound, strict, one-in-k, aging, aged-sjf")
    g.add_argument("--k", type=int, default=2, help="k of one-in-k")
    g.add_argument("--rho", type=float, default=0.74, help="utilisation ρ = λ·E[S]/slots (default 0.74)")
    g.add_argument("--c2", type=float, default=None,
                   help="squared coefficient of variation (default: per class, the fit to paper Table 1)")
    g.add_argument("--scope", choices=("class", "total", "unlinked"), default="class",
                   help="what C² applies to (default: within each class)")
    g.add_argument("--mix", default=None, help="class shares Short,Medium,Long (default ShareGPT 0.52,0.33,0.15)")
    g.add_argument("--slots", type=int, default=1, help="parallel slots (M/G/k)")
    g.add_argument("--predictor", default="acc=0.76",
                   help="acc=A (ranking accuracy), mult=E (multiplicative error), oracle, none")


def _predictor(spec: str):
    from sjf_lab.sim.noise import PredictorModel

    s = spec.strip().lower()
    if s in ("oracle", "none"):
        return PredictorModel(s)
    if s.startswith("acc="):
        return PredictorModel("class", float(s[4:]))
    if s.startswith("mult="):
        return PredictorModel("tokens", mult_error=float(s[5:]))
    raise ValueError(f"bad --predictor {spec!r}: use acc=0.8, mult=0.3, oracle or none")


def _single(args) -> dict:
    from sjf_lab.sim.experiments import Bench, _reduction
    from sjf_lab.sim.workload import SHAREGPT_MIX, WorkloadSpec

    mix = tuple(float(x) for x in args.mix.split(",")) if args.mix else SHAREGPT_MIX
    spec = WorkloadSpec(c2=args.c2, c2_scope=args.scope, class_mix=mix)
    b = Bench(spec, args.rho, args.requests, args.seeds, slots=args.slots)
    kw = {"tau": args.tau, "k": args.k}
    if args.promotion:
        kw["promotion"] = args.promotion
    pm = _predictor(args.predictor)
    rows = {"FCFS": b.run("fcfs"), "oracle SJF (τ off)": b.run("oracle"),
            f"{args.policy} ({args.predictor})": b.run(args.policy, pm, **kw)}
    f = rows["FCFS"]
    print(f"ρ={args.rho} C²={'Table 1 fit' if args.c2 is None else args.c2} ({args.scope}) slots={args.slots} E[S]={spec.mean_s:.2f}s "
          f"overall C²={spec.total_c2:.2f}; {args.requests} requests × {args.seeds} seeds"
          + (f"; measured ranking accuracy {b.accuracy[pm.label()]:.3f}" if pm.label() in b.accuracy else ""))
    print(f"{'policy':32s} {'short P50':>9s} {'vs FCFS':>8s} {'short P95':>9s} {'long P50':>9s} {'long P99':>9s} "
          f"{'vs FCFS':>8s} {'worst long wait':>15s}")
    for label, r in rows.items():
        print(f"{label:32s} {r['short_p50']:9.2f} {-_reduction(r['short_p50'], f['short_p50']):+7.1f}% "
              f"{r['short_p95']:9.2f} {r['long_p50']:9.2f} {r['long_p99']:9.1f} "
              f"{-_reduction(r['long_p99'], f['long_p99']):+7.1f}% {r['long_max_wait']:15.1f}")
    return {"spec": {"c2": args.c2, "scope": args.scope, "mix": list(mix), "rho": args.rho, "slots": args.slots},
            "rows": rows}


def run(args) -> int:
    from sjf_lab.sim import experiments

    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    try:
        if args.scenario == "single":
            res = _single(args)
            if out is not None:
                (out / "single.json").write_text(json.dumps(res, indent=1, default=float))
            return 0
        names = list(experiments.EXPERIMENTS) if args.scenario == "all" else [args.scenario]
        for name in names:
            t0 = time.perf_counter()
            fn = experiments.EXPERIMENTS[name]
            res = fn(n=args.requests, seeds=args.seeds) if name != "bursts" else fn(seeds=args.seeds)
            res["wall_s"] = time.perf_counter() - t0
            print(f"## {name} ({res['wall_s']:.1f} s)\n")
            print(experiments.markdown(name, res))
            print()
            if out is not None:
                (out / f"{name}.json").write_text(json.dumps(res, indent=1, default=float))
                if not args.no_plots:
                    from sjf_lab.sim.plots import plot

                    for path in plot(name, res, out):
                        print(f"wrote {path}")
    except ValueError as exc:
        print(f"sjf simulate: {exc}", file=sys.stderr)
        return 2
    return 0
