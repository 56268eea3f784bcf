#!/usr/bin/env python
"""SJF across LiteLLM proxy workers through Redis: a burst of real prompts, one run, vs FCFS.

The same burst of real ShareGPT prompts (N Short + N Long by recorded answer length) is
sent to the project's serial backend emulator (1 slot, answer lengths from the recorded
lengths) through a real LiteLLM proxy, once per contender, in one run:

* ``fcfs``: the proxy without the plugin (1 worker): arrival order at the emulator;
* ``sjf-1proc``: the plugin with its in-process queue (1 worker);
* ``sjf-redis-3w``: the plugin in Redis mode (``SJF_REDIS_URL``) with ``--num_workers 3``;
* ``sjf-3w-noredis`` (``--contrast``): the plugin with in-process queues and 3 workers,
  i.e. what happens without Redis: each worker admits on its own.

By default (``--start idle``) the burst hits an idle emulator, as in the paper's burst
scenario. Whichever request reaches an idle backend first is served first under any
policy; with several workers that first request differs from run to run, and one Long
served first moves the short P50 of a 40-request burst by ~0.5 s. So each contender
serves ``--reps`` bursts (default 5) on the same proxy and latencies are pooled (the
per-burst reductions are printed too). ``--start held`` instead queues the burst behind a
request holding the emulator for ``--settle-s`` seconds and counts latencies from its
release; every request has then waited, which τ-based promotion counts (use it with
``--tau off`` to compare pure orders).

For each: P50/P95 end-to-end latency per true class, the short-P50 reduction and the
long-P95 inflation vs ``fcfs`` (same run, same prompts), and the emulator's maximum
number of requests in flight. The claim checked: ``sjf-redis-3w`` keeps the backend at
1 in flight and gets the short-P50 reduction of ``sjf-1proc`` within 10 percentage points.

``--restart`` adds a run of ``sjf-redis-3w`` in which redis-server is killed (SIGKILL,
no persistence: all queue state lost) in the middle of the burst and restarted 0.5 s
later: every request must still complete (fail-open to per-process queues meanwhile).

Usage::

    .venv/bin/python benchmarks/redis_workers_bench.py [--data conversations/sharegpt.jsonl]
        [--n 20] [--reps 5] [--tokens-per-s 2000] [--start idle|held] [--tau off] [--seed 0]
        [--contrast] [--restart] [--json out.json]

Prompt text is only sent to the local emulator; nothing is logged or written but numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the throw-away redis-server helper

from sjf_lab.bench.client import HttpSender, drive# noqa: E402
from sjf_lab.bench.stats import long_p95_inflation, short_p50_reduction, summarize# noqa: E402
from sjf_lab.bench.workload import Job, burst, load_rows# noqa: E402
from sjf_lab.emulator import EmulatorThread# noqa: E402
from sjf_lab.proxy_runner import LiteLLMProxy, proxy_config# noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "conversations" / "sharegpt.jsonl"
MODEL = "emu"
HOLD_PROMPT = "Keep the backend busy while the burst queues (benchmark hold)."


def contenders(redis_url: str, contrast: bool, restart: bool) -> list[tuple[str, int, bool, dict]]:
    """(label, workers, plugin, env) per contender."""
    out = [
        ("fcfs", 1, False, {}),
        ("sjf-1proc", 1, True, {}),
        ("sjf-redis-3w", 3, True, {"SJF_REDIS_URL": redis_url}),
    ]
    if contrast:
        out.append(("sjf-3w-noredis", 3, True, {}))
    if restart:
        out.append(("sjf-redis-3w+restart", 3, True, {"SJF_REDIS_URL": redis_url, "SJF_REDIS_RETRY_S": "0.5"}))
    return out


async def warm_up(base_url: str, key: str, n: int) -> None:
    """A few concurrent tiny requests, so that every worker has loaded the predictor."""
    sender = HttpSender(base_url, MODEL, key)
    try:
        jobs = [Job(10_000 + i, f"Warm-up request {i}: say ok.", 2, 0.0, 2) for i in range(n)]
        await drive(jobs, sender, "warm-up")
    finally:
        await sender.aclose()


async def redis_counters(url: str, prefix: str, backend: str) -> dict:
    """Server-side counters of the shared queue (dispatched, promoted, expired, ...)."""
    from sjf_core.admission._redis import RedisAdmissionQueue
from sjf_core.config import RedisSettings

    q = RedisAdmissionQueue(url, name=backend.rstrip("/"), options=RedisSettings(prefix=prefix))
    try:
        snap = await q.snapshot()
    finally:
        await q.aclose()
    return {k: snap[k] for k in ("waiting", "dispatched", "promoted", "expired_leases", "expired_waiters",
                                 "reasserted", "tau_s", "mean_short_service_s")}


async def run_burst(base_url: str, key: str, jobs, label: str, emu, held: bool, settle_s: float,
                    queued=None, on_midway=None):
    """Send the burst; returns its records. ``held``: a request holding the backend is sent
    first, the burst queues behind it for ``settle_s``, then the backend is freed, and
    latencies count from that moment (no race for an idle backend at the start)."""
    sender = HttpSender(base_url, MODEL, key)
    try:
        hold = None
        if held:
            hold = asyncio.ensure_future(sender(Job(-1, HOLD_PROMPT, 1, 0.0, None), "hold"))
            end = time.monotonic() + 120
            while emu.stats()["generating"] < 1 and time.monotonic() < end:
                await asyncio.sleep(0.01)
        task = asyncio.ensure_future(drive(jobs, sender, label))
        released_at = None
        if held:
            await asyncio.sleep(settle_s)
            if queued is not None:
                print(f"[{label}] queued before the backend was freed: {await queued()}", flush=True)
            emu.release_holds()
            released_at = time.monotonic()
        if on_midway is not None:
            await on_midway()
        records = await task
        if hold is not None:
            await hold
        if released_at is not None:
            for r in records:
                r.submit = max(r.submit, released_at)
        return records
    finally:
        await sender.aclose()


def fmt_s(x: float) -> str:
    return "   n/a" if not math.isfinite(x) else f"{x:6.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="JSONL with prompt and response_tokens")
    ap.add_argument("--n", type=int, default=20, help="Short and Long prompts each")
    ap.add_argument("--max-long-tokens", type=int, default=1500, help="skip Long rows longer than this")
    ap.add_argument("--tokens-per-s", type=float, default=2000.0, help="emulator generation rate")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=5,
                    help="bursts per contender on the same proxy; latencies are pooled over them")
    ap.add_argument("--tau", default=None, help="SJF_TAU of the plugin contenders (default: the plugin's)")
    ap.add_argument("--contrast", action="store_true", help="also run 3 workers without Redis")
    ap.add_argument("--restart", action="store_true", help="also run a burst with a Redis restart midway")
    ap.add_argument("--start", choices=("held", "idle"), default="idle",
                    help="held: the burst queues behind a busy backend, latencies from its release (default); "
                         "idle: the burst hits an idle backend, so whichever request arrives first is served first")
    ap.add_argument("--settle-s", type=float, default=2.0, help="held start: seconds the burst queues")
    ap.add_argument("--only", default=None, help="comma list of contenders to run (fcfs is always run)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from redis_server import RedisServer

    rows = load_rows(args.data)
    jobs = burst(rows, args.n, args.n, seed=args.seed, max_long_tokens=args.max_long_tokens)
    trace = [{"prompt": j.prompt, "answer_tokens": j.tokens} for j in jobs]
    trace.append({"prompt": HOLD_PROMPT, "answer_tokens": 1, "fault": "hold"})
    server = RedisServer().start()
    emu = EmulatorThread(tokens_per_s=args.tokens_per_s, slots=1, on_disconnect="stop", trace_records=trace)
    results: dict[str, dict] = {}
    summaries = {}
    per_rep: dict[str, list] = {}
    from sjf_lab.emulator import short_hash

    hold_hash = short_hash(HOLD_PROMPT)
    try:
        wanted = None if not args.only else {"fcfs", *args.only.split(",")}
        for label, workers, plugin, env in contenders(server.url, args.contrast, args.restart):
            if wanted is not None and label not in wanted:
                continue
            env = {"SJF_REDIS_PREFIX": f"bench-{label}", **env}
            if plugin and args.tau is not None:
                env["SJF_TAU"] = args.tau
            t0 = time.monotonic()
            proxy = LiteLLMProxy(proxy_config({MODEL: [emu.base_url]}, plugin=plugin), num_workers=workers,
                                 env=env, startup_timeout_s=600)
            proxy.start()
            print(f"[{label}] proxy with {workers} worker(s) up in {time.monotonic() - t0:.0f} s", flush=True)
            try:
                # the same warm-up for every contender: it also feeds τ (mean Short service)
                asyncio.run(warm_up(proxy.openai_base_url, proxy.master_key, 9))
                emu.reset()
                midway = None
                restarted = {}
                if label.endswith("+restart"):
                    async def midway():
                        # kill Redis once a quarter of the burst is served, restart 0.5 s later
                        while emu.stats()["served"] < len(jobs) // 4:
                            await asyncio.sleep(0.02)
                        await asyncio.get_running_loop().run_in_executor(None, lambda: server.restart(0.5))
                        restarted["at_served"] = emu.stats()["served"]
                queued = None
                if "SJF_REDIS_URL" in env:
                    async def queued(prefix=env["SJF_REDIS_PREFIX"]):
                        return (await redis_counters(server.url, prefix, emu.base_url))["waiting"], "in Redis"
                elif not plugin:
                    async def queued():
                        return emu.stats()["waiting"], "in the emulator"
                records, reps, max_in_flight, orders = [], [], 0, []
                for rep in range(1 if midway is not None else args.reps):
                    emu.reset()
                    recs = asyncio.run(run_burst(proxy.openai_base_url, proxy.master_key, jobs, label, emu,
                                                 args.start == "held", args.settle_s, queued, midway))
                    st = emu.stats()
                    max_in_flight = max(max_in_flight, st["max_in_flight"])
                    orders.append([o["tokens"] for o in st["order"] if o["hash"] != hold_hash])
                    reps.append(recs)
                    records += recs
                    time.sleep(0.5)  # let the last releases land
                per_rep[label] = reps
                log_tail = proxy.log_text()
                shared = asyncio.run(redis_counters(server.url, env["SJF_REDIS_PREFIX"], emu.base_url)) \
                    if "SJF_REDIS_URL" in env else {}
            finally:
                proxy.stop()
            summ = summarize(records, label)
            summaries[label] = summ
            results[label] = {
                "workers": workers, "plugin": plugin, "redis_mode": "SJF_REDIS_URL" in env, "reps": len(reps),
                "emulator_max_in_flight": max_in_flight, "served": sum(len(r) for r in reps),
                "failed": summ.failed, "completed": len(records) - summ.failed,
                "short_p50_s": summ.classes["short"].get("e2e", "p50"),
                "long_p95_s": summ.classes["long"].get("e2e", "p95"),
                "makespan_s": summ.makespan_s,
                # recorded answer tokens in the order the emulator served them
                "service_order_tokens": orders,
                "redis": shared,
            }
            if restarted:
                results[label]["redis_restarted_after_served"] = restarted["at_served"]
                results[label]["fail_open_logged"] = "unreachable" in log_tail
                results[label]["recovered_logged"] = "reachable again" in log_tail
            print(f"[{label}] done: {results[label]}", flush=True)
    finally:
        emu.stop()
        server.close()

    fcfs = summaries["fcfs"]
    for label, summ in summaries.items():
        results[label]["short_p50_reduction"] = short_p50_reduction(summ, fcfs)
        results[label]["long_p95_inflation"] = long_p95_inflation(summ, fcfs)
        results[label]["short_p50_reduction_per_rep"] = [
            short_p50_reduction(summarize(a, label), summarize(b, "fcfs"))
            for a, b in zip(per_rep[label], per_rep["fcfs"])]
    n_short = sum(1 for j in jobs if j.klass == 0)
    n_long = sum(1 for j in jobs if j.klass == 2)
    print(f"\nburst of {len(jobs)} ShareGPT prompts ({n_short} Short, {n_long} Long; recorded lengths), "
          f"emulator 1 slot at {args.tokens_per_s:.0f} tokens/s, start {args.start}, {args.reps} bursts per "
          f"contender pooled; end-to-end latency, seconds"
          + (" from the moment the backend was freed" if args.start == "held" else ""))
    print(f"{'contender':<22}{'workers':>8}{'short P50':>10}{'long P95':>10}{'short-P50 red.':>16}"
          f"{'long-P95 infl.':>16}{'max in flight':>15}{'failed':>8}")
    for label, r in results.items():
        red = r["short_p50_reduction"]
        inf = r["long_p95_inflation"]
        print(f"{label:<22}{r['workers']:>8}{fmt_s(r['short_p50_s']):>10}{fmt_s(r['long_p95_s']):>10}"
              f"{(f'{red:+.1%}' if label != 'fcfs' else '—'):>16}{(f'{inf:+.1%}' if label != 'fcfs' else '—'):>16}"
              f"{r['emulator_max_in_flight']:>15}{r['failed']:>8}")
    if "sjf-redis-3w" not in results or "sjf-1proc" not in results:
        return 0
    a = results["sjf-redis-3w"]["short_p50_reduction"]
    b = results["sjf-1proc"]["short_p50_reduction"]
    gap_pp = 100 * abs(a - b)
    ok = results["sjf-redis-3w"]["emulator_max_in_flight"] == 1 and gap_pp <= 10
    for label, r in results.items():
        if label != "fcfs":
            print(f"  {label}: short-P50 reduction per burst: "
                  + ", ".join(f"{x:+.1%}" for x in r["short_p50_reduction_per_rep"]))
    print(f"\nRedis, 3 workers vs single process: short-P50 reduction {a:.1%} vs {b:.1%} "
          f"(gap {gap_pp:.1f} pp; target ≤ 10 pp); max in flight "
          f"{results['sjf-redis-3w']['emulator_max_in_flight']} (target 1): {'OK' if ok else 'NOT MET'}")
    if "sjf-redis-3w+restart" in results:
        r = results["sjf-redis-3w+restart"]
        print(f"Redis restarted midway (after {r.get('redis_restarted_after_served')} served): "
              f"{r['completed']}/{len(jobs)} completed, failed {r['failed']}, fail-open logged: "
              f"{r['fail_open_logged']}, recovery logged: {r['recovered_logged']}, max in flight "
              f"{r['emulator_max_in_flight']} (fail-open admits per process)")
    if args.json:
        Path(args.json).write_text(json.dumps({"jobs": len(jobs), "start": args.start, "seed": args.seed,
                                               "results": results}, indent=2, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
