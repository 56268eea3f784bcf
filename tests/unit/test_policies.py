"""Policies and pending structures (pure, clock-agnostic): keys, promotion rules, deadlines,
priority, DRR shares. Each test drives the same objects the live queues and the simulator use,
with an explicit ``now``."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sjf_core.policy._entry import LONG, MEDIUM, SHORT, Entry
from sjf_lab.sim.policies import policy_of
from sjf_core.policy._pending import PROMOTIONS, DRRPending, HeapPending
from sjf_core.config import DEFAULT_PROMOTION, PromotionSettings
from sjf_core.policy._policies import POLICIES, FairPolicy, Policy, RequestMeta
from sjf_core.predict._prediction import TYPICAL_TOKENS, Prediction
from sjf_core.policy._tau import TauConfig, TauEstimator


def pred(p_long: float, klass: int | None = None, tokens: float | None = None) -> Prediction:
    """A prediction with P(Long) = p_long (rest Short), optionally forcing the class label."""
    if klass is None:
        return Prediction.from_probs([1 - p_long, 0.0, p_long], tokens)
    probs = [0.0, 0.0, 0.0]
    probs[klass] = 1.0
    return Prediction.from_probs(probs, tokens)


def entry(policy: Policy, seq: int, arrival: float, prediction, meta=None) -> Entry:
    e = policy.make_entry(seq, arrival, prediction, meta)
    e.payload = seq
    return e


def drain(pending, now: float) -> list[int]:
    out = []
    while len(pending):
        out.append(pending.pop(now).payload)
    return out


# ---- keys --------------------------------------------------------------------------------
def test_registry_and_unknown_name():
    assert set(POLICIES) >= {"fcfs", "sjf", "sjf-tokens", "fair", "oracle"}
    with pytest.raises(ValueError, match="unknown policy"):
        policy_of("lifo")
    p = policy_of("sjf")
    assert policy_of(p) is p
    assert p.promotion == DEFAULT_PROMOTION == "work-bound"


def test_sjf_key_is_p_long_and_fcfs_key_is_constant():
    sjf, fcfs = policy_of("sjf"), policy_of("fcfs")
    assert sjf.key(pred(0.2), RequestMeta()) < sjf.key(pred(0.7), RequestMeta())
    assert fcfs.key(pred(0.2), RequestMeta()) == fcfs.key(pred(0.9), RequestMeta())
    assert math.isinf(fcfs.new_pending().tau.tau_s)


def test_sjf_tokens_key_is_expected_tokens_capped_by_max_tokens():
    p = policy_of("sjf-tokens")
    long_pred = Prediction.from_probs([0.0, 0.0, 1.0])
    assert p.key(long_pred, RequestMeta()) == pytest.approx(TYPICAL_TOKENS[LONG])
    mixed = Prediction.from_probs([0.5, 0.25, 0.25])
    assert p.key(mixed, RequestMeta()) == pytest.approx(0.5 * 60 + 0.25 * 400 + 0.25 * 1100)
    # max_tokens is an exact upper bound: a "Long" capped at 50 tokens sorts before a typical Short
    assert p.key(long_pred, RequestMeta(max_tokens=50)) == 50
    assert p.key(long_pred, RequestMeta(max_tokens=50)) < p.key(Prediction.from_probs([1, 0, 0]), RequestMeta())


def test_oracle_orders_by_true_tokens_with_tau_off():
    o = policy_of("oracle")
    assert math.isinf(o.new_pending().tau.tau_s)
    pend = o.new_pending()
    for i, t in enumerate([900, 10, 300, 50]):
        pend.push(entry(o, i, 0.0, pred(0.5, tokens=t)))
    assert drain(pend, 1.0) == [1, 3, 2, 0]


def test_make_entry_fails_open_to_the_neutral_key():
    class Broken(Policy):
        name = "broken"

        def key(self, prediction, meta):
            raise RuntimeError("boom")

    for policy, prediction in ((Broken(), pred(0.3)), (policy_of("sjf"), None)):
        e = policy.make_entry(0, 5.0, prediction, RequestMeta(priority=3, deadline_s=2.0))
        assert e.fallback and e.key == policy.fallback_key()
        assert e.priority == 3 and e.deadline == 7.0

    nan_policy = policy_of("sjf-tokens")
    e = nan_policy.make_entry(0, 0.0, Prediction(0.3, 0.3, 0.4, "long", float("nan")))
    assert e.key == nan_policy.fallback_key()


@pytest.mark.parametrize("bad", [{"promotion": "oldest"}, {"k": 0}, {"horizon": 0}, {"slack": -1},
                                 {"floor": float("inf")}, {"tau": "soon"}])
def test_bad_options_raise(bad):
    with pytest.raises(ValueError):
        policy_of("sjf", **bad)


def test_heap_pending_takes_a_rule_its_settings_or_a_strategy():
    hp = HeapPending(TauEstimator(TauConfig.parse(5.0)), PromotionSettings("one-in-k", k=3))
    assert hp.promotion == "one-in-k" and hp.k == 3
    assert HeapPending().promotion == DEFAULT_PROMOTION  # the one default (tests/unit/test_defaults.py)


# ---- invariant 4 ("strict") ------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 20), st.floats(0, 1)), min_size=1, max_size=25),
       st.floats(0.5, 8), st.floats(0, 30))
def test_strict_tau_bound_oldest_aged_first(reqs, tau, start):
    """DESIGN invariant 4: while any waiter has waited longer than τ, the next dispatch is the
    oldest of them; otherwise the policy order. Checked at every pop of a growing clock."""
    policy = policy_of("sjf", tau=tau, promotion="strict")
    pend = policy.new_pending()
    waiting = {}
    for i, (arrival, p_long) in enumerate(reqs):
        e = entry(policy, i, arrival, pred(p_long))
        pend.push(e)
        waiting[i] = e
    now = start
    while waiting:
        e = pend.pop(now)
        aged = [w for w in waiting.values() if now - w.arrival > tau]
        if aged:
            oldest = min(aged, key=lambda w: (w.arrival, w.seq))
            assert e is oldest and e.promoted
        else:
            best = min(waiting.values(), key=lambda w: w.sort_key())
            assert e is best and not e.promoted
        del waiting[e.seq]
        now += 0.7


def test_strict_collapses_to_fcfs_in_a_burst_and_fcfs_bound_does_not():
    """The trap of DESIGN "τ and bursts": once every waiter is past τ, strict is FCFS."""
    orders = {}
    for promotion in ("strict", "fcfs-bound"):
        policy = policy_of("sjf", tau=2.0, promotion=promotion, floor=0.0)
        pend = policy.new_pending()
        ks = [0.9, 0.1, 0.8, 0.2, 0.7, 0.3]
        for i, k in enumerate(ks):
            pend.push(entry(policy, i, 0.0, pred(k)))
        out, now = [], 0.0
        while len(pend):
            out.append(pend.pop(now).payload)
            now += 3.0  # every waiter is past τ from the second dispatch on
        orders[promotion] = out
    assert orders["strict"] == [1, 0, 2, 3, 4, 5]  # first by key, then arrival order
    # fcfs-bound: each waiter is due at its FCFS position (backlog at arrival, Table-1 class
    # means: 0, 30.1, 32.1, 62.2, 64.2, 94.3 s). Only #0, first under FCFS too, is promoted;
    # the Shorts still overtake every other Long
    assert orders["fcfs-bound"] == [1, 0, 3, 5, 4, 2]


# ---- other promotion rules -------------------------------------------------------------------
def test_one_in_k_promotes_at_most_one_aged_per_k_dispatches():
    policy = policy_of("sjf", tau=1.0, promotion="one-in-k", k=3)
    pend = policy.new_pending()
    for i in range(12):
        pend.push(entry(policy, i, float(i) * 0.01, pred(0.9 if i < 6 else 0.1)))
    seq = []
    while len(pend):
        e = pend.pop(100.0)
        seq.append(e.promoted)
    assert sum(seq) == 4
    for i in range(len(seq) - 2):
        assert sum(seq[i:i + 3]) <= 1


def test_aging_keeps_burst_order_and_bounds_overtaking():
    policy = policy_of("sjf", tau=2.0, promotion="aging", horizon=5)  # 10 s of waiting = one key span
    pend = policy.new_pending()
    pend.push(entry(policy, 0, 0.0, pred(1.0)))  # a Long
    pend.push(entry(policy, 1, 0.0, pred(0.0)))  # a Short in the same burst: goes first
    pend.push(entry(policy, 2, 9.0, pred(0.0)))  # arrives 9 s later: still overtakes the Long
    pend.push(entry(policy, 3, 11.0, pred(0.0)))  # arrives 11 s later: does not
    assert drain(pend, 12.0) == [1, 2, 0, 3]


def test_aging_priority_is_a_strict_band():
    policy = policy_of("sjf", tau=1.0, promotion="aging", horizon=4)
    pend = policy.new_pending()
    pend.push(entry(policy, 0, 0.0, pred(0.5)))
    pend.push(entry(policy, 1, 3.0, pred(0.9), RequestMeta(priority=1)))
    pend.push(entry(policy, 2, 50.0, pred(0.9), RequestMeta(priority=1)))  # much younger: still its band first
    assert drain(pend, 60.0) == [1, 2, 0]


def test_aged_sjf_serves_aged_waiters_in_key_order():
    policy = policy_of("sjf", tau=2.0, promotion="aged-sjf")
    pend = policy.new_pending()
    pend.push(entry(policy, 0, 0.0, pred(0.9)))
    pend.push(entry(policy, 1, 1.0, pred(0.2)))
    pend.push(entry(policy, 2, 9.0, pred(0.0)))  # fresh at now=10
    assert drain(pend, 10.0) == [1, 0, 2]


def test_fcfs_bound_promotes_at_the_fcfs_wait():
    """A Long arriving at an idle queue is due after τ; Shorts overtake it until then."""
    policy = policy_of("sjf", tau=5.0, promotion="fcfs-bound", floor=0.0)
    pend = policy.new_pending()
    pend.push(entry(policy, 0, 0.0, pred(1.0, LONG)))
    for i in range(1, 4):
        pend.push(entry(policy, i, float(i), pred(0.0, SHORT)))
    assert pend.pop(3.0).payload == 1  # Long not due yet: a Short goes
    assert pend.pop(6.0).payload == 0  # due (waited > max(τ, backlog 0))
    assert pend.promotions == 1


def test_fcfs_bound_uses_the_backlog_at_arrival():
    policy = policy_of("sjf", tau=1.0, promotion="fcfs-bound", floor=0.0)
    pend = policy.new_pending()
    svc = pend.service.by_predicted  # seeds: Table 1 means 2.0 / 8.5 / 30.1 s
    pend.push(entry(policy, 0, 0.0, pred(1.0, LONG)))  # backlog 0 -> bound 1 s
    pend.push(entry(policy, 1, 0.0, pred(1.0, LONG)))  # backlog = one Long -> bound 30.1 s
    assert pend.backlog_s(0.0) == pytest.approx(2 * svc[LONG])
    pend.push(entry(policy, 2, 0.5, pred(0.0, SHORT)))
    assert pend.pop(2.0).payload == 0  # due at 1 s
    assert pend.pop(2.0).payload == 2  # #1 not due before ~30 s: the Short goes
    assert pend.pop(31.0).payload == 1


@pytest.mark.parametrize("promotion", PROMOTIONS)
@pytest.mark.parametrize("cls", [HeapPending, DRRPending])
def test_remove_and_reuse_every_structure(cls, promotion):
    tau = TauEstimator(TauConfig.parse(3.0))
    pend = cls(tau, PromotionSettings(promotion, k=2))
    policy = policy_of("sjf")
    es = [entry(policy, i, float(i), pred(i / 10, [SHORT, MEDIUM, LONG][i % 3])) for i in range(9)]
    for e in es:
        pend.push(e)
    assert pend.remove(es[4]) and not pend.remove(es[4])
    got = drain(pend, 50.0)
    assert sorted(got) == [0, 1, 2, 3, 5, 6, 7, 8] and len(pend) == 0
    assert pend.pop(60.0) is None
    for e in es[:3]:  # reusable after emptying
        pend.push(e)
    assert sorted(drain(pend, 70.0)) == [0, 1, 2]


# ---- deadlines and priority -------------------------------------------------------------------
def test_due_deadline_goes_first_earliest_latest_start_first():
    policy = policy_of("sjf", tau="off")
    pend = policy.new_pending()
    pend.push(entry(policy, 0, 0.0, pred(0.0, SHORT)))
    pend.push(entry(policy, 1, 0.0, pred(1.0, LONG), RequestMeta(deadline_s=40.0)))  # latest start 9.9 s
    pend.push(entry(policy, 2, 0.0, pred(1.0, MEDIUM), RequestMeta(deadline_s=12.0)))  # latest start 3.5 s
    pend.push(entry(policy, 3, 0.0, pred(1.0, LONG), RequestMeta(deadline_s=1000.0)))  # far: policy order
    assert pend.pop(1.0).payload == 0  # nothing due yet
    assert pend.pop(4.0).payload == 2
    assert pend.pop(10.0).payload == 1
    assert pend.pop(11.0).payload == 3
    assert pend.deadline_dispatches == 2


def test_priority_is_a_strict_band_and_tau_acts_inside_it():
    policy = policy_of("sjf", tau=5.0, promotion="strict")
    pend = policy.new_pending()
    pend.push(entry(policy, 0, 0.0, pred(0.9)))
    pend.push(entry(policy, 1, 9.0, pred(0.95), RequestMeta(priority=2)))
    pend.push(entry(policy, 2, 9.0, pred(0.0)))
    assert pend.pop(10.0).payload == 1  # the higher band first, although #0 is past τ
    assert pend.pop(10.0).payload == 0  # then τ promotion inside band 0
    assert pend.pop(10.0).payload == 2


@pytest.mark.parametrize("promotion", PROMOTIONS)
@pytest.mark.parametrize("name", ["sjf", "sjf-tokens", "fair"])
def test_strict_bands_under_every_due_rule(name, promotion):
    """A due low-priority waiter (deadline, max_wait_s, τ, served-work bound) never goes
    before a waiter of a higher band; inside the top band the rules still apply."""
    policy = policy_of(name, tau=0.5, promotion=promotion, max_wait_s=1.0, slowdown=0.01, work_slack=0.0)
    pend = policy.new_pending()
    low = [entry(policy, i, 0.0, pred(0.9, LONG, 900.0), RequestMeta(deadline_s=0.1)) for i in range(3)]
    for e in low:
        pend.push(e)
    # served work advances (work-bound due points of the lows pass) by dispatching a band-0 one
    assert pend.pop(100.0).payload in (0, 1, 2)
    high = [entry(policy, 10 + i, 99.0 + i / 10, pred(0.1 * i, SHORT, 50.0 + i), RequestMeta(priority=10))
            for i in range(4)]
    for e in high:
        pend.push(e)
    got = drain(pend, 200.0)  # every low is long past its deadline, τ and max wait
    assert sorted(got[:4]) == [10, 11, 12, 13], got
    assert len(got) == 6 and set(got[4:]) <= {0, 1, 2}


def test_due_deadline_applies_inside_the_top_band():
    policy = policy_of("sjf", tau="off")
    pend = policy.new_pending()
    pend.push(entry(policy, 0, 0.0, pred(0.0, SHORT), RequestMeta(priority=5)))
    pend.push(entry(policy, 1, 0.0, pred(1.0, LONG), RequestMeta(priority=5, deadline_s=5.0)))
    pend.push(entry(policy, 2, 0.0, pred(1.0, LONG), RequestMeta(deadline_s=1.0)))
    assert drain(pend, 10.0) == [1, 0, 2]


# ---- fair (DRR) -------------------------------------------------------------------------------
def test_fair_shares_backend_time_between_backlogged_classes():
    policy = FairPolicy(tau="off")
    pend = policy.new_pending()
    for i in range(40):
        pend.push(entry(policy, i, 0.0, pred(0.05, SHORT)))
    for i in range(40, 50):
        pend.push(entry(policy, i, 0.0, pred(0.95, LONG)))
    out = [pend.pop(1.0) for _ in range(32)]
    longs = sum(1 for e in out if e.klass == LONG)
    shorts = len(out) - longs
    # equal time shares with 2.0 s Shorts and 30.1 s Longs: ~15 Shorts per Long
    assert longs == 2 and shorts == 30
    # a class alone gets the whole backend (work-conserving)
    rest = drain(pend, 2.0)
    assert len(rest) == 18


def test_fair_quanta_adapt_to_observed_service_times():
    policy = FairPolicy(tau="off")
    pend = policy.new_pending()
    long_e = entry(policy, 0, 0.0, pred(0.95, LONG))
    for _ in range(200):  # Longs turn out as short as Shorts on this backend
        pend.observe(long_e, 2.0, LONG)
    assert pend.cost(LONG) == pytest.approx(2.0, rel=0.05)
    for i in range(20):
        pend.push(entry(policy, i, 0.0, pred(0.05, SHORT)))
        pend.push(entry(policy, 100 + i, 0.0, pred(0.95, LONG)))
    first = [pend.pop(1.0).klass for _ in range(16)]
    # equal costs now: the same number of each per round (quantum = 8.5 s, the largest mean)
    assert first.count(LONG) == first.count(SHORT) == 8


def test_fair_weights_validate():
    with pytest.raises(ValueError):
        FairPolicy(weights=(1, 0, 1))


def test_random_mix_every_structure_pops_everyone_once():
    rnd = random.Random(7)
    for name in ("fcfs", "sjf", "sjf-tokens", "fair", "oracle"):
        for promotion in PROMOTIONS:
            policy = policy_of(name, promotion=promotion) if name not in ("fcfs",) else policy_of(name)
            pend = policy.new_pending()
            n = 60
            now = 0.0
            seen = []
            pushed = 0
            while pushed < n or len(pend):
                if pushed < n and rnd.random() < 0.6:
                    meta = RequestMeta(priority=rnd.choice([0, 0, 1]), deadline_s=rnd.choice([None, 5.0, 50.0]))
                    pend.push(entry(policy, pushed, now, pred(rnd.random(), rnd.choice([0, 1, 2]), rnd.random() * 900),
                                    meta))
                    pushed += 1
                elif len(pend):
                    seen.append(pend.pop(now).payload)
                now += rnd.random()
            assert sorted(seen) == list(range(n)), (name, promotion)
