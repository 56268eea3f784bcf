#!/usr/bin/env python
"""Policy study: pause a long answer for a short one, in the simulator with measured costs (issue 30).

Traces (one answering model each, prompts of the predictor's held-out **test** split, so the
shipped predictor ``models/default.onnx`` never saw them; predictions through
``sjf_core.load_predictor``):

* ``sharegpt``: ShareGPT's ChatGPT answers;
* ``arena:<model>``: arena-hard v0.1 answers of one model (``model`` field);
* ``smollm``: SmolLM2-135M's real answers on this machine (benchmarks/preempt_smollm_trace.py,
  temperature 0, ``max_tokens`` capped: the cap is the requests' ``max_tokens``, which the
  scheduler sees).

For each trace, ρ and seed: ``--n`` jobs drawn with replacement, Poisson arrivals at ρ =
λ·E[S] (E[S] from the costs: prompt read + answer at the measured speeds), the same arrivals
for every contender. Costs come from ``--costs`` (benchmarks/preempt_primitives.py's JSON):
decode and prefill tokens/s, the stop cost, and a resume that reads prompt + partial answer
again. Contenders: FCFS, SJF (the shipped ``sjf-tokens`` with its default starvation guard),
oracle SJF, oracle SRPT (free pauses, and with the measured costs), and SJF + each pause rule of
:mod:`sjf_lab.sim.pause` with its guard. Metrics per run, then the median over seeds: short
(true class Short) P50/P95 end-to-end, mean, long (the longest 10% of answers) P95/P99,
pauses per request.

Usage::

    .venv/bin/python benchmarks/preempt_study.py --data <conversations dir> \\
        --smollm <smollm trace, outside the repo> --costs docs/results/preempt_primitives.json \\
        --out docs/results/preempt_study.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from sjf_core import load_predictor, make_policy
from sjf_core.policy._entry import class_of_tokens
from sjf_core.policy._policies import RequestMeta
from sjf_core.predict._prediction import Prediction
from sjf_lab.sim.pause import PauseGuard, PauseRule, belief_of
from sjf_lab.sim.preempt import Costs, simulate_preempt
from sjf_lab.train_data import load_rows, split_of

ARENA_MODELS = ("gpt-4o-mini-2024-07-18", "llama-3.1-8b-instruct", "plato_7b_kto_all_37k_iter3")


def load_trace(name: str, data: str, smollm: str | None):
    """(prompts, prompt_tokens, answer_tokens, max_tokens or None) of one trace, test split only."""
    if name == "smollm":
        rows = [json.loads(x) for x in Path(smollm).read_text().splitlines() if x.strip()]
        return ([r["prompt"] for r in rows], [r["prompt_tokens"] for r in rows], [r["answer_tokens"] for r in rows],
                max(r["answer_tokens"] for r in rows if r["finish_reason"] == "length") if any(
                    r["finish_reason"] == "length" for r in rows) else None)
    if name == "sharegpt":
        path, model = f"{data}/sharegpt.jsonl", None
    else:
        path, model = f"{data}/arena_hard_v0_1.jsonl", name.split(":", 1)[1]
    rows = [r for r in load_rows([path]) if split_of(r.key) == "test" and (model is None or r.model == model)]
    return [r.prompt for r in rows], [len(r.prompt) // 4 for r in rows], [r.tokens for r in rows], None


def diagnostics(mean_s: float, guard_k: float):
    """Contenders that check the engine against the issue's first simulation (no guard)."""
    free = PauseGuard(max_pauses=10 ** 9, max_paused_s=math.inf, min_run_tokens=1)
    return [
        ("SJF (non-preemptive)", "sjf-tokens", False, PauseRule(), "none"),
        ("oracle SRPT, free pauses", "oracle", True, PauseRule("srpt", 1.0, guard=free), "free"),
        ("SJF + remaining ×2, no guard", "sjf-tokens", False, PauseRule("remaining", 2.0, guard=free), "stop"),
        ("SJF + Gittins ×2, no guard", "sjf-tokens", False, PauseRule("gittins", 2.0, guard=free), "stop"),
        ("SJF + overdue ×1 m2, no guard", "sjf-tokens", False, PauseRule("overdue", 2.0, 1.0, guard=free), "stop"),
    ]


