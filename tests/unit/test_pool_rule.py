"""The pool's dispatch rule (sjf_core.policy._pool_rule) and the M/G/k pool simulator
(sjf_lab.sim.pool): who serves the head, when a Long waits for a faster member, and that
one pool queue leaves no member idle while a request waits. Virtual clocks only."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sjf_core.policy._entry import LONG, SHORT, Entry
from sjf_core.policy._policies import make_policy
from sjf_core.policy._pool_rule import PoolMember, PoolRule
from sjf_lab.sim import PredictorModel, WorkloadSpec, burst_workload, poisson_workload
from sjf_lab.sim.pool import simulate_pool


def entry(seq: int, tokens: float) -> Entry:
    return Entry(seq=seq, arrival=0.0, key=tokens, expected_tokens=tokens)


def members(*spt: float) -> list[PoolMember]:
    out = []
    for i, s in enumerate(spt):
        m = PoolMember(f"b{i}")
        m.s_per_token = s
        out.append(m)
    return out


def test_head_goes_to_the_fastest_free_member():
    fast, slow = members(0.01, 0.02)
    rule = PoolRule([slow, fast])
    assert rule.place(entry(0, 100), now=0.0) is fast


def test_equal_members_never_reserve_and_share_the_load():
    a, b = members(0.01, 0.0105)  # within the margin: equally fast
    rule = PoolRule([a, b])
    PoolRule.started(a, entry(0, 1000), 0.0)
    assert rule.place(entry(1, 5000), now=0.0) is b  # a Long still goes to the free one


def test_a_long_waits_for_a_faster_member_that_frees_in_time_a_short_does_not():
    fast, slow = members(0.01, 0.02)
    rule = PoolRule([fast, slow])
    running = entry(0, 84)
    PoolRule.started(fast, running, now=0.0)  # frees in ~1 s
    short = entry(1, 100)
    assert rule.place(short, now=0.0) is slow  # Shorts never wait for a faster box
    PoolRule.finished(slow, short, 0.0, None)
    long = entry(2, 2000)  # 20 s on fast, 40 s on slow: waiting 1 s for fast wins
    assert rule.place(long, now=0.0) is None
    assert rule.ready(0.5) == []  # fast still busy, not expired
    PoolRule.finished(fast, running, 1.0, 84)
    assert rule.ready(1.0) == [(long, fast)]


def test_a_long_does_not_wait_when_the_faster_member_frees_too_late():
    fast, slow = members(0.01, 0.02)
    rule = PoolRule([fast, slow])
    PoolRule.started(fast, entry(0, 4000), now=0.0)  # 40 s left
    assert rule.place(entry(1, 2000), now=0.0) is slow


def test_a_reservation_expires_to_the_first_free_member():
    fast, slow = members(0.01, 0.02)
    rule = PoolRule([fast, slow])
    PoolRule.started(fast, entry(0, 484), now=0.0)  # expected to free at 5 s
    long = entry(1, 2000)
    assert rule.place(long, now=0.0) is None
    expiry = rule.next_expiry(0.0)
    assert expiry == pytest.approx((2016 * 0.02) - (2016 * 0.01))  # latest start that still pays off
    # the fast member overruns; at expiry the Long takes the free slow member
    assert rule.ready(expiry - 0.1) == []
    assert rule.ready(expiry) == [(long, slow)]


def test_a_member_going_down_hands_its_reservation_to_the_others():
    fast, slow = members(0.01, 0.02)
    rule = PoolRule([fast, slow])
    PoolRule.started(fast, entry(0, 84), now=0.0)
    long = entry(1, 2000)
    assert rule.place(long, now=0.0) is None
    fast.healthy = False
    assert rule.ready(0.1) == [(long, slow)]


def test_a_down_member_gets_nothing_and_unknown_speeds_are_equal():
    a, b = PoolMember("a"), PoolMember("b")
    a.healthy = False
    rule = PoolRule([a, b])
    assert rule.place(entry(0, 5000), now=0.0) is b
    assert a.free() == 0 and math.isnan(a.tokens_per_s)


def test_member_speed_is_measured_from_long_enough_answers():
    m = PoolMember("m")
    m.observe(10, 5.0)  # too short to say anything about speed
    assert math.isnan(m.s_per_token) and m.served == 1
    m.observe(100, 2.0)
    assert m.tokens_per_s == pytest.approx(50.0)


# ---- the simulator ------------------------------------------------------------------------
def _sim(layout, policy="sjf-tokens", speeds=(1.0, 1.0), rho=0.8, n=800, seed=3, **kw):
    spec = WorkloadSpec()
    wl = poisson_workload(spec, rho, n, seed, sum(speeds))
    pm = PredictorModel("none") if policy == "fcfs" else PredictorModel("class", 0.9)
    preds, _ = pm.predict(wl, np.random.default_rng(seed), spec.class_mix)
    return simulate_pool(wl, preds, make_policy(policy), speeds=speeds, layout=layout, seed=seed, **kw)


def test_one_pool_queue_never_idles_a_member_while_a_request_waits():
    pool = _sim("pool")
    per_backend = _sim("random")
    assert pool.idle_waiting_s == 0.0
    assert per_backend.idle_waiting_s > 0.0
    assert np.all(np.isfinite(pool.sojourn)) and sum(pool.served) == len(pool.sojourn)


def test_pool_sjf_beats_per_backend_sjf_and_pool_fcfs_on_short_latency():
    pool = _sim("pool")
    per_backend = _sim("random")
    fcfs_pool = _sim("pool", policy="fcfs")
    assert pool.stat("sojourn", SHORT, 50) < per_backend.stat("sojourn", SHORT, 50)
    assert pool.stat("sojourn", SHORT, 50) < fcfs_pool.stat("sojourn", SHORT, 50)
    assert pool.stat("sojourn", LONG, 95) < per_backend.stat("sojourn", LONG, 95)


def test_speed_aware_pool_sends_more_work_to_the_fast_member():
    blind = _sim("pool", speeds=(1.0, 0.5), rho=0.3, speed_aware=False)
    aware = _sim("pool", speeds=(1.0, 0.5), rho=0.3)
    assert aware.served[0] > blind.served[0]
    assert aware.stat("sojourn", None, 50) <= blind.stat("sojourn", None, 50)


def test_burst_in_a_pool_uses_every_member():
    spec = WorkloadSpec()
    wl = burst_workload(spec, (10, 0, 10), seed=1)
    r = simulate_pool(wl, [None] * len(wl), make_policy("fcfs"), speeds=(1.0, 1.0, 1.0), layout="pool")
    assert all(s > 0 for s in r.served) and r.idle_waiting_s == 0.0
    with pytest.raises(ValueError):
        simulate_pool(wl, [None] * len(wl), make_policy("fcfs"), layout="nope")
