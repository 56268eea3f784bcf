#!/usr/bin/env python
"""One box, many models (issue 28): the scenarios through a real LiteLLM proxy, same-run tables.

Each row starts an emulated box (``sjf_lab.box``: a runner per model, loads, shared speed) and
a LiteLLM proxy naming the box's models on its one URL, with or without the plugin:

* ``a`` side by side: a chat model busy ~90 % (300–1,200-token answers) and an autocomplete
  model (16 tokens every 1–2 s), both loaded, sharing the box's speed. Columns: autocomplete
  P50/P95, chat P50/P95, chat short-P50, max in flight per runner, lost, chat busy.
  Run with the ``openai/`` and the ``ollama_chat/`` provider (``--providers``).
* ``b`` no-fit: the box holds one model at a time, 3 s per load; 10 + 10 requests of mixed
  lengths arriving interleaved. Columns: loads, mean latency, short P50, makespan.
* ``c`` steady no-fit: Poisson arrivals, two models, ``--steady-n`` requests. Columns: loads
  per 100 requests, mean latency, short P50.
* ``d`` speeds 10× apart on one box (both loaded). Columns: quick P50 (service in seconds
  below the median), Short P50 (tokens), mean.
* ``e`` pools (``benchmarks/pool_bench.py``): two backends behind one model name, speeds 1 : 1
  and 1 : 0.5, 10 Short + 10 Long held until queued, ``--pool-reps`` bursts: backend idle while
  a request it could serve waits, per burst, raw and without the hand-offs.

Rows (``--rows``): ``no-plugin``, and any other label is a plugin row: the plugin as the code on
this branch does it, with ``--sjf-config FILE`` (``SJF_CONFIG``), ``--env K=V`` (every plugin
row) and ``--row-env LABEL:K=V,K=V`` (one row). ``--redis --workers 3``: plugin rows in Redis
mode (a throw-away redis-server), 3 proxy workers.

Usage::

    .venv/bin/python benchmarks/box_bench.py --scenarios a,b,c,d,e [--rows no-plugin,plugin]
        [--providers openai,ollama_chat] [--sjf-config box.yaml] [--redis --workers 3] [--json out.json]

Prompt text goes only to the local emulator; nothing but numbers is printed or written.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the throw-away redis-server helper

from sjf_lab.bench import box_workload as W  # noqa: E402
from sjf_lab.bench.box_metrics import pooled  # noqa: E402
from sjf_lab.bench.box_run import RowSpec, run_row  # noqa: E402
from sjf_lab.bench.stats import to_jsonable  # noqa: E402
from sjf_lab.bench.workload import load_rows  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "conversations" / "sharegpt.jsonl"


def _f(x, w=8, d=2) -> str:
    return f"{x:>{w}.{d}f}" if isinstance(x, (int, float)) and math.isfinite(x) else f"{'–':>{w}}"


def _mif(r: dict, models) -> str:
    return "/".join(str(r["max_in_flight"].get(m, 0)) for m in models)


def table_a(results: dict, provider: str) -> None:
    print(f"\n(a) side by side, provider {provider}/: chat (300–1,200 tokens, Poisson) + autocomplete (16 tokens every "
          f"1–2 s), both loaded, sharing the box's speed; end to end, seconds")
    print(f"{'row':<14}{'auto P50':>9}{'auto P95':>9}{'chat P50':>9}{'chat P95':>9}{'chat short-P50':>15}"
          f"{'max in flight chat/auto':>24}{'lost':>6}{'chat busy':>10}{'n chat/auto':>13}")
    for label, r in results.items():
        print(f"{label:<14}{_f(r['auto']['p50_s'], 9)}{_f(r['auto']['p95_s'], 9)}{_f(r['chat']['p50_s'], 9)}"
              f"{_f(r['chat']['p95_s'], 9)}{_f(r['chat'].get('short_p50_s'), 15)}{_mif(r, ('chat', 'auto')):>24}"
              f"{r['lost']:>6}{r['chat']['busy']:>10.0%}{str(r['chat']['n']) + '/' + str(r['auto']['n']):>13}")
    _ratios(results, lambda r: r["auto"]["p95_s"], "autocomplete P95")
    _ratios(results, lambda r: r["chat"].get("short_p50_s", math.nan), "chat short-P50", reduction=True)


def table_b(results: dict, title: str, per100: bool = False) -> None:
    print(f"\n{title}")
    print(f"{'row':<14}{'loads' + (' /100' if per100 else ''):>11}{'mean':>8}{'short P50':>10}{'makespan':>10}"
          f"{'max in flight a/b':>19}{'max loaded':>11}{'lost':>6}{'loads per rep':>16}")
    for label, r in results.items():
        loads = r["loads"] / r["n"] * 100 * r["reps"] if per100 else r["loads"]
        print(f"{label:<14}{_f(loads, 11, 1)}{_f(r['mean_s'])}{_f(r['short_p50_s'], 10)}{_f(r['makespan_s'], 10)}"
              f"{_mif(r, ('model-a', 'model-b')):>19}{r['max_loaded']:>11}{r['lost']:>6}"
              f"{','.join(str(x) for x in r['loads_per_rep']):>16}")
    _ratios(results, lambda r: r["mean_s"], "mean latency")
    _ratios(results, lambda r: r["short_p50_s"], "short P50", reduction=True)


def table_d(results: dict) -> None:
    print("\n(d) speeds 10× apart on one box (fast / slow = 10 : 1 per token), both loaded; burst interleaved")
    print(f"{'row':<14}{'quick P50 (s)':>14}{'Short P50':>10}{'mean':>8}{'fast P50':>9}{'slow P50':>9}"
          f"{'makespan':>10}{'max in flight f/s':>19}{'lost':>6}")
    for label, r in results.items():
        print(f"{label:<14}{_f(r['quick_p50_s'], 14)}{_f(r['short_p50_s'], 10)}{_f(r['mean_s'])}"
              f"{_f(r['fast']['p50_s'], 9)}{_f(r['slow']['p50_s'], 9)}{_f(r['makespan_s'], 10)}"
              f"{_mif(r, ('fast', 'slow')):>19}{r['lost']:>6}")
    _ratios(results, lambda r: r["quick_p50_s"], "quick P50", reduction=True)


def _ratios(results: dict, get, what: str, reduction: bool = False) -> None:
    base = results.get("no-plugin")
    if base is None:
        return
    b = get(base)
    parts = []
    for label, r in results.items():
        if label == "no-plugin" or not (b and math.isfinite(b)):
            continue
        v = get(r)
        parts.append(f"{label}: {1 - v / b:+.1%} reduction" if reduction else f"{label}: {v / b:.2f}×")
    if parts:
        print(f"  {what} vs no plugin (same run): " + "; ".join(parts))


def run_pool(args) -> dict:
    """(e): benchmarks/pool_bench.py with 10 + 10, ``--pool-reps`` bursts, per speed set."""
    spec = importlib.util.spec_from_file_location("pool_bench", ROOT / "benchmarks" / "pool_bench.py")
    pb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pb)
    out = {}
    for speeds in args.pool_speeds.split(";"):
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            argv = ["--speeds", speeds, "--n", str(args.pool_n), "--reps", str(args.pool_reps), "--rows",
                    args.pool_rows, "--data", args.data, "--seed", str(args.seed), "--json", f.name]
            if args.redis:
                argv += ["--redis", "--workers", str(args.workers)]
            pb.main(argv)
            out[speeds] = json.loads(Path(f.name).read_text())["results"]
    for speeds, rows in out.items():
        print(f"\n(e) pool of two backends, speeds {speeds.replace(',', ' : ')}, {args.pool_n} Short + {args.pool_n} "
              f"Long held until queued, {args.pool_reps} bursts: backend idle while a request it could serve waits")
        print(f"{'row':<13}{'bursts > 0.5 s':>15}{'worst':>7}  per burst raw / without hand-offs (s)")
        for label, r in rows.items():
            raw, net = r["idle_per_burst_s"], r["idle_no_request_per_burst_s"]
            over = sum(1 for x in net if x > 0.5)
            print(f"{label:<13}{over:>11}/{len(net):<3}{max(net):>7.2f}  "
                  + " ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(raw, net)))
    return out


def rows_of(args) -> list[RowSpec]:
    extra = {}
    for item in args.row_env or ():
        label, _, kv = item.partition(":")
        extra[label] = dict(p.split("=", 1) for p in kv.split(",") if p)
    common = dict(p.split("=", 1) for p in args.env or ())
    if args.sjf_config:
        common["SJF_CONFIG"] = str(Path(args.sjf_config).resolve())
    out = []
    for label in args.rows.split(","):
        plugin = label != "no-plugin"
        out.append(RowSpec(label, plugin, env={**common, **extra.get(label, {})} if plugin else {}))
    return out


def scenarios_of(args, rows) -> dict:
    out = {}
    want = args.scenarios.split(",")
    if "a" in want:
        out["a"] = W.side_by_side(rows, args.duration_s, args.chat_rho, seed=args.seed)
    if "b" in want:
        out["b"] = W.no_fit_burst(rows, args.nofit_n, load_s=args.load_s, seed=args.seed)
    if "c" in want:
        out["c"] = W.no_fit_steady(rows, args.steady_n, args.steady_rho, load_s=args.load_s, seed=args.seed)
    if "d" in want:
        out["d"] = W.speeds_apart(rows, args.speeds_n, ratio=args.ratio, seed=args.seed)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default="a,b,c,d,e")
    ap.add_argument("--rows", default="no-plugin,plugin")
    ap.add_argument("--providers", default=None,
                    help="LiteLLM providers (default: openai,ollama_chat for a; openai for b, c, d)")
    ap.add_argument("--sjf-config", default=None, help="SJF_CONFIG file for every plugin row (box settings)")
    ap.add_argument("--env", action="append", help="K=V for every plugin row (repeat)")
    ap.add_argument("--row-env", action="append", help="LABEL:K=V,K=V for one row (repeat)")
    ap.add_argument("--redis", action="store_true", help="plugin rows in Redis mode (a throw-away redis-server)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--duration-s", type=float, default=300.0, help="(a) seconds of arrivals")
    ap.add_argument("--chat-rho", type=float, default=0.85, help="(a) chat load of its own speed")
    ap.add_argument("--nofit-n", type=int, default=10, help="(b) Short and Long prompts, split over the two models")
    ap.add_argument("--load-s", type=float, default=3.0, help="(b, c) seconds per load")
    ap.add_argument("--reps", type=int, default=3, help="(b, d) bursts per row")
    ap.add_argument("--steady-n", type=int, default=120, help="(c) requests")
    ap.add_argument("--steady-rho", type=float, default=0.35, help="(c) load of the generation time alone")
    ap.add_argument("--speeds-n", type=int, default=10, help="(d) Short and Long prompts, split over the two models")
    ap.add_argument("--ratio", type=float, default=10.0, help="(d) speed ratio fast : slow")
    ap.add_argument("--pool-n", type=int, default=10)
    ap.add_argument("--pool-reps", type=int, default=10)
    ap.add_argument("--pool-speeds", default="1,1;1,0.5")
    ap.add_argument("--pool-rows", default="no-plugin,pool")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # tables appear as each scenario ends, also in a log file
    data_rows = load_rows(args.data, split="test")
    server = None
    if args.redis:
        from redis_server import RedisServer

        server = RedisServer().start()
    results: dict = {"args": vars(args)}
    try:
        for key, sc in scenarios_of(args, data_rows).items():
            providers = (args.providers or ("openai,ollama_chat" if key == "a" else "openai")).split(",")
            for provider in providers:
                got = {}
                for row in rows_of(args):
                    row.provider = provider
                    run = run_row(sc, row, reps=1 if key in ("a", "c") else args.reps, workers=args.workers,
                                  redis_url=server.url if server else None)
                    got[row.label] = pooled(sc, run.reps)
                results[f"{key}/{provider}"] = got
                if key == "a":
                    table_a(got, provider)
                elif key == "b":
                    table_b(got, f"(b) no-fit burst, provider {provider}/: one model at a time, {args.load_s:g} s per "
                                 f"load, {args.nofit_n} + {args.nofit_n} interleaved, {args.reps} bursts pooled")
                elif key == "c":
                    table_b(got, f"(c) steady no-fit, provider {provider}/: {args.steady_n} requests, Poisson, two "
                                 f"models, ρ = {args.steady_rho:g} of generation alone", per100=True)
                else:
                    table_d(got)
        if "e" in args.scenarios.split(","):
            results["e"] = run_pool(args)
    finally:
        if server is not None:
            server.close()
    if args.json:
        Path(args.json).write_text(json.dumps(to_jsonable(results), indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