#: Cost modes: "none" (never pauses), "free" (pauses cost nothing), "stop" (stop the stream, resume by
#: reading prompt + partial answer again), "segment" (segments ending in a prompt-cache save, resume =
#: cache hit). Labels of the measured modes.
MODES = {"stop": "stop + re-read", "segment": "segments + --cache"}


def contenders(mean_s: float, guard_k: float):
    """(label, policy name, oracle?, PauseRule, cost mode) of every contender."""
    g1 = PauseGuard(max_pauses=1, max_paused_s=guard_k * mean_s)
    g2 = PauseGuard(max_pauses=2, max_paused_s=guard_k * mean_s)
    srpt = PauseRule("srpt", margin=1.0, guard=PauseGuard(max_pauses=10 ** 9, max_paused_s=math.inf,
                                                          min_run_tokens=1))
    rows = [
        ("FCFS", "fcfs", False, PauseRule(), "none"),
        ("SJF (non-preemptive)", "sjf-tokens", False, PauseRule(), "none"),
        ("oracle SJF", "oracle", True, PauseRule(), "none"),
        ("oracle SRPT, free pauses", "oracle", True, srpt, "free"),
    ]
    rules = [("remaining ×2", PauseRule("remaining", 2.0, guard=g1)),
             ("overdue ×1, margin 2", PauseRule("overdue", 2.0, 1.0, guard=g1)),
             ("Gittins, margin 2", PauseRule("gittins", 2.0, guard=g1)),
             ("Gittins, margin 4", PauseRule("gittins", 4.0, guard=g1)),
             ("Gittins ×2, 2 pauses", PauseRule("gittins", 2.0, guard=g2))]
    for mode, mlabel in MODES.items():
        rows.append((f"oracle SRPT, {mlabel}", "oracle", True, srpt, mode))
        rows += [(f"SJF + {lab}, {mlabel}", "sjf-tokens", False, rule, mode) for lab, rule in rules]
    tight = PauseGuard(max_pauses=1, max_paused_s=mean_s)
    rows += [  # the ceiling of today's predictions: pauses that cost nothing
        ("SJF + remaining ×2, free pauses", "sjf-tokens", False, PauseRule("remaining", 2.0, guard=g1), "free"),
        ("SJF + overdue ×1, margin 2, free pauses", "sjf-tokens", False, PauseRule("overdue", 2.0, 1.0, guard=g1),
         "free"),
        ("SJF + Gittins, margin 2, free pauses", "sjf-tokens", False, PauseRule("gittins", 2.0, guard=g1), "free"),
        ("SJF + Gittins, margin 2, tight guard, free pauses", "sjf-tokens", False,
         PauseRule("gittins", 2.0, guard=tight), "free"),
    ]
    return rows


CONTENDERS = contenders


def metrics(res, long_cut: float) -> dict:
    short = res.sojourn[res.tokens < 200]
    long = res.sojourn[res.tokens >= long_cut]
    pct = lambda v, q: float(np.percentile(v, q)) if len(v) else math.nan  # noqa: E731
    return {"short_p50": pct(short, 50), "short_p95": pct(short, 95), "mean": float(res.sojourn.mean()),
            "long_p95": pct(long, 95), "long_p99": pct(long, 99), "pauses_per_req": float(res.pauses.mean()),
            "wasted_share": res.wasted_s / res.makespan if res.makespan else 0.0}


