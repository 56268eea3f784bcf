"""The preemption study's simulator (sjf_lab.sim.preempt) and pause rules (sjf_lab.sim.pause)."""

import math

import numpy as np
import pytest

from sjf_core import make_policy
from sjf_core.policy._entry import class_of_tokens
from sjf_core.predict._prediction import Prediction
from sjf_lab.sim.engine import simulate
from sjf_lab.sim.pause import LengthBelief, PauseGuard, PauseRule, belief_of
from sjf_lab.sim.preempt import Costs, simulate_preempt
from sjf_lab.sim.workload import Workload

FREE = Costs(decode_tps=10.0, prefill_tps=1e12, free_resume=True)
NO_GUARD = PauseGuard(max_pauses=10 ** 6, max_paused_s=math.inf, min_run_tokens=1)


def oracle_preds(tokens):
    return [Prediction.from_probs(np.eye(3)[class_of_tokens(t)], expected_tokens=float(t)) for t in tokens]


def run(arrival, tokens, rule, costs=FREE, policy="oracle", prompt=None, preds=None):
    tokens = np.asarray(tokens, float)
    prompt = np.zeros(len(tokens)) if prompt is None else np.asarray(prompt, float)
    klass = np.array([class_of_tokens(t) for t in tokens])
    preds = preds or oracle_preds(tokens)
    beliefs = [belief_of(p) for p in preds]
    return simulate_preempt(np.asarray(arrival, float), prompt, tokens, klass, beliefs, preds, make_policy(policy),
                            rule, costs)


def test_without_a_rule_it_matches_the_non_preemptive_engine():
    rng = np.random.default_rng(3)
    n = 300
    tokens = rng.gamma(0.5, 600, size=n).round() + 1
    arrival = np.cumsum(rng.exponential(tokens.mean() / 10.0 / 0.8, size=n))
    klass = np.array([class_of_tokens(t) for t in tokens])
    preds = oracle_preds(tokens)
    for policy in ("fcfs", "sjf-tokens", "oracle"):
        ref = simulate(Workload(arrival, tokens / 10.0, klass, tokens), preds, make_policy(policy))
        got = run(arrival, tokens, PauseRule(), policy=policy, preds=preds)
        assert np.allclose(got.sojourn, ref.sojourn), policy
        assert got.pauses.sum() == 0


def test_srpt_pauses_a_long_answer_for_a_short_one_and_resumes_it():
    # a 1000-token answer starts at 0; a 20-token request arrives at 10 s (age 100 tokens)
    res = run([0.0, 10.0], [1000, 20], PauseRule("srpt", 1.0, guard=NO_GUARD))
    assert res.pauses.tolist() == [1, 0]
    assert res.sojourn[1] == pytest.approx(2.0, abs=1.7)  # served within a check tick, not after 90 s
    assert res.sojourn[0] == pytest.approx(102.0, abs=0.01)  # free pauses: the long one only waits for the short


def test_a_resume_reads_prompt_and_partial_answer_again():
    costs = Costs(decode_tps=10.0, prefill_tps=100.0, stop_s=0.5)
    res = run([0.0, 10.0], [1000, 20], PauseRule("srpt", 1.0, guard=NO_GUARD), costs=costs, prompt=[50, 10])
    assert res.pauses[0] == 1
    age = 100 - 5  # tokens streamed when the short one arrived: 10 s - 0.5 s prompt read, at 10 tokens/s
    assert res.wasted_s == pytest.approx(0.5 + (50 + age) / 100.0, abs=0.2)
    assert res.sojourn[0] == pytest.approx(0.5 + 100.0 + res.wasted_s + 2.0 + 0.1, abs=1.7)


def test_the_guard_bounds_pauses_per_answer():
    arrival = [0.0] + [5.0 * k for k in range(1, 20)]
    tokens = [2000] + [10] * 19
    free = run(arrival, tokens, PauseRule("srpt", 1.0, guard=NO_GUARD))
    assert free.pauses[0] > 1
    once = run(arrival, tokens, PauseRule("srpt", 1.0, guard=PauseGuard(max_pauses=1, max_paused_s=math.inf,
                                                                         min_run_tokens=1)))
    assert once.pauses[0] == 1


def test_the_guard_resumes_an_answer_paused_too_long_before_any_waiter():
    # shorts arrive back to back for 100 s; with max_paused_s 20 the long answer resumes by ~20 s after its pause
    arrival = [0.0] + [1.0 + 1.9 * k for k in range(50)]
    tokens = [500] + [20] * 50
    rule = PauseRule("srpt", 1.0, guard=PauseGuard(max_pauses=1, max_paused_s=20.0, min_run_tokens=1))
    res = run(arrival, tokens, rule)
    assert res.pauses[0] == 1
    assert res.max_paused_s <= 20.0 + 2.0 + 1e-9  # the bound plus the one short answer running at that moment


def test_belief_recovers_a_lognormal_from_class_probabilities():
    from scipy.stats import norm

    loc, sig = math.log1p(300.0), 1.2
    p_long = float(norm.sf((math.log1p(800) - loc) / sig))
    p_short = float(norm.cdf((math.log1p(200) - loc) / sig))
    b = belief_of(Prediction.from_probs([p_short, 1 - p_short - p_long, p_long], expected_tokens=400.0))
    assert b.loc == pytest.approx(loc, rel=1e-6) and b.sig == pytest.approx(sig, rel=1e-6)


def test_gittins_rank_rises_with_age_for_a_heavy_tail_and_falls_near_the_cap():
    b = LengthBelief(math.log1p(200.0), 1.5, 300.0)
    assert b.gittins(50.0) < b.gittins(2000.0)
    capped = LengthBelief(math.log1p(200.0), 1.5, 300.0, cap=1024)
    assert capped.gittins(1000.0) < 30.0
    assert b.residual(2000.0) > b.residual(10.0)


def test_rule_names_and_margin_are_checked():
    with pytest.raises(ValueError, match="unknown pause rule"):
        PauseRule("lifo")
    with pytest.raises(ValueError, match="margin"):
        PauseRule("gittins", margin=0.5)


def test_segmented_generation_pauses_only_at_a_boundary_and_resumes_from_the_cache():
    costs = Costs(decode_tps=10.0, prefill_tps=1e12, resume_overhead_s=0.2, resume_tps=1e12, segment_tokens=64,
                  segment_overhead_s=0.1)
    ts = 0.1 + 15 * 0.1 / 1000  # seconds per token of the long answer: its 15 boundaries spread over it
    res = run([0.0, 10.0], [1000, 20], PauseRule("srpt", 1.0, guard=NO_GUARD), costs=costs)
    assert res.pauses.tolist() == [1, 0]
    assert res.sojourn[1] == pytest.approx(128 * ts - 10.0 + 20 * 0.1, abs=1e-6)  # waits for the boundary at 128
    assert res.wasted_s == pytest.approx(0.2)  # one cache-hit resume, nothing to stop
    assert res.sojourn[0] == pytest.approx(1000 * ts + 20 * 0.1 + 0.2, abs=1e-6)


def test_a_boundary_costs_more_as_the_context_grows():
    c = Costs(decode_tps=10.0, prefill_tps=100.0, segment_tokens=100, segment_overhead_s=0.1,
              segment_overhead_per_token_s=0.001)
    # an answer of 300 tokens after 50 prompt tokens: boundaries at contexts 150, 250, 350
    assert c.service_s(50, 300) == pytest.approx(0.5 + 30.0 + 3 * 0.1 + 0.001 * (150 + 250 + 350))
    assert c.service_s(50, 99) == pytest.approx(0.5 + 9.9)  # no boundary
