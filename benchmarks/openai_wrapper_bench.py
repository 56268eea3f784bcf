#!/usr/bin/env python
"""openai_sjf benchmark: burst latency (wrapped vs plain ``AsyncOpenAI``) and the wrapper's overhead.

One run measures, on the serial backend emulator (a real aiohttp server on
127.0.0.1, one slot, in this process's event loop):

1. **Burst.** ``--short`` true-Short (< 200 answer tokens) and ``--long``
   true-Long (>= 800) real prompts from ``sharegpt.jsonl`` (seeded random
   sample; their recorded ``response_tokens`` are the emulator's trace, which the
   scheduler never sees), submitted at once with ``asyncio.gather`` in a seeded
   shuffled order, through (a) the plain client (the backend's FIFO = FCFS),
   (b) ``openai_sjf.wrap`` with the shipped predictor, policy "sjf", τ = "3x"
   (the defaults), (c) the same with τ off and (d) policy "sjf-tokens"
   (expected answer tokens as the key). Latency is end-to-end (submit →
   response parsed) per **true** class. Short-P50 reduction = 1 − P50_SJF /
   P50_FCFS, same run, same arrivals (DESIGN.md "Metrics").
2. **Overhead at zero contention.** One request at a time (queue always empty),
   1-token answers, plain and wrapped calls interleaved: end-to-end p50 in ms of
   each and the p50 of the paired differences. Also the wrapper's own CPU cost
   on an in-memory ``httpx.MockTransport`` (no sockets), which isolates it from
   network noise.

Usage::

    .venv/bin/python benchmarks/openai_wrapper_bench.py [--short 20 --long 20] [--tokens-per-s 1000]
        [--overhead-n 400] [--json out.json]

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
from sjf_core.emulator import Emulator, EmulatorConfig
from sjf_core.scheduler import Scheduler

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


def load_sample(path: Path, n_short: int, n_long: int, seed: int, max_chars: int):
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    rows = [r for r in rows if isinstance(r.get("prompt"), str) and r["prompt"].strip() and len(r["prompt"]) <= max_chars]
    rng = random.Random(seed)
    shorts = rng.sample([r for r in rows if r["response_tokens"] < 200], n_short)
    longs = rng.sample([r for r in rows if r["response_tokens"] >= 800], n_long)
    sample = [{"prompt": r["prompt"], "tokens": int(r["response_tokens"]), "klass": k}
              for k, group in (("short", shorts), ("long", longs)) for r in group]
    rng.shuffle(sample)  # submission order
    return sample


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
    return {
        "short_p50_s": pct(lat["short"], 50), "short_p95_s": pct(lat["short"], 95),
        "long_p50_s": pct(lat["long"], 50), "long_p95_s": pct(lat["long"], 95),
        "makespan_s": makespan, "backend_max_in_flight": stats["max_in_flight"],
        "throughput_rps": len(sample) / makespan,
    }


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


async def overhead_in_memory(n: int, predictor) -> dict:
    body = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris"},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}}).encode()
    mock = httpx.MockTransport(lambda request: httpx.Response(200, content=body,
                                                              headers={"content-type": "application/json"}))
    http = httpx.AsyncClient(transport=mock)
    plain = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="bench", max_retries=0, http_client=http)
    wrapped = openai_sjf.wrap(plain, scheduler=Scheduler(predictor=predictor))
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    times = {"plain": [], "wrapped": []}
    cpu = {"plain": [], "wrapped": []}
    for c in (plain, wrapped) * 50:
        await c.chat.completions.create(model="m", messages=messages)
    gc.collect()
    for i in range(n):
        for name, c in ((("plain", plain), ("wrapped", wrapped)) if i % 2 == 0 else (("wrapped", wrapped), ("plain", plain))):
            await asyncio.sleep(GAP_S)
            c0, t0 = time.thread_time(), time.perf_counter()
            await c.chat.completions.create(model="m", messages=messages)
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.thread_time() - c0)
    await http.aclose()
    return {"plain_p50_ms": 1e3 * pct(times["plain"], 50), "wrapped_p50_ms": 1e3 * pct(times["wrapped"], 50),
            "added_p50_ms": 1e3 * (pct(times["wrapped"], 50) - pct(times["plain"], 50)), "n": n,
            "cpu_plain_p50_ms": 1e3 * pct(cpu["plain"], 50), "cpu_wrapped_p50_ms": 1e3 * pct(cpu["wrapped"], 50)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--short", type=int, default=20, help="true-Short prompts in the burst (default 20)")
    ap.add_argument("--long", type=int, default=20, help="true-Long prompts in the burst (default 20)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-chars", type=int, default=8000, help="skip prompts longer than this (chars)")
    ap.add_argument("--tokens-per-s", type=float, default=1000.0,
                    help="emulator generation rate, tokens/s (default 1000; real CPU backends run 20-200)")
    ap.add_argument("--overhead-n", type=int, default=400, help="request pairs for the overhead test (default 400)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)

    from sjf_core.predictor import load_predictor

    predictor = load_predictor()
    sample = load_sample(args.data, args.short, args.long, args.seed, args.max_chars)
    for s in sample[:5]:  # warm the ONNX session
        predictor.predict(s["prompt"])

    async def go():
        res = {"burst": {}}
        res["burst"]["fcfs (plain client)"] = await run_burst(sample, args.tokens_per_s, None)
        res["burst"]["sjf τ=3x (wrap defaults)"] = await run_burst(
            sample, args.tokens_per_s, Scheduler(predictor=predictor, policy="sjf", tau="3x"))
        res["burst"]["sjf τ=off"] = await run_burst(
            sample, args.tokens_per_s, Scheduler(predictor=predictor, policy="sjf", tau="off"))
        res["burst"]["sjf-tokens τ=3x"] = await run_burst(
            sample, args.tokens_per_s, Scheduler(predictor=predictor, policy="sjf-tokens", tau="3x"))
        res["overhead_sockets"] = await overhead_sockets(args.overhead_n, predictor)
        res["overhead_in_memory"] = await overhead_in_memory(args.overhead_n * 5, predictor)
        return res

    res = asyncio.run(go())
    res["sample"] = {"short": args.short, "long": args.long, "seed": args.seed, "tokens_per_s": args.tokens_per_s,
                     "ranking_accuracy": ranking_accuracy(predictor, sample), "predictor": repr(predictor)}

    fcfs = res["burst"]["fcfs (plain client)"]
    print(f"Burst: {args.short} Short + {args.long} Long sharegpt prompts at once; emulator 1 slot, "
          f"{args.tokens_per_s:g} tok/s; predictor ranking accuracy on the sample "
          f"{res['sample']['ranking_accuracy']:.3f}")
    print(f"{'run':28s} {'short P50 s':>11s} {'short P95 s':>11s} {'long P50 s':>10s} {'long P95 s':>10s} "
          f"{'makespan s':>10s} {'short-P50 red.':>14s} {'long-P95 infl.':>14s} {'backend max in flight':>21s}")
    for name, r in res["burst"].items():
        red = 1 - r["short_p50_s"] / fcfs["short_p50_s"]
        infl = r["long_p95_s"] / fcfs["long_p95_s"] - 1
        r["short_p50_reduction"], r["long_p95_inflation"] = red, infl
        print(f"{name:28s} {r['short_p50_s']:11.3f} {r['short_p95_s']:11.3f} {r['long_p50_s']:10.3f} "
              f"{r['long_p95_s']:10.3f} {r['makespan_s']:10.3f} {red:14.1%} {infl:14.1%} "
              f"{r['backend_max_in_flight']:21d}")
    o, m = res["overhead_sockets"], res["overhead_in_memory"]
    print()
    print("Overhead at zero contention (one request at a time, p50; wall clock, and this thread's CPU time):")
    print(f"{'path':44s} {'plain ms':>9s} {'wrapped ms':>10s} {'added ms':>9s} {'CPU plain':>9s} {'CPU wrapped':>11s} "
          f"{'CPU added':>9s}")
    for label, r in (("real sockets, emulator, 1-token answer", o), ("in memory (httpx.MockTransport), SDK stack", m)):
        print(f"{label:44s} {r['plain_p50_ms']:9.3f} {r['wrapped_p50_ms']:10.3f} {r['added_p50_ms']:9.3f} "
              f"{r['cpu_plain_p50_ms']:9.3f} {r['cpu_wrapped_p50_ms']:11.3f} "
              f"{r['cpu_wrapped_p50_ms'] - r['cpu_plain_p50_ms']:9.3f}")
    print(f"(real sockets: p50 of paired differences {o['paired_diff_p50_ms']:.3f} ms, n={o['n']} pairs; "
          f"in memory n={m['n']} pairs; the emulator runs in this thread, so socket CPU includes the server's)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