def run_trace(name, prompts, ptoks, atoks, cap, costs: dict, rhos, seeds, n, guard_k):
    predictor = load_predictor()
    preds = [predictor.predict(p) for p in prompts]
    ptoks, atoks = np.asarray(ptoks, float), np.asarray(atoks, float)
    service = np.array([costs["none"].service_s(p, a) for p, a in zip(ptoks, atoks)])
    mean_s = float(service.mean())
    out = {"jobs_distinct": len(prompts), "mean_service_s": mean_s, "short_share": float((atoks < 200).mean()),
           "long_share": float((atoks >= 800).mean()), "cap": cap, "rho": {}}
    for rho in rhos:
        per = {}
        for seed in seeds:
            rng = np.random.default_rng(seed)
            idx = rng.integers(0, len(prompts), size=n)
            arr = np.cumsum(rng.exponential(mean_s / rho, size=n))
            a, p = atoks[idx], ptoks[idx]
            klass = np.array([class_of_tokens(t) for t in a])
            long_cut = float(np.quantile(a, 0.9))
            metas = [RequestMeta(max_tokens=int(cap))] * n if cap else None
            beliefs = [belief_of(preds[k], cap) for k in idx]
            for label, pol, oracle, rule, mode in CONTENDERS(mean_s, guard_k):
                pr = ([Prediction.from_probs(np.eye(3)[class_of_tokens(t)], expected_tokens=float(t)) for t in a]
                      if oracle else [preds[k] for k in idx])
                res = simulate_preempt(arr, p, a, klass, beliefs, pr, make_policy(pol), rule, costs[mode], metas=metas)
                per.setdefault(label, []).append(metrics(res, long_cut))
        out["rho"][str(rho)] = {lab: {k: statistics.median(m[k] for m in ms) for k in ms[0]} for lab, ms in per.items()}
    return out


