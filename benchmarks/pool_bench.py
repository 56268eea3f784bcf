#!/usr/bin/env python
"""A pool of serial backends behind one LiteLLM model group: one burst, every contender, one run.

N emulators (1 slot each; ``--speeds 1,1,0.5`` makes the third one half as fast) serve one
model group ``emu`` through a real LiteLLM proxy. A burst of ``--n`` Short + ``--n`` Long
held-out ShareGPT prompts (the test split of ``sjf train``) is **held until queued**: first
one request per backend, pinned to that deployment by its id, holds each emulator's slot;
the burst is sent, left ``--settle-s`` seconds to queue, then every hold is released and
latencies count from that moment. Contenders (``--rows``):

* ``no-plugin``: the proxy without the plugin (LiteLLM's ``simple-shuffle``, each backend's FIFO);
* ``per-backend``: the plugin with ``SJF_POOL=off`` (today's per-backend queues);
* ``pool``: the plugin's pool queue (the default);
* ``pool-oracle``: the pool queue ordered by the true answer lengths (oracle SJF, τ off).

Columns: short P50, short P95, long P95 (end to end from the release), served per backend,
backend idle while a request waited (:func:`sjf_lab.bench.pool.idle_while_waiting`, summed over
backends: raw, and without each backend's own hand-offs, i.e. with no request on its way to
it), the hand-off gap (a backend's request ended → its next one started: the proxy's
per-request latency) median / max, max in flight per backend (counted by each emulator).
``--reps`` bursts per contender on the same proxy; latencies pooled, idle and max in flight
worst over bursts. The burst is released once the plugin's status (or, without the plugin,
the emulators' FIFOs) holds all of it, plus ``--settle-s``.

``--kill`` (two backends): backend 0 runs as a separate ``sjf emulate`` process killed with
SIGKILL once a quarter of the burst is served: 0 lost, the survivor serves the rest, max in
flight 1, time to drain vs the survivor's serial work. ``--workers 3 --redis``: the proxy runs
3 workers sharing one pool through a throw-away redis-server.

Usage::

    .venv/bin/python benchmarks/pool_bench.py [--speeds 1,1] [--rows no-plugin,per-backend,pool,pool-oracle]
        [--n 20] [--reps 3] [--tokens-per-s 400] [--kill] [--workers 3 --redis] [--json out.json]

Prompt text is sent only to the local emulators; nothing but numbers is printed or written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the throw-away redis-server helper

from sjf_lab.bench.client import HttpSender, drive  # noqa: E402
from sjf_lab.bench.oracle import ENV_TRACE  # noqa: E402
from sjf_lab.bench.pool import pool_row  # noqa: E402
from sjf_lab.bench.proxy import ORACLE_SCHEDULER_FACTORY  # noqa: E402
from sjf_lab.bench.workload import Job, burst, load_rows  # noqa: E402
from sjf_lab.emulator import EmulatorThread  # noqa: E402
from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config  # noqa: E402

DEFAULT_DATA = Path(os.environ.get("SJF_DATA_DIR", "conversations")) / "sharegpt.jsonl"  # docs/data.md
MODEL = "emu"
HOLD_PROMPT = "Keep backend {b} busy while the burst queues (pool benchmark hold)."
ROWS = ("no-plugin", "per-backend", "pool", "pool-oracle")


class ProcessEmulator:
    """An ``sjf emulate`` subprocess (killable with SIGKILL); stats over HTTP."""

    def __init__(self, trace: str, tokens_per_s: float):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.argv = [sys.executable, "-m", "sjf_lab.cli", "emulate", "--port", str(self.port), "--trace", trace,
                     "--tokens-per-s", str(tokens_per_s)]
        self.proc = None
        self.revive()

    def revive(self) -> None:
        """(Re)start the process on the same port, if it is not running."""
        if self.proc is not None and self.proc.poll() is None:
            return
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.killed_at = math.inf
        self._last: dict = {"order": [], "max_in_flight": 0}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self._get("/emulator/stats") is None:
            time.sleep(0.2)

    def _get(self, path: str, method: str = "GET"):
        import urllib.request

        try:
            req = urllib.request.Request(self.base_url[:-3] + path, method=method, data=b"" if method == "POST" else None)
            with urllib.request.urlopen(req, timeout=5) as r:
                return json.loads(r.read())
        except Exception:
            return None

    def stats(self) -> dict:
        got = self._get("/emulator/stats") if self.proc.poll() is None else None
        if got is not None:
            self._last = got
        return self._last

    def reset(self) -> None:
        self._get("/emulator/reset", "POST")

    def release_holds(self) -> None:
        self._get("/emulator/release", "POST")

    def kill(self) -> None:
        self.stats()
        self.killed_at = time.monotonic()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def make_config(emus, plugin: bool, retries: int) -> dict:
    # LiteLLM's own defaults for retries and cooldowns (a dead backend is cooled down)
    cfg = proxy_config({MODEL: [e.base_url for e in emus]}, plugin=plugin,
                       router_settings={"num_retries": retries, "disable_cooldowns": False})
    for i, d in enumerate(cfg["model_list"]):
        d["model_info"] = {"id": f"{MODEL}-{i}"}  # hold requests pin a backend by this id
    return cfg


def row_env(row: str, trace: str) -> dict:
    if row == "per-backend":
        return {"SJF_POOL": "off"}
    if row == "pool-oracle":
        return {"SJF_SCHEDULER_FACTORY": ORACLE_SCHEDULER_FACTORY, ENV_TRACE: trace}
    return {}


def members_back(proxy, timeout_s: float = 60.0) -> None:
    """--kill: before the next burst, wait until the pool has the revived backend back."""
    import urllib.request

    port, end = getattr(proxy, "status_port", None), time.monotonic() + timeout_s
    while port is not None and time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/sjf/status", timeout=5) as r:
                pools = json.loads(r.read()).get("pools", [])
            if all(m["healthy"] for p in pools for m in p["members"]):
                return
        except Exception:
            pass
        time.sleep(0.2)


def redis_enqueued(proxy, emus) -> int:
    """Redis mode: requests that entered the shared queues so far (the pool's, or the backends'
    when the pool is off), from Redis's own counters."""
    from sjf_core._scheduler import backend_key
    from sjf_core.admission._redis import RedisAdmissionQueue
    from sjf_core.config import RedisSettings

    keys = sorted(backend_key(e.base_url) for e in emus)
    names = keys if proxy.pool_off else ["pool:" + "+".join(keys)]

    async def count() -> int:
        total = 0
        for name in names:
            q = RedisAdmissionQueue(proxy.redis[0], name=name, options=RedisSettings(prefix=proxy.redis[1]))
            try:
                total += (await q.snapshot())["enqueued"]
            finally:
                await q.aclose()
        return total

    return asyncio.run(count())


