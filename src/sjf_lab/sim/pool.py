"""A pool of serial backends on a virtual clock: per-backend queues vs one pool queue (M/G/k).

:func:`simulate_pool` runs ``k`` serial members (1 slot each) of relative speeds ``speeds``
(a job's service on member i is its service time / speeds[i]) in one of two layouts:

* ``"pool"``: one pending structure for the whole pool (the live pool's); whenever a member
  has a free slot the head goes to a member chosen by
  :class:`~sjf_core.policy._pool_rule.PoolRule` — the very rule the live pool runs;
* ``"random"`` / ``"round-robin"``: the job is routed to a member on arrival (LiteLLM's
  ``simple-shuffle`` is a random pick; round-robin is the best a speed-blind router does)
  and waits in that member's own pending structure (today's per-backend queues; with the
  ``fcfs`` policy: no plugin at all, each backend's own FIFO).

Besides latency it measures **idle while waiting**: member-seconds during which a member
held no request while some request waited (anywhere), the figure the live bench reports.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from sjf_core.policy._entry import class_of_tokens
from sjf_core.policy._policies import Policy
from sjf_core.policy._pool_rule import DEFAULT_MARGIN, PoolMember, PoolRule
from sjf_lab.sim.workload import Workload

LAYOUTS = ("pool", "random", "round-robin")


@dataclass
class PoolSimResult:
    """Outcome of one pool simulation (arrays per job, in arrival order)."""

    wait: np.ndarray
    sojourn: np.ndarray
    klass: np.ndarray
    member: np.ndarray
    idle_waiting_s: float
    makespan: float
    served: list

    def stat(self, what: str, klass: int | None, q: float) -> float:
        """Percentile ``q`` of ``what`` ("wait" / "sojourn") for true class ``klass`` (None: all)."""
        v = getattr(self, what)
        v = v if klass is None else v[self.klass == klass]
        return float(np.percentile(v, q)) if len(v) else math.nan


class _Run:
    """The mutable state of one run (one job = one index of the workload)."""

    def __init__(self, wl: Workload, speeds, layout: str, policy: Policy, rule_kw: dict, seed: int):
        n, k = len(wl), len(speeds)
        self.wl, self.speeds, self.layout, self.policy = wl, [float(s) for s in speeds], layout, policy
        self.members = [PoolMember(f"m{i}") for i in range(k)]
        self.rule = PoolRule(self.members, **rule_kw) if layout == "pool" else None
        self.pendings = [policy.new_pending() for _ in range(1 if layout == "pool" else k)]
        for p in self.pendings:
            if hasattr(p, "slots"):
                p.slots = k if layout == "pool" else 1
        self.rng = np.random.default_rng(seed)
        self.start = np.full(n, math.nan)
        self.finish = np.full(n, math.nan)
        self.where = np.full(n, -1, dtype=np.int64)
        self.entries: list = [None] * n
        self.done: list = []  # (finish time, member index, job)
        self.rr = 0

    def route(self, j: int) -> int:
        """The pending structure that job ``j`` joins."""
        if self.layout == "pool":
            return 0
        if self.layout == "random":
            return int(self.rng.integers(len(self.members)))
        self.rr += 1
        return (self.rr - 1) % len(self.members)

    def waiting(self) -> bool:
        return any(len(p) for p in self.pendings) or bool(self.rule is not None and self.rule.waiting)

    def begin(self, entry, i: int, now: float) -> None:
        j = entry.payload
        m = self.members[i]
        PoolRule.started(m, entry, now)
        entry.dispatched_at = now
        self.start[j], self.where[j] = now, i
        heapq.heappush(self.done, (now + float(self.wl.service[j]) / self.speeds[i], i, j))

    def dispatch(self, now: float) -> None:
        if self.rule is None:
            for i, (m, p) in enumerate(zip(self.members, self.pendings)):
                while m.free() > 0 and len(p):
                    e = p.pop(now)
                    if e is None:
                        break
                    self.begin(e, i, now)
            return
        index = {id(m): i for i, m in enumerate(self.members)}
        for e, m in self.rule.ready(now):
            self.begin(e, index[id(m)], now)
        p = self.pendings[0]
        while len(p) and self.rule.any_free():
            e = p.pop(now)
            if e is None:
                break
            m = self.rule.place(e, now)
            if m is not None:
                self.begin(e, index[id(m)], now)

    def complete(self, now: float) -> None:
        while self.done and self.done[0][0] <= now:
            _, i, j = heapq.heappop(self.done)
            e, m = self.entries[j], self.members[i]
            tokens = float(self.wl.tokens[j])
            PoolRule.finished(m, e, now, tokens)
            self.finish[j] = now
            p = self.pendings[0 if self.rule is not None else i]
            p.observe(e, now - self.start[j], class_of_tokens(tokens), tokens)


def simulate_pool(wl: Workload, predictions, policy: Policy, speeds=(1.0, 1.0), layout: str = "pool",
                  seed: int = 0, speed_aware: bool = True, reserve: bool = True,
                  margin: float = DEFAULT_MARGIN) -> PoolSimResult:
    """Run ``wl`` on ``len(speeds)`` serial members in ``layout`` (module docstring).

    Args:
        wl: the jobs; ``wl.service`` is seconds at speed 1, ``wl.tokens`` the answer tokens.
        predictions: one Prediction (or None) per job.
        policy: the policy (a fresh pending structure per queue).
        speeds: relative speed of each member (1 slot each).
        layout: "pool", "random" or "round-robin".
        seed: the random router's seed.
        speed_aware, reserve, margin: the pool rule's options (:class:`PoolRule`).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    run = _Run(wl, speeds, layout, policy, {"speed_aware": speed_aware, "reserve": reserve, "margin": margin}, seed)
    n, i, now, idle_waiting = len(wl), 0, 0.0, 0.0
    arrival = wl.arrival
    while i < n or run.done or run.waiting():
        t_arr = float(arrival[i]) if i < n else math.inf
        t_done = run.done[0][0] if run.done else math.inf
        expiry = run.rule.next_expiry(now) if run.rule is not None else None
        t_next = min(t_arr, t_done, expiry if expiry is not None else math.inf)
        if not math.isfinite(t_next):
            break
        if run.waiting():
            idle = sum(1 for m in run.members if not m.running)
            idle_waiting += idle * (t_next - now)
        now = max(now, t_next)
        run.complete(now)
        while i < n and arrival[i] <= now:
            e = policy.make_entry(i, float(arrival[i]), predictions[i], None)
            e.payload = i
            run.entries[i] = e
            run.pendings[run.route(i)].push(e)
            i += 1
        run.dispatch(now)
    wait = run.start - arrival
    return PoolSimResult(wait=wait, sojourn=run.finish - arrival, klass=wl.klass, member=run.where,
                         idle_waiting_s=idle_waiting, makespan=now, served=[m.served for m in run.members])
