#!/usr/bin/env python
"""openai_sjf benchmark: burst latency (wrapped vs plain ``AsyncOpenAI``) and the wrapper's overhead.

One run measures, on the serial backend emulator (a real aiohttp server on
127.0.0.1, one slot, in this process's event loop):

1. **Burst.** ``--short`` true-Short (< 200 answer tokens) and ``--long``
   true-Long (>= 800) real prompts from ``sharegpt.jsonl`` (seeded random
   sample from the held-out test split by prompt, which the shipped predictor
   never trained on; their recorded ``response_tokens`` are the emulator's trace, which the
   scheduler never sees), submitted at once with ``asyncio.gather``, through
   (a) the plain client (the backend's FIFO = FCFS), (b) ``openai_sjf.wrap``
   with the shipped predictor, policy "sjf-tokens" (expected answer tokens as
   the key), τ = "3x" (the defaults), (c) policy "sjf" (the paper's P(Long)
   key), (d) oracle SJF
   (the true answer length as the key: the ceiling of non-preemptive admission)
   and, with ``--tau-off``, (e) "sjf" without τ. The burst is repeated ``--repeats`` times
   in a new seeded submission order each time, the same order for every policy
   (the plain client's FCFS order at the backend varies with connection timing,
   so one burst is a noisy baseline). Latency is end-to-end (submit → response
   parsed) per **true** class, pooled over the repeats. Short-P50 reduction =
   1 − P50_SJF / P50_FCFS, same run, same arrivals (DESIGN.md "Metrics"); the
   per-repeat reductions are printed too.
2. **Overhead at zero contention.** One request at a time (queue always empty),
   1-token answers, plain and wrapped calls interleaved: end-to-end p50 in ms of
   each and the p50 of the paired differences, and the CPU time of this thread
   (wall clock on a shared machine is CPU time stretched by preemption). Then the
   CPU cost split on an in-memory ``httpx.MockTransport`` (no sockets): the
   wrapper and queue alone (a constant predictor, no metrics), plus the default
   Prometheus metrics listener, plus the shipped ONNX predictor.

Usage::

    .venv/bin/python benchmarks/openai_wrapper_bench.py [--short 20 --long 20] [--repeats 3]
        [--tokens-per-s 1000] [--tau-off] [--overhead-n 400] [--json out.json]

Takes about 5 minutes on 2 shared cores (4 policies × 3 bursts of about 22 s).

Targets (issue 4): short-P50 reduction >= 60 %; added p50 <= 0.3 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import sys
import time
from pathlib import Path

import httpx
import openai

import openai_sjf
from sjf_lab.emulator import Emulator, EmulatorConfig
from sjf_core._scheduler import Scheduler

#: Idle gap before each timed request (s): requests arrive one at a time, and the
#: process yields the CPU between them, as a client at zero contention does.
GAP_S = 0.002
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "conversations" / "sharegpt.jsonl"


def pct(xs, q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation."""
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def load_sample(path: Path, n_short: int, n_long: int, seed: int, max_chars: int, split: str = "test"):
    """Distinct prompts of the held-out ``split`` (the shipped predictor never trained on them)."""
    from sjf_lab.train_data import prompt_key, split_of

    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    rows = [r for r in rows if isinstance(r.get("prompt"), str) and r["prompt"].strip() and len(r["prompt"]) <= max_chars
            and (split == "all" or split_of(prompt_key(r["prompt"])) == split)]
    rows = list({r["prompt"]: r for r in rows}.values())
    rng = random.Random(seed)
    shorts = rng.sample([r for r in rows if r["response_tokens"] < 200], n_short)
    longs = rng.sample([r for r in rows if r["response_tokens"] >= 800], n_long)
    return [{"prompt": r["prompt"], "tokens": int(r["response_tokens"]), "klass": k}
            for k, group in (("short", shorts), ("long", longs)) for r in group]


