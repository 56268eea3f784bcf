#!/usr/bin/env python
"""Cost of queue operations with 1k, 10k and 100k waiters (µs per enqueue + dispatch).

Two levels, each at a steady queue depth of N waiters (one enqueue and one
dispatch per operation, so the depth stays N):

* ``pending``: the pure pending structure of a policy (``policy.new_pending()``:
  :class:`sjf_core.policy._pending.HeapPending`, or DRR for ``fair``): ``push`` + ``pop(now)``
  + ``observe`` of the finished request.
* ``handoff``: the same task-per-request dance with a bare FIFO of futures and no
  queue logic at all: the asyncio floor that ``admission`` pays anyway.
* ``admission``: the live asyncio :class:`sjf_core.admission._local.LocalAdmissionQueue` with
  one slot: a new ticket's ``acquire()`` runs in its own task (enqueue) and the
  running ticket's ``release()`` dispatches the next waiter, whose task then
  wakes. This is the per-request cost inside the plugins (event-loop task steps
  included; prediction excluded).

Both run on a virtual clock (the queue's ``clock`` / ``pop(now)`` argument): each
operation advances it by the service time of the request that just finished,
drawn per predicted class from Gamma distributions with the paper's Table 1 means
(Short 2.0 s, Medium 8.5 s, Long 30.1 s; C² = 1). So τ (3 × mean Short service)
is live, waiters age past it, and the τ estimate moves as it would in service.
Keys are random P(Long) values.

Usage::

    .venv/bin/python benchmarks/queue_ops.py [--sizes 1000,10000,100000] [--ops 20000] [--json out.json]
    .venv/bin/python benchmarks/queue_ops.py --before ../sjf-4ec63d7/src   # before/after (git worktree add ../sjf-4ec63d7 4ec63d7)

``--before SRC`` compares another source tree (e.g. the code before a change; the old
module names ``sjf_core.admission`` etc. are understood) with this one: for each size and
repeat it runs the ``admission`` and ``handoff`` levels once per tree, alternating, each in
a fresh subprocess (``PYTHONPATH=SRC`` vs this tree's ``src``), and prints per size the
live queue's own cost (admission minus the asyncio floor), before and after. It times
chunks in this thread's CPU time (``--timer cpu``), so that the other jobs of a shared
machine do not count; ``--timer wall`` for the wall clock.

Prints µs/op per size (the median of 250-operation chunks, best of ``--repeat`` runs:
the machine is shared, and a chunk in which another process took the CPU is an outlier)
and the growth factor vs the smallest size. Target
(issue 6): ≤ 20 µs/op at 100k waiters, growing like log N, not N.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import random
import sys
import time

import os
import subprocess
import tempfile

try:
    try:
        from sjf_core.admission._local import LocalAdmissionQueue as AdmissionQueue, QueueEvents
    except ImportError:  # before the store factory: the contract constructed the local store
        from sjf_core.admission._local import AdmissionQueue, QueueEvents
    from sjf_core.policy._entry import Entry
    from sjf_core.policy._policies import POLICIES, make_policy
    from sjf_core.predict._prediction import Prediction
except ImportError:  # the code before the redesign (--before): its old module names
    from sjf_core.admission import AdmissionQueue, QueueEvents
    from sjf_core.entry import Entry
    from sjf_core.policies import POLICIES, make_policy
    from sjf_core.prediction import Prediction


def _prediction(rng: random.Random) -> Prediction:
    pl = rng.random()
    ps = (1 - pl) * rng.random()
    return Prediction.from_probs([ps, 1 - pl - ps, pl])


#: The timer of every chunk: wall clock (``time.perf_counter``) or, with ``--timer cpu``, this
#: thread's CPU time (``time.thread_time``: time other processes of a shared machine take
#: the CPU away is not counted; everything here runs in one thread).
_clock = time.perf_counter

#: Operations per timed chunk. The machine is shared: each run reports the median chunk,
#: which ignores chunks in which another process took the CPU.
CHUNK = 250


def _per_op_us(chunks: list[float]) -> float:
    if not chunks:
        raise ValueError(f"--ops must be at least {CHUNK}")
    chunks = sorted(chunks)
    return chunks[len(chunks) // 2] / CHUNK * 1e6


#: Mean service time per class, seconds (paper Table 1, Apple M1, Gemma3:4b).
MEAN_SERVICE_S = (2.0, 8.5, 30.1)


def service_s(rng: random.Random, klass: int) -> float:
    """A service time (s) of a request of class ``klass``: Gamma, C² = 1 (exponential)."""
    return rng.expovariate(1.0 / MEAN_SERVICE_S[klass])


def _policy(policy_name: str, promotion: str | None):
    return make_policy(policy_name) if promotion in (None, "default") else make_policy(policy_name, promotion=promotion)


def bench_pending(policy_name: str, n: int, ops: int, seed: int = 0, promotion: str | None = None) -> float:
    """µs per (push + pop + observe) on ``policy.new_pending()`` at steady depth ``n``."""
    rng = random.Random(seed)
    policy = _policy(policy_name, promotion)
    pend = policy.new_pending()
    now = 0.0
    seq = 0

    def entry() -> Entry:
        nonlocal seq
        seq += 1
        p = _prediction(rng)
        return Entry(seq=seq, arrival=now, key=float(policy.key(p, _META)), klass=p.klass,
                     expected_tokens=p.expected_tokens)

    for _ in range(n):
        pend.push(entry())
        now += 0.001
    # pre-build entries and service times so that only queue work is timed
    fresh = [entry() for _ in range(ops)]
    services = [service_s(rng, e.klass) for e in fresh]
    running = pend.pop(now)
    gc.collect()
    gc.disable()
    chunks = []
    try:
        t0 = _clock()
        for i, (e, s) in enumerate(zip(fresh, services), 1):
            now += s  # the running request finishes after its service time
            pend.observe(running, s)
            e.arrival = now
            pend.push(e)
            running = pend.pop(now)
            if i % CHUNK == 0:
                t1 = _clock()
                chunks.append(t1 - t0)
                t0 = t1
    finally:
        gc.enable()
    return _per_op_us(chunks)


class _Holder(QueueEvents):
    def __init__(self):
        self.running = None

    def on_dispatch(self, queue, entry, wait_s):
        self.running = entry.payload


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _bench_admission(policy_name: str, n: int, ops: int, seed: int, promotion: str | None) -> float:
    rng = random.Random(seed)
    holder = _Holder()
    clock = _Clock()
    q = AdmissionQueue(slots=1, policy=_policy(policy_name, promotion), listeners=[holder], clock=clock)
    tasks = [asyncio.ensure_future(q.ticket(_prediction(rng)).acquire()) for _ in range(n + 1)]
    await asyncio.sleep(0)  # all enqueue; the first gets the slot
    await asyncio.sleep(0)
    assert q.waiting == n and q.in_flight == 1, (q.waiting, q.in_flight)
    preds = [_prediction(rng) for _ in range(ops)]
    services = [service_s(rng, p.klass) for p in preds]
    gc.collect()
    gc.disable()
    chunks = []
    try:
        t0 = _clock()
        for i, (p, s) in enumerate(zip(preds, services), 1):
            clock.now += s  # the running request finishes after its service time
            t = q.ticket(p)
            tasks.append(asyncio.ensure_future(t.acquire()))
            await asyncio.sleep(0)  # the new task enqueues; the last dispatched one wakes
            holder.running.release()  # dispatch the next waiter
            if i % CHUNK == 0:
                t1 = _clock()
                chunks.append(t1 - t0)
                t0 = t1
        await asyncio.sleep(0)
    finally:
        gc.enable()
    assert q.waiting == n, q.waiting
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return _per_op_us(chunks)


def bench_admission(policy_name: str, n: int, ops: int, seed: int = 0, promotion: str | None = None) -> float:
    """µs per (enqueue + dispatch) on a live 1-slot ``AdmissionQueue`` with ``n`` waiters."""
    return asyncio.run(_bench_admission(policy_name, n, ops, seed, promotion))


async def _bench_handoff(n: int, ops: int) -> float:
    import collections

    loop = asyncio.get_running_loop()
    futs = collections.deque(loop.create_future() for _ in range(n))
    tasks = [asyncio.ensure_future(_wait(f)) for f in futs]
    await asyncio.sleep(0)
    gc.collect()
    gc.disable()
    chunks = []
    try:
        t0 = _clock()
        for i in range(1, ops + 1):
            f = loop.create_future()
            futs.append(f)
            tasks.append(asyncio.ensure_future(_wait(f)))
            await asyncio.sleep(0)
            futs.popleft().set_result(True)
            if i % CHUNK == 0:
                t1 = _clock()
                chunks.append(t1 - t0)
                t0 = t1
        await asyncio.sleep(0)
    finally:
        gc.enable()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return _per_op_us(chunks)


async def _wait(f):
    await f


def bench_handoff(policy_name: str, n: int, ops: int, seed: int = 0, promotion: str | None = None) -> float:
    """µs per op of the same task dance with a bare FIFO of futures and no queue logic: the
    asyncio floor that ``admission`` includes (a task per request, a future, a wake-up)."""
    return asyncio.run(_bench_handoff(n, ops))


class _Meta:
    max_tokens = None
    priority = 0
    deadline_s = None


_META = _Meta()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="waiter counts (default 1000,10000,100000)")
    ap.add_argument("--ops", type=int, default=20000, help="timed operations per size (default 20000)")
    ap.add_argument("--policies", default=None, help="policies (default: sjf, and fair if available)")
    ap.add_argument("--promotions", default="default",
                    help="τ promotion rules to compare: default (the policy's), strict, one-in-k, aging, ... "
                         "(comma-separated; default: default)")
    ap.add_argument("--levels", default="pending,admission,handoff",
                    help="pending, admission, handoff (the bare asyncio floor; default all three)")
    ap.add_argument("--repeat", type=int, default=3, help="repeats per cell; the fastest is reported (default 3)")
    ap.add_argument("--json", default=None, help="write results as JSON here")
    ap.add_argument("--timer", choices=("wall", "cpu"), default=None,
                    help="chunk timer: wall clock, or this thread's CPU time (default: wall; cpu with --before)")
    ap.add_argument("--seed", type=int, default=0, help="first random seed (repeat r uses seed + r)")
    ap.add_argument("--before", default=None, metavar="SRC",
                    help="source tree to compare with this one (e.g. ../sjf-4ec63d7/src, a git worktree of an older commit): before/after table")
    args = ap.parse_args(argv)
    global _clock
    timer = args.timer or ("cpu" if args.before else "wall")
    _clock = time.thread_time if timer == "cpu" else time.perf_counter
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.before:
        return compare(args.before, sizes, args.ops, args.repeat, (args.policies or "sjf").split(",")[0],
                       args.promotions.split(",")[0].strip(), args.json, timer)
    pols = args.policies.split(",") if args.policies else [p for p in ("sjf", "fair") if p in POLICIES]
    promos = [p.strip() for p in args.promotions.split(",") if p.strip()]
    levels = {"pending": bench_pending, "admission": bench_admission, "handoff": bench_handoff}
    rows = []
    for level in [lv.strip() for lv in args.levels.split(",") if lv.strip()]:
        fn = levels[level]
        for pol in (pols if level != "handoff" else ["-"]):
            for promo in (promos if level != "handoff" else ["-"]):
                base = None
                for n in sizes:
                    # best of `repeat`: the machine is shared; the minimum is the least disturbed run
                    us = min(fn(pol, n, args.ops, seed=args.seed + r, promotion=promo) for r in range(args.repeat))
                    base = us if base is None else base
                    eff = promo if promo != "default" else f"default={getattr(_policy(pol, None), 'promotion', '?')}"
                    rows.append({"level": level, "policy": pol, "promotion": eff, "waiters": n, "us_per_op": us,
                                 "growth": us / base})
                    print(f"{level:9s}  {pol:5s}  {eff:16s}  {n:>7d} waiters  {us:9.2f} µs/op  "
                          f"×{us / base:6.2f} vs {sizes[0]}", flush=True)
    big = [r for r in rows if r["waiters"] == max(sizes)]
    for level in ("pending", "admission"):
        worst = max((r["us_per_op"] for r in big if r["level"] == level), default=math.nan)
        print(f"worst {level} at {max(sizes)} waiters: {worst:.2f} µs/op (target ≤ 20 µs/op)")
    floor = [r["us_per_op"] for r in big if r["level"] == "handoff"]
    if floor:
        print(f"asyncio floor (handoff) at {max(sizes)}: {floor[0]:.2f} µs/op; admission minus floor = queue's own cost")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ops": args.ops, "repeat": args.repeat, "rows": rows}, f, indent=1)
    return 0


#: This tree's sources (the "after" side of --before).
HERE_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def _one_cell(src: str, n: int, ops: int, seed: int, policy: str, promotion: str, timer: str) -> dict:
    """Run admission + handoff at ``n`` waiters once, in a subprocess on the sources ``src``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        env = dict(os.environ, PYTHONPATH=src)
        cmd = [sys.executable, os.path.abspath(__file__), "--levels", "admission,handoff,pending",
               "--sizes", str(n), "--ops", str(ops), "--repeat", "1", "--policies", policy, "--promotions", promotion,
               "--seed", str(seed), "--timer", timer, "--json", out]
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            rows = json.load(f)["rows"]
    got = {r["level"]: r["us_per_op"] for r in rows}
    return {"admission": got["admission"], "handoff": got["handoff"], "pending": got["pending"],
            "promotion": rows[0]["promotion"]}


