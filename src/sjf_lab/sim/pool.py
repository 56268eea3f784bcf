"""A pool of serial backends on a virtual clock: per-backend queues vs one pool queue (M/G/k).

:func:`simulate_pool` runs ``k`` serial members (1 slot each) of relative speeds ``speeds``
(a job's service on member i is its service time / speeds[i]) on the box simulator
(:func:`~sjf_lab.sim.boxes.simulate_boxes`: one box per member, one model) in one of two
layouts:

* ``"pool"``: one pending structure for the whole pool (the live pool's); whenever a member
  can start a request the head goes where :class:`~sjf_core.policy._placement.Placement`
  says it finishes first — the very rule the live pool runs; the simulator starts only a
  member that is free (a rule that hands out a busy one raises);
* ``"random"`` / ``"round-robin"``: the job is routed to a member on arrival (LiteLLM's
  ``simple-shuffle`` is a random pick; round-robin is the best a speed-blind router does)
  and waits in that member's own pending structure (today's per-backend queues; with the
  ``fcfs`` policy: no plugin at all, each backend's own FIFO).

Besides latency it measures **idle while waiting**: member-seconds during which a member
held no request while a request it could serve had not started, the figure the live bench
reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sjf_core.policy._placement import DEFAULT_MARGIN
from sjf_core.policy._policies import Policy
from sjf_lab.sim.boxes import BoxSpec, ModelSpec, simulate_boxes
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
    violations: list
    max_in_flight: list

    def stat(self, what: str, klass: int | None, q: float) -> float:
        """Percentile ``q`` of ``what`` ("wait" / "sojourn") for true class ``klass`` (None: all)."""
        v = getattr(self, what)
        v = v if klass is None else v[self.klass == klass]
        return float(np.percentile(v, q)) if len(v) else math.nan


def simulate_pool(wl: Workload, predictions, policy: Policy, speeds=(1.0, 1.0), layout: str = "pool",
                  seed: int = 0, speed_aware: bool = True, reserve: bool = True,
                  margin: float = DEFAULT_MARGIN, jitter: float = 0.0, **rule_kw) -> PoolSimResult:
    """Run ``wl`` on ``len(speeds)`` serial members in ``layout`` (module docstring).

    Args:
        wl: the jobs; ``wl.service`` is seconds at speed 1, ``wl.tokens`` the answer tokens.
        predictions: one Prediction (or None) per job.
        policy: the policy (a fresh pending structure per queue).
        speeds: relative speed of each member (1 slot each).
        layout: "pool", "random" or "round-robin".
        seed: the random router's seed (and the jitter's).
        speed_aware, reserve, margin, **rule_kw: the rule's options (:class:`Placement`).
        jitter: σ of a per-request log-normal factor on the true service (noisy speeds).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    n = len(wl)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = float(np.nanmedian(wl.tokens / wl.service)) if n else 1.0
    boxes = [BoxSpec(f"m{i}", (ModelSpec("pool", rate * float(s)),)) for i, s in enumerate(speeds)]
    if layout == "pool":
        kw = dict(rule_kw, speed_aware=speed_aware, reserve=reserve, margin=margin)
        kw["order"] = "seconds" if speed_aware else "tokens"
        kw.pop("speed_aware")
        r = simulate_boxes(boxes, wl.arrival, wl.tokens, ["pool"] * n, predictions, policy, layer="runner",
                           jitter=jitter, seed=seed, overhead_tokens=0.0, reserve=reserve, margin=margin,
                           **{k: v for k, v in kw.items() if k not in ("reserve", "margin")})
    else:
        r = simulate_boxes(boxes, wl.arrival, wl.tokens, ["pool"] * n, predictions, policy, layer="routed",
                           jitter=jitter, seed=seed, overhead_tokens=0.0, route=layout)
    member = np.array([int(b[1:]) if b is not None else -1 for b in r.box], dtype=np.int64)
    served = [int(np.sum(member == i)) for i in range(len(speeds))]
    return PoolSimResult(wait=r.sent - r.arrival, sojourn=r.sojourn, klass=wl.klass, member=member,
                         idle_waiting_s=r.idle_waiting_s, makespan=r.makespan, served=served,
                         violations=r.violations, max_in_flight=[r.max_sent[f"m{i}#pool"] for i in range(len(speeds))])