def queued(proxy, emus) -> int:
    """Requests of the burst queued so far: in the plugin's queues (its status), or inside the
    emulators' FIFOs without the plugin."""
    if getattr(proxy, "redis", None):
        return redis_enqueued(proxy, emus) - proxy.enqueued_before
    port = getattr(proxy, "status_port", None)
    if port is None:
        return sum(e.stats().get("waiting", 0) for e in emus)
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/sjf/status", timeout=5) as r:
            st = json.loads(r.read())
    except Exception:
        return 0
    return sum(b["waiting"] for k, b in st["backends"].items() if not k.startswith("pool:")) + \
        sum(p["waiting"] for p in st.get("pools", []))


async def one_burst(proxy, emus, jobs, label: str, settle_s: float, kill_after: int | None, stream: bool = True):
    """Hold every backend, send the burst, release; returns (records, t0)."""
    holds = []
    senders = [HttpSender(proxy.openai_base_url, f"{MODEL}-{b}", proxy.master_key) for b in range(len(emus))]
    # --kill: non-streamed, so that LiteLLM can retry the attempt whose backend died
    main = HttpSender(proxy.openai_base_url, MODEL, proxy.master_key, stream=stream and kill_after is None)
    try:
        for b, s in enumerate(senders):
            holds.append(asyncio.ensure_future(s(Job(-1 - b, HOLD_PROMPT.format(b=b), 1, 0.0, None), "hold")))
        end = time.monotonic() + 60
        while any(e.stats().get("held", 0) < 1 for e in emus) and time.monotonic() < end:
            await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        if getattr(proxy, "redis", None):
            proxy.enqueued_before = await loop.run_in_executor(None, redis_enqueued, proxy, emus)
        task = asyncio.ensure_future(drive(jobs, main, label))
        end = time.monotonic() + 300
        while await loop.run_in_executor(None, queued, proxy, emus) < len(jobs) and time.monotonic() < end:
            await asyncio.sleep(0.1)
        await asyncio.sleep(settle_s)
        t0 = time.monotonic()
        for e in emus:
            e.release_holds()
        if kill_after is not None:
            loop = asyncio.get_running_loop()
            served = lambda: sum(e.stats().get("served", 0) for e in emus[:2])  # noqa: E731
            while await loop.run_in_executor(None, served) < kill_after:
                await asyncio.sleep(0.02)
            await loop.run_in_executor(None, emus[0].kill)
        records = await task
        await asyncio.gather(*holds, return_exceptions=True)
        for r in records:
            r.submit = max(r.submit, t0)
        return records, t0
    finally:
        for s in (*senders, main):
            await s.aclose()