async def run_burst(sample, tokens_per_s: float, scheduler: Scheduler | None) -> dict:
    emu = Emulator(EmulatorConfig(tokens_per_s=tokens_per_s, trace_records=[
        {"prompt": s["prompt"], "answer_tokens": s["tokens"]} for s in sample]))
    await emu.start()
    plain = openai.AsyncOpenAI(base_url=emu.base_url, api_key="bench", max_retries=0, timeout=600)
    client = plain if scheduler is None else openai_sjf.wrap(plain, scheduler=scheduler)
    lat: dict[str, list[float]] = {"short": [], "long": []}

    async def one(s):
        t0 = time.perf_counter()
        r = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": s["prompt"]}])
        lat[s["klass"]].append(time.perf_counter() - t0)
        assert r.usage.completion_tokens == s["tokens"]

    t0 = time.perf_counter()
    await asyncio.gather(*(one(s) for s in sample))
    makespan = time.perf_counter() - t0
    stats = emu.stats()
    await plain.close()
    await emu.stop()
    return {"short": lat["short"], "long": lat["long"], "makespan_s": makespan,
            "backend_max_in_flight": stats["max_in_flight"]}


def summarize(runs: list[dict]) -> dict:
    """Pooled per-true-class percentiles over repeats (seconds)."""
    short = [x for r in runs for x in r["short"]]
    long_ = [x for r in runs for x in r["long"]]
    return {"short_p50_s": pct(short, 50), "short_p95_s": pct(short, 95), "long_p50_s": pct(long_, 50),
            "long_p95_s": pct(long_, 95), "makespan_s": statistics.mean(r["makespan_s"] for r in runs),
            "backend_max_in_flight": max(r["backend_max_in_flight"] for r in runs),
            "per_repeat_short_p50_s": [pct(r["short"], 50) for r in runs]}


def ranking_accuracy(predictor, sample) -> float:
    """Paper Eq. 2 on the sample: fraction of (Short, Long) pairs with P(Long) strictly higher for the Long."""
    s = sorted(predictor.predict(x["prompt"]).p_long for x in sample if x["klass"] == "short")
    import bisect

    longs = [predictor.predict(x["prompt"]).p_long for x in sample if x["klass"] == "long"]
    good = sum(bisect.bisect_left(s, v) for v in longs)
    return good / (len(s) * len(longs))


async def overhead_sockets(n: int, predictor) -> dict:
    emu = Emulator(EmulatorConfig(tokens_per_s=1e6, tick_s=1e-4))
    await emu.start()
    plain = openai.AsyncOpenAI(base_url=emu.base_url, api_key="bench", max_retries=0)
    wrapped = openai_sjf.wrap(plain, scheduler=Scheduler(predictor=predictor))
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    times = {"plain": [], "wrapped": []}
    cpu = {"plain": [], "wrapped": []}

    async def call(c):
        c0, t0 = time.thread_time(), time.perf_counter()
        await c.chat.completions.create(model="m", messages=messages, max_tokens=1)
        cpu["plain" if c is plain else "wrapped"].append(time.thread_time() - c0)
        return time.perf_counter() - t0

    for _ in range(30):  # warm-up: connections, predictor session, code paths
        await call(plain)
        await call(wrapped)
    gc.collect()
    cpu = {"plain": [], "wrapped": []}
    diffs = []
    for i in range(n):
        pair = (plain, wrapped) if i % 2 == 0 else (wrapped, plain)
        await asyncio.sleep(GAP_S)
        a = await call(pair[0])
        await asyncio.sleep(GAP_S)
        b = await call(pair[1])
        tp, tw = (a, b) if pair[0] is plain else (b, a)
        times["plain"].append(tp)
        times["wrapped"].append(tw)
        diffs.append(tw - tp)
    await plain.close()
    await emu.stop()
    return {"plain_p50_ms": 1e3 * pct(times["plain"], 50), "wrapped_p50_ms": 1e3 * pct(times["wrapped"], 50),
            "added_p50_ms": 1e3 * (pct(times["wrapped"], 50) - pct(times["plain"], 50)),
            "paired_diff_p50_ms": 1e3 * pct(diffs, 50), "n": n,
            "cpu_plain_p50_ms": 1e3 * pct(cpu["plain"], 50), "cpu_wrapped_p50_ms": 1e3 * pct(cpu["wrapped"], 50)}