def table(name: str, rho: str, rows: dict) -> str:
    base = rows["SJF (non-preemptive)"]
    head = (f"\n**{name}, ρ {rho}** (seconds; median of seeds)\n\n| policy | short P50 | short P95 | mean | long P95 | "
            "long P99 | pauses/req | short P50 vs SJF | long P95 vs SJF |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for lab, m in rows.items():
        d50 = m["short_p50"] / base["short_p50"] - 1
        d95 = m["long_p95"] / base["long_p95"] - 1
        lines.append(f"| {lab} | {m['short_p50']:.1f} | {m['short_p95']:.1f} | {m['mean']:.1f} | {m['long_p95']:.0f} | "
                     f"{m['long_p99']:.0f} | {m['pauses_per_req']:.2f} | {d50:+.0%} | {d95:+.0%} |")
    return "\n".join(lines)


def verdict(result: dict, free: bool = False) -> tuple[bool, list[str]]:
    """The go/no-go bar (issue 30): some predicted pause policy with measured costs gives short P50
    ≥ 25% below non-preemptive SJF and long P95 ≤ +25%. Returns (go, one line per trace and ρ:
    the best such policy by short P50 among those within the long-P95 bound). ``free``: the
    same over the free-pause rows instead (a what-if, not the bar)."""
    go, lines = False, []
    for name, tr in result["traces"].items():
        for rho, rows in tr["rho"].items():
            base = rows["SJF (non-preemptive)"]
            best = None
            for lab, m in rows.items():
                if not lab.startswith("SJF +") or ("free pauses" in lab) != free:
                    continue
                d50, d95 = m["short_p50"] / base["short_p50"] - 1, m["long_p95"] / base["long_p95"] - 1
                if d95 <= 0.25 and (best is None or d50 < best[1]):
                    best = (lab, d50, d95)
            ok = best is not None and best[1] <= -0.25
            go |= ok
            lines.append(f"| {name} | {rho} | {best[0] if best else '–'} | {best[1]:+.0%} | {best[2]:+.0%} | "
                         f"{'clears' if ok else 'misses'} |" if best else f"| {name} | {rho} | – | – | – | misses |")
    return go, lines


def report(result: dict, markdown: str | None) -> None:
    """Print the go/no-go line and the tables; with ``markdown``, write them between the
    ``<!-- study:begin -->`` / ``<!-- study:end -->`` markers of that file."""
    go, lines = verdict(result)
    result["go"] = go
    md = ["**Go / no-go** (the best predicted pause policy with measured costs among those with long P95 ≤ +25%; "
          "the bar: short P50 ≤ −25%)\n", "| trace | ρ | policy | short P50 vs SJF | long P95 vs SJF | bar |",
          "|---|---|---|---|---|---|", *lines, "", f"Decision: **{'GO' if go else 'NO-GO'}**."]
    free_go, free_lines = verdict(result, free=True)
    md += ["", "What-if, not the bar: the same with pauses that cost nothing (a backend that kept the paused "
           "answer's KV cache and stopped at once)\n", "| trace | ρ | policy | short P50 vs SJF | long P95 vs SJF | bar |",
           "|---|---|---|---|---|---|", *free_lines]
    for name, tr in result["traces"].items():
        md.append(f"\n### {name}\n\n{tr['jobs_distinct']} distinct answers; E[S] {tr['mean_service_s']:.1f} s; "
                  f"Short {tr['short_share']:.0%}, Long {tr['long_share']:.0%}; max_tokens cap {tr['cap']}.")
        md += [table(name, rho, rows) for rho, rows in tr["rho"].items()]
    print("\n" + "\n".join(md))
    if markdown:
        write_block(markdown, "study", "\n".join(md))


def write_block(path: str, name: str, text: str) -> None:
    """Put ``text`` between the ``<!-- name:begin -->`` / ``<!-- name:end -->`` markers of ``path``."""
    doc = Path(path).read_text()
    head, rest = doc.split(f"<!-- {name}:begin -->", 1)
    tail = rest.split(f"<!-- {name}:end -->", 1)[1]
    Path(path).write_text(f"{head}<!-- {name}:begin -->\n{text}\n<!-- {name}:end -->{tail}")


def _public_argv(argv: list[str]) -> list[str]:
    """The command line with the data paths left out (they are never written into the repository)."""
    out, hide = [], False
    for x in argv:
        out.append("<path>" if hide else x)
        hide = x in ("--data", "--smollm")
    return out


def sensitivity(specs: list[str]) -> str:
    """One table over several result JSONs (``label=path``: runs with other cost settings): per
    trace and ρ, the best predicted policy's short P50 / long P95 vs SJF (measured-cost modes)."""
    heads = [sp.split("=", 1)[0] for sp in specs]
    results = [json.loads(Path(sp.split("=", 1)[1]).read_text()) for sp in specs]
    per = []
    for r in results:
        _, lines = verdict(r)
        per.append([ln.split("|")[4:7] for ln in lines])
    cells = [ln.split("|")[1:3] for ln in verdict(results[0])[1]]
    out = ["| trace | ρ | " + " | ".join(heads) + " |", "|---|---|" + "---|" * len(heads)]
    for i, (name, rho) in enumerate(cells):
        vals = [f"{p[i][0].strip()} / {p[i][1].strip()}" for p in per]
        out.append(f"| {name.strip()} | {rho.strip()} | " + " | ".join(vals) + " |")
    return "\n".join(out)


def costs_of(path: str | None, args, segment_tokens: float) -> dict:
    """Costs per mode (``MODES`` + "none", "free") from preempt_primitives.py's JSON, or the
    what-if flags (--decode-tps ...: one resume cost for every length)."""
    if args.decode_tps:
        stop = Costs(args.decode_tps, args.prefill_tps, args.stop_s, args.overhead_s,
                     resume_overhead_s=args.resume_fixed_s, resume_tps=1e12 if args.resume_fixed_s is not None else None)
        seg = stop
    else:
        d = json.loads(Path(path).read_text())
        sp, st = d["speed"], d["stop"]
        stop_s = statistics.median(max(0.0, v["stop_cost_s"]) for k, v in st.items() if k.startswith("disconnect"))
        over = st["probe_idle_s"]
        stop = Costs(sp["decode_tok_s"], sp["prefill_tok_s"], stop_s, over)
        cache = d["resume_cost"]["cache"]
        x = np.array([v["prompt_tokens"] for v in cache.values()], float)
        y = np.array([v["after_other_request_s"] for v in cache.values()], float)
        slope, icpt = np.polyfit(x, y, 1)
        # a boundary = one more request whose KV is resident and a state save, less its one answer token;
        # the save grows with the context (fitted)
        b_slope, b_icpt = np.polyfit(x, np.array([v["kv_resident_s"] for v in cache.values()]) - 1.0 / sp["decode_tok_s"], 1)
        seg = Costs(sp["decode_tok_s"], sp["prefill_tok_s"], 0.0, over, resume_overhead_s=max(float(icpt), 0.0),
                    resume_tps=1.0 / slope if slope > 0 else 1e12, segment_tokens=segment_tokens,
                    segment_overhead_s=max(float(b_icpt), 0.0), segment_overhead_per_token_s=max(float(b_slope), 0.0))
    if args.prefill_ratio:  # what-if: prompt reading this many times faster than decoding
        stop = dataclasses.replace(stop, prefill_tps=args.prefill_ratio * stop.decode_tps)
        seg = dataclasses.replace(seg, prefill_tps=stop.prefill_tps)
    none = Costs(stop.decode_tps, stop.prefill_tps, 0.0, stop.overhead_s)
    free = Costs(stop.decode_tps, stop.prefill_tps, 0.0, stop.overhead_s, free_resume=True)
    return {"none": none, "free": free, "stop": stop, "segment": seg}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None, help="the conversations directory (required unless --render)")
    ap.add_argument("--smollm", default=None)
    ap.add_argument("--costs", default=None, help="preempt_primitives.py JSON")
    ap.add_argument("--decode-tps", type=float, default=None, help="override: decode tokens/s")
    ap.add_argument("--prefill-tps", type=float, default=None)
    ap.add_argument("--stop-s", type=float, default=0.0)
    ap.add_argument("--overhead-s", type=float, default=0.0)
    ap.add_argument("--resume-fixed-s", type=float, default=None, help="what-if: every resume costs this")
    ap.add_argument("--prefill-ratio", type=float, default=None,
                    help="what-if: prefill tokens/s = this × decode tokens/s (the measured one otherwise)")
    ap.add_argument("--segment-tokens", type=float, default=64.0, help="segment length of the segments mode")
    ap.add_argument("--diagnostics", action="store_true", help="the no-guard contenders (engine check)")
    ap.add_argument("--traces", default="sharegpt," + ",".join(f"arena:{m}" for m in ARENA_MODELS) + ",smollm")
    ap.add_argument("--rhos", default="0.7,0.85")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--seed-offset", type=int, default=0, help="first seed (independent repeats: another offset)")
    ap.add_argument("--guard-k", type=float, default=3.0, help="max paused seconds, in mean service times")
    ap.add_argument("--out", default=None)
    ap.add_argument("--sensitivity", default=None, help="comma-separated label=result.json: one table of their verdicts")
    ap.add_argument("--render", default=None, help="only print (and --markdown) the tables of this result JSON")
    ap.add_argument("--markdown", default=None, help="write the tables between the study markers of this file")
    a = ap.parse_args(argv)
    if a.render:
        report(json.loads(Path(a.render).read_text()), a.markdown)
        return
    if a.sensitivity:
        table_md = sensitivity(a.sensitivity.split(","))
        print(table_md)
        if a.markdown:
            write_block(a.markdown, "sensitivity", table_md)
        return
    costs = costs_of(a.costs, a, a.segment_tokens)
    global CONTENDERS
    CONTENDERS = diagnostics if a.diagnostics else contenders
    result = {"costs": {k: {f: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                            for f, v in c.__dict__.items()} for k, c in costs.items()},
              "argv": _public_argv(argv if argv is not None else sys.argv[1:]), "n": a.n, "seeds": a.seeds, "guard_k": a.guard_k, "traces": {}}
    for k, c in costs.items():
        print(f"costs {k}: {c}")
    for name in a.traces.split(","):
        if name == "smollm" and not a.smollm:
            continue
        t = time.perf_counter()
        prompts, ptoks, atoks, cap = load_trace(name, a.data, a.smollm)
        r = run_trace(name, prompts, ptoks, atoks, cap, costs, [float(x) for x in a.rhos.split(",")],
                      range(a.seed_offset, a.seed_offset + a.seeds), a.n, a.guard_k)
        result["traces"][name] = r
        print(f"\n## {name}: {r['jobs_distinct']} distinct answers, E[S] {r['mean_service_s']:.1f} s, "
              f"Short {r['short_share']:.0%}, Long {r['long_share']:.0%}, cap {cap} ({time.perf_counter() - t:.0f} s)")
        for rho, rows in r["rho"].items():
            print(table(name, rho, rows), flush=True)
    report(result, a.markdown)
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
