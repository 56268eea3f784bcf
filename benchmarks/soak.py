"""Load and soak: a burst of concurrent requests through a real LiteLLM proxy with the
``litellm_sjf`` plugin to the serial backend emulator, with random client disconnects and
injected backend errors. 127.0.0.1 only; bounded duration.

Checks afterwards (the script exits 1 if one fails):

* **zero leaked slots**: the plugin's queues hold nothing (``/sjf/status``: in_flight 0,
  waiting 0, tracked calls 0), the proxy's ``/metrics`` gauges ``sjf_in_flight`` and
  ``sjf_queue_depth`` are 0, and the emulator has no open request;
* **zero lost requests**: every request the client did not abandon itself either
  completed (HTTP 200 with a full body / a stream ending in ``[DONE]``) or ended in an
  error the client saw (an HTTP error status, a truncated stream, a dropped connection)
  before the deadline;
* **memory**: the proxy's RSS (process tree, from ``/proc``) after a warm-up, at the
  peak, and after each burst (``--rounds N`` runs N bursts through the same proxy, so
  growth that levels off can be told from growth that accumulates).

A ``/metrics`` scrape taken while the queue is deepest is written to
``<out>/soak_metrics_burst.prom``, and all figures to ``<out>/soak.json``.

Usage::

    .venv/bin/python benchmarks/soak.py                       # 2,000 requests
    .venv/bin/python benchmarks/soak.py --requests 300 --deadline-s 240
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config# noqa: E402

TOPICS = ["binary search", "photosynthesis", "the French revolution", "TCP congestion control", "black holes",
          "sourdough bread", "Rust ownership", "the Krebs cycle", "Kubernetes operators", "impressionism"]
FORMS = ["In one sentence, what is {t}?", "Define {t}.", "Write a detailed, multi-section essay about {t}.",
         "Explain {t} step by step with examples.", "List three facts about {t}.",
         "Write a long tutorial on {t}, with code where useful."]


def rss_kib(pid: int) -> int:
    """Resident set size (KiB) of ``pid`` and all its descendants, from /proc."""
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{p}/task").iterdir():
                kids = (task / "children").read_text().split()
                todo.extend(int(k) for k in kids)
        except (OSError, ValueError):
            continue
    return total


def make_workload(n: int, rng: random.Random, disconnect_frac: float, fault_frac: float, stream_frac: float):
    """Requests: unique prompt, planned answer tokens, fault (None/"500"/"503"/"drop"/"drop-mid"),
    stream flag, and the client's plan (None, or seconds after which it disconnects;
    "first-chunk" for streams dropped after their first chunk)."""
    reqs = []
    for i in range(n):
        t = rng.choice(TOPICS)
        form = rng.choice(FORMS)
        prompt = f"[{i}] " + form.format(t=t)
        long_form = "essay" in form or "tutorial" in form or "step by step" in form
        tokens = rng.randint(300, 900) if long_form else rng.randint(10, 150)
        stream = rng.random() < stream_frac
        fault = None
        if rng.random() < fault_frac:
            fault = rng.choice(["500", "503", "drop"] + (["drop-mid"] if stream else []))
        leave = None
        if fault is None and rng.random() < disconnect_frac:
            leave = "first-chunk" if stream and rng.random() < 0.3 else rng.uniform(0.2, 15.0)
        reqs.append({"i": i, "prompt": prompt, "tokens": tokens, "fault": fault, "stream": stream, "leave": leave})
    return reqs


async def one_request(session: aiohttp.ClientSession, url: str, key: str, r: dict) -> dict:
    """Send one request; returns {"outcome": ok|error|disconnected, "detail": ...}."""
    body = {"model": "emu", "messages": [{"role": "user", "content": r["prompt"]}], "stream": r["stream"]}
    headers = {"Authorization": f"Bearer {key}"}

    async def go() -> dict:
        async with session.post(url, json=body, headers=headers) as resp:
            if resp.status != 200:
                await resp.read()
                return {"outcome": "error", "detail": f"HTTP {resp.status}"}
            if not r["stream"]:
                data = await resp.json(content_type=None)
                ok = isinstance(data, dict) and data.get("choices")
                return {"outcome": "ok" if ok else "error", "detail": "200" if ok else "200 without choices"}
            done = False
            async for line in resp.content:
                if r["leave"] == "first-chunk":
                    return {"outcome": "disconnected", "detail": "after first chunk"}
                if line.strip() == b"data: [DONE]":
                    done = True
            return {"outcome": "ok" if done else "error", "detail": "stream done" if done else "truncated stream"}

    task = asyncio.ensure_future(go())
    try:
        if isinstance(r["leave"], float):
            done, _ = await asyncio.wait({task}, timeout=r["leave"])
            if not done:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
                return {"outcome": "disconnected", "detail": f"left after {r['leave']:.1f} s"}
        return await task
    except asyncio.CancelledError:
        task.cancel()
        raise
    except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError) as exc:
        return {"outcome": "error", "detail": type(exc).__name__}


async def scrape(session, base: str, key: str) -> str:
    async with session.get(base + "/metrics/", headers={"Authorization": f"Bearer {key}"}) as r:
        return await r.text()


def gauge_sum(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


async def burst(s, base: str, key: str, url: str, reqs: list, deadline_s: float, proxy, status_port: int,
                emu_port: int) -> dict:
    """One burst of all ``reqs`` at once; returns its figures (outcomes, leaks, RSS, peak scrape)."""
    peak = {"depth": -1.0, "text": "", "rss": rss_kib(proxy.pid), "in_flight_max": 0.0}
    stop_watch = asyncio.Event()
    t0 = time.monotonic()

    async def watch():
        while not stop_watch.is_set():
            try:
                text = await scrape(s, base, key)
                depth = gauge_sum(text, "sjf_queue_depth")
                peak["in_flight_max"] = max(peak["in_flight_max"], gauge_sum(text, "sjf_in_flight"))
                if depth > peak["depth"]:
                    peak.update(depth=depth, text=text, at_s=time.monotonic() - t0)
                peak["rss"] = max(peak["rss"], rss_kib(proxy.pid))
            except Exception:
                pass
            await asyncio.sleep(1.0)

    watcher = asyncio.create_task(watch())
    tasks = [asyncio.create_task(one_request(s, url, key, r)) for r in reqs]
    done, pending = await asyncio.wait(tasks, timeout=deadline_s)
    for t in pending:
        t.cancel()
    elapsed = time.monotonic() - t0
    results = []
    for t in tasks:
        if t in done and not t.cancelled() and t.exception() is None:
            results.append(t.result())
        else:
            results.append({"outcome": "lost", "detail": "no outcome before the deadline"})
    stop_watch.set()
    await watcher

    # settle, then check leaks
    status, emu_stats, metrics_after = {}, {}, ""
    for _ in range(120):
        async with s.get(f"http://127.0.0.1:{status_port}/sjf/status") as r:
            status = await r.json()
        async with s.get(f"http://127.0.0.1:{emu_port}/emulator/stats") as r:
            emu_stats = await r.json()
        metrics_after = await scrape(s, base, key)
        b = list(status.get("backends", {}).values())
        if (all(x["in_flight"] == 0 and x["waiting"] == 0 for x in b) and status.get("tracked_calls") == 0
                and emu_stats.get("in_flight") == 0):
            break
        await asyncio.sleep(0.5)
    await asyncio.sleep(2.0)
    outcomes = Counter(x["outcome"] for x in results)
    details = Counter(f'{x["outcome"]}: {x["detail"]}' for x in results if x["outcome"] != "ok")
    unexpected = sum(1 for r, x in zip(reqs, results) if r["fault"] is None and r["leave"] is None and x["outcome"] != "ok")
    backends = status.get("backends", {})
    return {
        "elapsed_s": round(elapsed, 1),
        "throughput_rps": round(len(reqs) / elapsed, 1),
        "outcomes": dict(outcomes),
        "errors_without_a_planned_fault_or_disconnect": unexpected,
        "details": dict(details.most_common(8)),
        "lost": outcomes.get("lost", 0),
        "leaked_in_flight": sum(x["in_flight"] for x in backends.values()),
        "leaked_waiting": sum(x["waiting"] for x in backends.values()),
        "tracked_calls_after": status.get("tracked_calls"),
        "metrics_in_flight_after": gauge_sum(metrics_after, "sjf_in_flight"),
        "metrics_queue_depth_after": gauge_sum(metrics_after, "sjf_queue_depth"),
        "emulator": {k: emu_stats.get(k) for k in ("received", "served", "errors", "dropped", "disconnects",
                                                   "disconnects_queued", "in_flight", "max_generating")},
        "queue_stats": {k: v["stats"] for k, v in backends.items()},
        "peak_queue_depth": peak["depth"],
        "peak_in_flight": peak["in_flight_max"],
        "burst_scrape_at_s": round(peak.get("at_s", 0.0), 1),
        "burst_scrape": peak["text"],
        "rss_peak_kib": peak["rss"],
        "rss_after_kib": rss_kib(proxy.pid),
    }


async def run(args) -> dict:
    rng = random.Random(args.seed)
    reqs = make_workload(args.requests, rng, args.disconnect_frac, args.fault_frac, args.stream_frac)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="sjf-soak-"))
    trace = work / "trace.jsonl"
    with trace.open("w") as f:
        for r in reqs:
            f.write(json.dumps({"prompt": r["prompt"], "answer_tokens": r["tokens"],
                                **({"fault": r["fault"]} if r["fault"] else {})}) + "\n")
        for i in range(20):
            f.write(json.dumps({"prompt": f"warm-up {i}", "answer_tokens": 20}) + "\n")

    emu_port = free_port()
    emu_log = open(work / "emulator.log", "wb")
    emu = subprocess.Popen([sys.executable, "-m", "sjf_lab.cli", "emulate", "--port", str(emu_port), "--trace", str(trace),
                            "--tokens-per-s", str(args.tokens_per_s), "--tick-s", "0.005", "--on-disconnect", "stop"],
                           stdout=emu_log, stderr=subprocess.STDOUT, cwd=work)
    status_port = free_port()
    cfg = proxy_config({"emu": [f"http://127.0.0.1:{emu_port}/v1"]}, plugin=True,
                       litellm_settings={"callbacks": ["prometheus", "litellm_sjf.proxy_handler_instance"],
                                         "request_timeout": args.deadline_s})
    proxy = LiteLLMProxy(cfg, env={"SJF_STATUS_PORT": str(status_port), "SJF_PLUGINS": "none"})
    result: dict = {"requests": args.requests, "rounds": args.rounds, "seed": args.seed,
                    "tokens_per_s": args.tokens_per_s, "planned_disconnects": sum(1 for r in reqs if r["leave"] is not None),
                    "planned_faults": dict(Counter(r["fault"] for r in reqs if r["fault"])), "bursts": []}
    try:
        await asyncio.get_running_loop().run_in_executor(None, proxy.start)
        base, key = proxy.base_url, proxy.master_key
        url = proxy.openai_base_url + "/chat/completions"
        timeout = aiohttp.ClientTimeout(total=args.deadline_s)
        # a fresh client session (connection pool) per phase: reusing keep-alive connections
        # the server closed meanwhile would fail requests on the client side before they
        # ever reach the proxy, which is not what this benchmark measures
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as s:
            # warm-up, then RSS "before"
            for i in range(20):
                await one_request(s, url, key, {"prompt": f"warm-up {i}", "stream": i % 2 == 0, "leave": None})
        await asyncio.sleep(1.0)
        result["rss_before_kib"] = rss_kib(proxy.pid)
        for rnd in range(args.rounds):
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as s:
                b = await burst(s, base, key, url, reqs, args.deadline_s, proxy, status_port, emu_port)
            if rnd == 0:
                (out / "soak_metrics_burst.prom").write_text(b["burst_scrape"])
            b.pop("burst_scrape")
            result["bursts"].append(b)
            print(f"burst {rnd + 1}/{args.rounds}: {b['outcomes']}, lost {b['lost']}, "
                  f"leaked {b['leaked_in_flight'] + b['leaked_waiting']}, RSS after {b['rss_after_kib'] / 1024:.0f} MiB",
                  file=sys.stderr, flush=True)
        result["rss_after_kib"] = result["bursts"][-1]["rss_after_kib"]
    finally:
        await asyncio.get_running_loop().run_in_executor(None, proxy.stop)
        emu.terminate()
        try:
            emu.wait(15)
        except subprocess.TimeoutExpired:
            emu.kill()
        emu_log.close()
        shutil.rmtree(work, ignore_errors=True)
    (out / "soak.json").write_text(json.dumps(result, indent=2))
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=2000, help="concurrent requests in the burst (default 2000)")
    p.add_argument("--tokens-per-s", type=float, default=100_000.0, help="emulator generation rate (default 100000)")
    p.add_argument("--disconnect-frac", type=float, default=0.10, help="share of clients that leave early (0.10)")
    p.add_argument("--fault-frac", type=float, default=0.05, help="share of requests with an injected backend fault (0.05)")
    p.add_argument("--stream-frac", type=float, default=0.5, help="share of streaming requests (0.5)")
    p.add_argument("--deadline-s", type=float, default=480.0, help="bound on the burst's duration, seconds (480)")
    p.add_argument("--rounds", type=int, default=1,
                   help="bursts in a row through the same proxy, to tell RSS growth from one-time warm-up (default 1)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default=str(ROOT / "runs"), help="output directory (default runs/)")
    args = p.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    res = asyncio.run(run(args))
    print(json.dumps(res, indent=2))
    mib = lambda kib: f"{kib / 1024:.0f} MiB"  # noqa: E731
    print(f"\nproxy RSS after warm-up: {mib(res['rss_before_kib'])}")
    print("\n| burst | requests | completed | disconnects (client) | errors seen by caller (unplanned) | lost | "
          "leaked slots | peak queue depth | RSS peak | RSS after | elapsed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    failed = False
    for i, b in enumerate(res["bursts"], 1):
        o = b["outcomes"]
        leaks = b["leaked_in_flight"] + b["leaked_waiting"]
        print(f"| {i} | {res['requests']} | {o.get('ok', 0)} | {o.get('disconnected', 0)} | {o.get('error', 0)} "
              f"({b['errors_without_a_planned_fault_or_disconnect']}) | "
              f"{b['lost']} | {leaks} | {b['peak_queue_depth']:.0f} | {mib(b['rss_peak_kib'])} | {mib(b['rss_after_kib'])} | "
              f"{b['elapsed_s']} s |")
        failed |= (b["lost"] != 0 or leaks != 0 or b["tracked_calls_after"] != 0 or b["metrics_in_flight_after"] != 0
                   or b["metrics_queue_depth_after"] != 0 or b["emulator"].get("in_flight") != 0)
    print("\nRESULT:", "FAIL" if failed else "PASS (0 lost, 0 leaked)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