class OraclePredictor:
    """Knows each prompt's true answer length: the ceiling of non-preemptive SJF (DESIGN.md "Metrics")."""

    def __init__(self, sample):
        self.tokens = {s["prompt"]: s["tokens"] for s in sample}

    def predict(self, text):
        from sjf_core.policy._entry import class_of_tokens
        from sjf_core.predict._prediction import Prediction

        n = self.tokens[text]
        probs = [0.0, 0.0, 0.0]
        probs[class_of_tokens(n)] = 1.0
        return Prediction.from_probs(probs, expected_tokens=float(n))


class ConstantPredictor:
    """A predictor that costs nothing: isolates the wrapper and queue from the model."""

    def predict(self, text):
        from sjf_core.predict._prediction import Prediction

        return Prediction.from_probs([0.6, 0.3, 0.1])


def _scheduler(predictor, metrics: bool) -> Scheduler:
    s = Scheduler(predictor=predictor)
    if not metrics:
        s.listeners.clear()  # drop the default Prometheus listener (before any queue exists)
    return s


async def overhead_in_memory(n: int, predictor) -> dict:
    """CPU and wall p50 of one call through the SDK stack on an in-memory transport, per variant."""
    body = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris"},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}}).encode()
    # an unread body stream, like a network transport's (so the wrapper's stream layer is included)
    mock = httpx.MockTransport(lambda request: httpx.Response(200, stream=httpx.ByteStream(body),
                                                              headers={"content-type": "application/json"}))
    http = httpx.AsyncClient(transport=mock)
    plain = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="bench", max_retries=0, http_client=http)
    clients = {
        "plain": plain,
        "wrapper + queue (constant predictor, no metrics)": openai_sjf.wrap(
            plain, scheduler=_scheduler(ConstantPredictor(), metrics=False)),
        "+ Prometheus metrics listener": openai_sjf.wrap(plain, scheduler=_scheduler(ConstantPredictor(), True)),
        "+ shipped predictor (= wrap defaults)": openai_sjf.wrap(plain, scheduler=_scheduler(predictor, True)),
    }
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    times = {k: [] for k in clients}
    cpu = {k: [] for k in clients}
    for _ in range(50):
        for c in clients.values():
            await c.chat.completions.create(model="m", messages=messages)
    gc.collect()
    names = list(clients)
    for i in range(n):
        for name in names[i % len(names):] + names[:i % len(names)]:  # rotate the order
            await asyncio.sleep(GAP_S)
            c0, t0 = time.thread_time(), time.perf_counter()
            await clients[name].chat.completions.create(model="m", messages=messages)
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.thread_time() - c0)
    await http.aclose()
    return {name: {"wall_p50_ms": 1e3 * pct(times[name], 50), "cpu_p50_ms": 1e3 * pct(cpu[name], 50)}
            for name in names} | {"n": n}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--short", type=int, default=20, help="true-Short prompts in the burst (default 20)")
    ap.add_argument("--long", type=int, default=20, help="true-Long prompts in the burst (default 20)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-chars", type=int, default=8000, help="skip prompts longer than this (chars)")
    ap.add_argument("--split", default="test", choices=("test", "val", "train", "all"),
                    help="draw prompts from this part of the training split by prompt (default: test, held out)")
    ap.add_argument("--tokens-per-s", type=float, default=1000.0,
                    help="emulator generation rate, tokens/s (default 1000; real CPU backends run 20-200)")
    ap.add_argument("--repeats", type=int, default=3, help="bursts per policy, each in a new order (default 3)")
    ap.add_argument("--tau-off", action="store_true", help="also run sjf with τ off")
    ap.add_argument("--overhead-n", type=int, default=400, help="request pairs for the overhead test (default 400)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)

    from sjf_core.predict._predictor import load_predictor

    predictor = load_predictor()
    sample = load_sample(args.data, args.short, args.long, args.seed, args.max_chars, args.split)
    for s in sample[:5]:  # warm the ONNX session
        predictor.predict(s["prompt"])

    policies = {
        "fcfs (plain client)": None,
        "sjf-tokens τ=3x (defaults)": dict(policy="sjf-tokens", tau="3x"),
        "sjf τ=3x (paper key)": dict(policy="sjf", tau="3x"),
        "oracle (true lengths)": dict(policy="sjf-tokens", tau="3x", predictor=OraclePredictor(sample)),
    }
    if args.tau_off:
        policies["sjf τ=off"] = dict(policy="sjf", tau="off")

    async def go():
        runs = {name: [] for name in policies}
        for rep in range(args.repeats):
            order = list(sample)
            random.Random(f"{args.seed}:{rep}").shuffle(order)  # same arrivals for every policy
            for name, opts in policies.items():
                sched = None if opts is None else Scheduler(**{"predictor": predictor, **opts})
                runs[name].append(await run_burst(order, args.tokens_per_s, sched))
        res = {"burst": {name: summarize(r) for name, r in runs.items()}}
        res["overhead_sockets"] = await overhead_sockets(args.overhead_n, predictor)
        res["overhead_in_memory"] = await overhead_in_memory(args.overhead_n * 3, predictor)
        return res

    res = asyncio.run(go())
    res["sample"] = {"short": args.short, "long": args.long, "seed": args.seed, "repeats": args.repeats,
                     "tokens_per_s": args.tokens_per_s,
                     # the model file by its name: no path of the machine it ran on
                     "predictor": repr(predictor).replace(str(Path(predictor.path).parent) + "/", ""),
                     "ranking_accuracy": ranking_accuracy(predictor, sample)}

    fcfs = res["burst"]["fcfs (plain client)"]
    print(f"Burst: {args.short} Short + {args.long} Long sharegpt prompts at once, {args.repeats} repeats "
          f"(a different submission order each, the same for every policy); emulator 1 slot, "
          f"{args.tokens_per_s:g} tok/s; predictor ranking accuracy on the sample "
          f"{res['sample']['ranking_accuracy']:.3f}. Percentiles pool all repeats.")
    print(f"{'run':26s} {'short P50 s':>11s} {'short P95 s':>11s} {'long P50 s':>10s} {'long P95 s':>10s} "
          f"{'makespan s':>10s} {'short-P50 red.':>14s} {'per repeat':>20s} {'long-P95 infl.':>14s} "
          f"{'backend max in flight':>21s}")
    for name, r in res["burst"].items():
        red = 1 - r["short_p50_s"] / fcfs["short_p50_s"]
        per = [1 - a / b for a, b in zip(r["per_repeat_short_p50_s"], fcfs["per_repeat_short_p50_s"])]
        infl = r["long_p95_s"] / fcfs["long_p95_s"] - 1
        r["short_p50_reduction"], r["long_p95_inflation"], r["per_repeat_reduction"] = red, infl, per
        per_s = " ".join(f"{x:.0%}" for x in per)
        print(f"{name:26s} {r['short_p50_s']:11.3f} {r['short_p95_s']:11.3f} {r['long_p50_s']:10.3f} "
              f"{r['long_p95_s']:10.3f} {r['makespan_s']:10.3f} {red:14.1%} {per_s:>20s} {infl:14.1%} "
              f"{r['backend_max_in_flight']:21d}")
    o, m = res["overhead_sockets"], res["overhead_in_memory"]
    print()
    print("Overhead at zero contention (one request at a time, p50; wall clock, and this thread's CPU time):")
    print(f"{'real sockets, emulator, 1-token answer':52s} {'wall ms':>8s} {'CPU ms':>8s}")
    print(f"{'  plain':52s} {o['plain_p50_ms']:8.3f} {o['cpu_plain_p50_ms']:8.3f}")
    print(f"{'  wrapped (wrap defaults)':52s} {o['wrapped_p50_ms']:8.3f} {o['cpu_wrapped_p50_ms']:8.3f}")
    print(f"{'  added':52s} {o['added_p50_ms']:8.3f} {o['cpu_wrapped_p50_ms'] - o['cpu_plain_p50_ms']:8.3f}"
          f"   (p50 of paired wall differences {o['paired_diff_p50_ms']:.3f} ms, n={o['n']} pairs; the emulator "
          f"runs in this thread)")
    print(f"{'in memory (httpx.MockTransport), SDK stack':52s} {'wall ms':>8s} {'CPU ms':>8s} {'CPU added':>9s}")
    base = m["plain"]["cpu_p50_ms"]
    for name, r in m.items():
        if name == "n":
            continue
        print(f"{'  ' + name:52s} {r['wall_p50_ms']:8.3f} {r['cpu_p50_ms']:8.3f} {r['cpu_p50_ms'] - base:9.3f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
