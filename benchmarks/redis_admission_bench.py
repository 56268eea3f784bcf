#!/usr/bin/env python
"""Cost of one admission through Redis vs in-process, measured in one run (ms, p50/p95).

Three measurements per store, on the same event loop, one after the other:

* ``admit``: an uncontended admission, ``await ticket.acquire()`` on an idle queue
  (Redis: one enqueue script call that grants at once);
* ``admit+release``: the same plus ``await ticket.arelease()`` (Redis: plus one release
  script call; in-process ``release()`` is synchronous);
* ``handoff``: a waiter is queued behind a holder; the time from the holder's release to
  the waiter's ``acquire()`` returning. In-process this is a future resolved on the same
  loop; through Redis it is the release script dispatching, the grant pushed to the
  waiter's list, and its blocking ``BLPOP`` returning. LiteLLM's own scheduler polls
  every 30 ms, i.e. ~15 ms mean handoff delay, for comparison.

Both stores run the same policy (``sjf``, default promotion) with one slot. The Redis
store talks to a real ``redis-server`` on 127.0.0.1: ``--url`` or a throw-away server
this script starts (no persistence). Prediction is excluded (identical for both).

Usage::

    .venv/bin/python benchmarks/redis_admission_bench.py [--n 2000] [--handoffs 300] [--url redis://...] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the throw-away redis-server helper

from sjf_core.admission._local import LocalAdmissionQueue  # noqa: E402
from sjf_core.predict._prediction import Prediction# noqa: E402
from sjf_core.admission._redis import RedisAdmissionQueue# noqa: E402

PRED = Prediction.from_probs([0.7, 0.2, 0.1])


def ms(values) -> dict:
    a = np.asarray(values, float) * 1000.0
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "n": int(a.size)}


async def release(t) -> None:
    if hasattr(t, "arelease"):
        await t.arelease()
    else:
        t.release()


async def measure(q, n: int, handoffs: int) -> dict:
    for _ in range(50):  # warm-up: connections, script loading
        t = q.ticket(PRED)
        await t.acquire()
        await release(t)
    admit, both = [], []
    for _ in range(n):
        t = q.ticket(PRED)
        t0 = time.perf_counter()
        await t.acquire()
        t1 = time.perf_counter()
        await release(t)
        t2 = time.perf_counter()
        admit.append(t1 - t0)
        both.append(t2 - t0)
    hand = []
    for _ in range(handoffs):
        holder = q.ticket(PRED)
        await holder.acquire()
        waiter = q.ticket(PRED)
        task = asyncio.create_task(waiter.acquire())
        for _ in range(2000):  # until it waits in the queue (Redis: enqueued, blocked in BLPOP)
            await asyncio.sleep(0)
            if q.waiting >= 1 and (getattr(waiter, "rid", None) is not None or not hasattr(waiter, "rid")):
                break
        await asyncio.sleep(0.002)
        t0 = time.perf_counter()
        holder.release()
        await task
        hand.append(time.perf_counter() - t0)
        await release(waiter)
    return {"admit": ms(admit), "admit+release": ms(both), "handoff": ms(hand)}


async def run(url: str, n: int, handoffs: int) -> dict:
    local = LocalAdmissionQueue(1, "sjf", "bench")
    shared = RedisAdmissionQueue(url, slots=1, policy="sjf", name=f"bench-{uuid.uuid4().hex[:8]}")
    out = {"in-process": await measure(local, n, handoffs), "redis": await measure(shared, n, handoffs)}
    await shared.aclose()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="uncontended admissions per store")
    ap.add_argument("--handoffs", type=int, default=300, help="release-to-waiter handoffs per store")
    ap.add_argument("--url", default=None, help="Redis URL (default: start a throw-away redis-server)")
    ap.add_argument("--json", default=None, help="write the results to this JSON file")
    args = ap.parse_args(argv)
    server = None
    url = args.url
    if url is None:
        from redis_server import RedisServer

        server = RedisServer().start()
        url = server.url
    try:
        res = asyncio.run(run(url, args.n, args.handoffs))
    finally:
        if server is not None:
            server.close()
    print(f"admission cost, 1 slot, policy sjf; Redis {'given' if args.url else 'local redis-server 127.0.0.1'}")
    print(f"{'store':<12}{'admit p50':>11}{'p95':>8}{'admit+rel p50':>15}{'p95':>8}{'handoff p50':>13}{'p95':>8}   (ms)")
    for store, r in res.items():
        print(f"{store:<12}{r['admit']['p50']:>11.3f}{r['admit']['p95']:>8.3f}{r['admit+release']['p50']:>15.3f}"
              f"{r['admit+release']['p95']:>8.3f}{r['handoff']['p50']:>13.3f}{r['handoff']['p95']:>8.3f}")
    a, b = res["redis"], res["in-process"]
    print(f"Redis overhead per admission (p50): {a['admit+release']['p50'] - b['admit+release']['p50']:.3f} ms "
          f"(admit+release), {a['admit']['p50'] - b['admit']['p50']:.3f} ms (admit only); "
          f"handoff p50 {a['handoff']['p50']:.2f} ms vs LiteLLM's 30 ms poll (~15 ms mean)")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