def run_row(row: str, emus, jobs, trace: str, args, redis_url: str | None) -> dict:
    env = row_env(row, trace)
    if redis_url is not None and row != "no-plugin":
        env.update({"SJF_REDIS_URL": redis_url, "SJF_REDIS_PREFIX": f"poolbench-{row}-{time.time_ns()}"})
    workers = args.workers if row != "no-plugin" else 1
    cfg = make_config(emus, row != "no-plugin", args.retries)
    # Redis mode: the status shows one worker's last view of the shared queue: settle only
    port = free_port() if row != "no-plugin" and redis_url is None else None
    if port is not None:
        env["SJF_STATUS_PORT"] = str(port)
    proxy = LiteLLMProxy(cfg, num_workers=workers, env=env, startup_timeout_s=600).start()
    proxy.status_port, proxy.pool_off = port, row == "per-backend"
    proxy.redis = (redis_url, env["SJF_REDIS_PREFIX"]) if redis_url is not None and row != "no-plugin" else None
    rows = []
    try:
        for rep in range(args.reps):
            for e in emus:
                if hasattr(e, "revive"):
                    e.revive()
                e.reset()
            if args.kill:
                members_back(proxy)
            kill = len(jobs) // 4 if args.kill else None
            records, t0 = asyncio.run(one_burst(proxy, emus, jobs, row, args.settle_s, kill, not args.no_stream))
            time.sleep(0.5)
            stats = [e.stats() for e in emus]
            alive = [getattr(e, "killed_at", math.inf) for e in emus]
            rows.append((records, t0, stats, alive))
    finally:
        proxy.stop()
    return combine(row, jobs, rows)


