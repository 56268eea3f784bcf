"""Before/after identity check of the scheduling code: the simulator on a policy × rule grid.

Runs ``sjf_lab.sim.simulate`` for every policy × promotion rule (and the policy's default rule)
over a fixed set of cases (Poisson and burst workloads, 1-2 slots, three predictor kinds, τ
settings, max_wait_s, priorities and deadlines, tenants, overload limits, warm-up) and prints one
line per run: the dispatch order's and the waits' digests, promotions, makespan, rejections.
Two trees give the same output iff the scheduling behaviour is the same on the grid:

    .venv/bin/python scripts/sim_grid.py > /tmp/after.txt && diff /tmp/before.txt /tmp/after.txt

Deterministic (fixed seeds); a refactor that changes no behaviour changes no line.
"""

from __future__ import annotations

import hashlib
import sys

import numpy as np

from sjf_core.admission._overload import OverloadConfig
from sjf_core.policy._policies import POLICIES, RequestMeta

try:  # typed settings (issue 24): the flat options go through the tooling's policy_of
    from sjf_lab.sim.policies import policy_of as make_policy
except ImportError:  # the code before it: make_policy took the flat options
    from sjf_core.policy._policies import make_policy
from sjf_core.policy.promotion import PROMOTIONS
from sjf_lab.sim import PredictorModel, WorkloadSpec, burst_workload, poisson_workload, simulate

N = 300


def _metas(n: int, seed: int, tenants: bool = False, intent: bool = False) -> list[RequestMeta]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        prio = int(rng.integers(0, 3)) if intent else 0
        deadline = float(rng.uniform(5, 120)) if intent and rng.random() < 0.3 else None
        tenant = f"t{int(rng.integers(0, 3))}" if tenants else None
        out.append(RequestMeta(max_tokens=int(rng.integers(50, 2000)) if intent else None, priority=prio,
                               deadline_s=deadline, explicit_priority=intent, tenant=tenant))
    return out


def _cases():
    spec = WorkloadSpec()
    acc = PredictorModel("class", accuracy=0.85)
    tok = PredictorModel("tokens", mult_error=0.4)
    none = PredictorModel("none")
    yield "p75-acc", poisson_workload(spec, 0.75, N, 1), acc, {}, {}
    yield "p95-acc", poisson_workload(spec, 0.95, N, 2), acc, {}, {}
    yield "p95-tok", poisson_workload(spec, 0.95, N, 3), tok, {}, {}
    yield "p90-none", poisson_workload(spec, 0.9, N, 4), none, {}, {}
    yield "p90-k2", poisson_workload(spec, 0.9, N, 5, slots=2), acc, {}, {"slots": 2}
    yield "p95-tauoff", poisson_workload(spec, 0.95, N, 6), acc, {"tau": "off"}, {}
    yield "p95-tau5s", poisson_workload(spec, 0.95, N, 7), tok, {"tau": 5.0}, {}
    yield "p95-maxwait", poisson_workload(spec, 0.95, N, 8), acc, {"max_wait_s": 60.0}, {}
    yield "p95-opts", poisson_workload(spec, 0.95, N, 9), acc, {"k": 3, "horizon": 4.0, "slack": 0.5, "floor": 2.0,
                                                               "slowdown": 2.0, "work_slack": 1.0}, {}
    yield "p95-intent", poisson_workload(spec, 0.95, N, 10), tok, {}, {"metas": _metas(N, 10, intent=True)}
    yield "p95-tenants", poisson_workload(spec, 0.95, N, 11), acc, {}, {"metas": _metas(N, 11, tenants=True),
                                                                      "fairness": "user"}
    yield "p120-overload", poisson_workload(spec, 1.2, N, 12), acc, {}, {
        "overload": OverloadConfig(max_queue_depth=20, max_predicted_wait_s=300.0)}
    yield "p90-warm", poisson_workload(spec, 0.9, N, 13), acc, {}, {"warmup": 50, "warmup_speedup": 20.0}
    yield "burst-acc", burst_workload(spec, (50, 0, 50), seed=14), acc, {}, {}
    yield "burst-tok", burst_workload(spec, (40, 20, 40), seed=15), tok, {}, {}
    yield "burst-k2", burst_workload(spec, (50, 0, 50), seed=16), acc, {}, {"slots": 2}
    yield "burst-maxwait", burst_workload(spec, (50, 0, 50), seed=17), tok, {"max_wait_s": 120.0}, {}


def _digest(a) -> str:
    return hashlib.sha1(np.ascontiguousarray(a).tobytes()).hexdigest()[:12]


def main() -> int:
    cases = list(_cases())
    runs = 0
    for pname in sorted(POLICIES):
        for rule in (None, *PROMOTIONS):
            for label, wl, model, opts, sim_kw in cases:
                kw = dict(opts)
                if rule is not None:
                    kw["promotion"] = rule
                preds, _ = model.predict(wl, np.random.default_rng(99))
                policy = make_policy(pname, **kw)
                r = simulate(wl, preds, policy, record_order=True, **sim_kw)
                print(f"{pname:10s} {rule or 'default':10s} {label:14s} order={_digest(np.array(r.order))} "
                      f"wait={_digest(np.nan_to_num(r.wait, nan=-1.0))} promotions={r.promotions} "
                      f"makespan={r.makespan!r} max_waiting={r.max_waiting} rejected={int(r.rejected.sum())}")
                runs += 1
    print(f"runs: {runs}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