def compare(before_src: str, sizes: list[int], ops: int, repeat: int, policy: str, promotion: str,
            json_out: str | None, timer: str = "cpu") -> int:
    """Before/after table of the live queue's own cost (admission − handoff), µs per request."""
    trees = {"before": os.path.abspath(before_src), "after": HERE_SRC}
    print(f"live queue cost above the asyncio floor, µs per request (policy {policy}, promotion {promotion}, "
          f"{ops} ops, best of {repeat}, {timer} time; before = {trees['before']}, after = {trees['after']})",
          flush=True)
    print("cost = admission − floor (handoff); of it, 'pend' is the pure pending structure alone "
          "(push + pop + observe, no tasks) and 'rest' = cost − pend (ticket, future, listeners, lease)", flush=True)
    print(f"{'waiters':>8} | {'before: admission':>17} {'floor':>6} {'cost':>6} {'pend':>6} {'rest':>6} | "
          f"{'after: admission':>16} {'floor':>6} {'cost':>6} {'pend':>6} {'rest':>6} | {'cost after/before':>17}",
          flush=True)
    rows = []
    for n in sizes:
        best: dict[str, dict] = {}
        for r in range(repeat):
            for side, src in (trees.items() if r % 2 == 0 else reversed(list(trees.items()))):
                cell = _one_cell(src, n, ops, r, policy, promotion, timer)
                # the least disturbed runs: the smallest admission and the smallest floor time
                if side not in best:
                    best[side] = cell
                else:
                    best[side]["admission"] = min(best[side]["admission"], cell["admission"])
                    best[side]["handoff"] = min(best[side]["handoff"], cell["handoff"])
                    best[side]["pending"] = min(best[side]["pending"], cell["pending"])
        for cell in best.values():
            cell["cost"] = cell["admission"] - cell["handoff"]
        b, a = best["before"], best["after"]
        rows.append({"waiters": n, "before": b, "after": a})
        if b["promotion"] != a["promotion"]:
            print(f"note: the trees' default promotions differ: before {b['promotion']}, after {a['promotion']}")
        print(f"{n:>8} | {b['admission']:>17.2f} {b['handoff']:>6.2f} {b['cost']:>6.2f} {b['pending']:>6.2f} "
              f"{b['cost'] - b['pending']:>6.2f} | {a['admission']:>16.2f} {a['handoff']:>6.2f} {a['cost']:>6.2f} "
              f"{a['pending']:>6.2f} {a['cost'] - a['pending']:>6.2f} | {a['cost'] / b['cost']:>17.2f}", flush=True)
    big = rows[-1]
    print(f"after at {big['waiters']} waiters: {big['after']['cost']:.2f} µs/request above the floor "
          f"(target ≤ 20); growth {big['after']['cost'] / rows[0]['after']['cost']:.2f}× vs {rows[0]['waiters']}")
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"ops": ops, "repeat": repeat, "policy": policy, "promotion": promotion, "timer": timer,
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