def combine(row: str, jobs, reps) -> dict:
    """The row over all bursts: latencies pooled; idle while waiting and max in flight, worst burst."""
    from sjf_lab.bench.stats import summarize

    per = [pool_row(jobs, rec, stats, t0, row, alive) for rec, t0, stats, alive in reps]
    s = summarize([r for rec, *_ in reps for r in rec], row)
    k = len(per[0]["served"])
    return {
        "short_p50_s": s.classes["short"].get("e2e", "p50"), "short_p95_s": s.classes["short"].get("e2e", "p95"),
        "long_p95_s": s.classes["long"].get("e2e", "p95"),
        "served": [sum(p["served"][b] for p in per) for b in range(k)],
        "idle_while_waiting_total_s": max(p["idle_while_waiting_total_s"] for p in per),
        "idle_per_burst_s": [round(p["idle_while_waiting_total_s"], 3) for p in per],
        "idle_no_request_on_its_way_s": max(p["idle_no_request_on_its_way_s"] for p in per),
        "idle_no_request_per_burst_s": [round(p["idle_no_request_on_its_way_s"], 3) for p in per],
        "handoff_gap_p50_s": float(sorted(p["handoff_gap_p50_s"] for p in per)[len(per) // 2]),
        "handoff_gap_max_s": max(p["handoff_gap_max_s"] for p in per),
        "max_in_flight": [max(p["max_in_flight"][b] for p in per) for b in range(k)],
        "failed": sum(p["failed"] for p in per), "completed": sum(p["completed"] for p in per),
        "makespan_s": [round(p["makespan_s"], 2) for p in per], "reps": len(per),
        "busy_s": [[round(x, 2) for x in p["busy_s"]] for p in per],
    }


def print_table(results: dict, args) -> None:
    base = results.get("no-plugin")
    print(f"\nburst of {args.n} Short + {args.n} Long held-out ShareGPT prompts, held until queued; "
          f"{len(args.speed_list)} emulators (speeds {args.speeds} × {args.tokens_per_s:g} tokens/s), "
          f"{args.reps} bursts per row pooled; end to end from the release, seconds")
    hdr = (f"{'row':<13}{'short P50':>10}{'short P95':>10}{'long P95':>10}{'short red.':>11}{'long infl.':>11}"
           f"{'served':>12}{'idle∧wait':>10}{'  excl. hand-offs':>17}{'hand-off p50/max':>17}"
           f"{'max in flight':>15}{'failed':>7}")
    print(hdr)
    if args.kill:
        for label, r in results.items():
            print(f"  {label}: per burst, time to drain (release → last answer) vs the survivor's serial work: "
                  + ", ".join(f"{m:.2f} s vs {b[1]:.2f} s" for m, b in zip(r["makespan_s"], r["busy_s"])))
    for label, r in results.items():
        red = 1 - r["short_p50_s"] / base["short_p50_s"] if base else math.nan
        infl = r["long_p95_s"] / base["long_p95_s"] - 1 if base else math.nan
        print(f"{label:<13}{r['short_p50_s']:>10.2f}{r['short_p95_s']:>10.2f}{r['long_p95_s']:>10.2f}"
              f"{red:>+11.1%}{infl:>+11.1%}{'/'.join(map(str, r['served'])):>12}"
              f"{r['idle_while_waiting_total_s']:>10.2f}{r['idle_no_request_on_its_way_s']:>17.2f}"
              f"{r['handoff_gap_p50_s']:>10.3f}/{r['handoff_gap_max_s']:<6.3f}"
              f"{'/'.join(map(str, r['max_in_flight'])):>15}{r['failed']:>7}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--n", type=int, default=20, help="Short and Long prompts each")
    ap.add_argument("--speeds", default="1,1", help="relative speed of each emulator, e.g. 1,1,0.5")
    ap.add_argument("--tokens-per-s", type=float, default=400.0, help="speed 1 in tokens/s")
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--settle-s", type=float, default=0.5, help="seconds left once the whole burst is queued")
    ap.add_argument("--retries", type=int, default=2, help="router num_retries (LiteLLM's default is 2)")
    ap.add_argument("--no-stream", action="store_true", help="non-streamed requests (default: streamed)")
    ap.add_argument("--kill", action="store_true", help="kill backend 0 (SIGKILL) a quarter into each burst")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--redis", action="store_true", help="plugin rows in Redis mode (a throw-away redis-server)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    args.speed_list = [float(x) for x in args.speeds.split(",")]
    rows = load_rows(args.data, split="test")
    jobs = burst(rows, args.n, args.n, seed=args.seed, max_long_tokens=1500)
    trace = [{"prompt": j.prompt, "answer_tokens": j.tokens} for j in jobs]
    trace += [{"prompt": HOLD_PROMPT.format(b=b), "answer_tokens": 1, "fault": "hold"}
              for b in range(len(args.speed_list))]
    tmp = tempfile.TemporaryDirectory(prefix="sjf-pool-bench-")
    trace_path = str(Path(tmp.name) / "trace.jsonl")
    Path(trace_path).write_text("".join(json.dumps(t) + "\n" for t in trace))
    server = None
    if args.redis:
        from redis_server import RedisServer

        server = RedisServer().start()
    results: dict = {}
    try:
        for row in args.rows.split(","):
            emus = [ProcessEmulator(trace_path, args.tokens_per_s * args.speed_list[0])] if args.kill else []
            emus += [EmulatorThread(tokens_per_s=args.tokens_per_s * s, slots=1, on_disconnect="stop",
                                    trace_records=trace) for s in args.speed_list[len(emus):]]
            try:
                results[row] = run_row(row, emus, jobs, trace_path, args, server.url if server else None)
            finally:
                for e in emus:
                    e.stop()
            print(f"[{row}] {results[row]}", flush=True)
    finally:
        if server is not None:
            server.close()
        tmp.cleanup()
    print_table(results, args)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": {k: v for k, v in vars(args).items()}, "results": results},
                                              indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
