"""Promotion strategies (sjf_core.policy.promotion): the contract, each rule's own option
checks, the max_wait_s bound, strategies plugged into either pending structure, and the
strategy's serialisation for the Redis store."""

from __future__ import annotations

import inspect
import math

import pytest

from sjf_core.admission._redis import SUPPORTED_PROMOTIONS, policy_server_args
from sjf_core.config import PromotionSettings
from sjf_lab.sim.policies import policy_of
from sjf_core.policy._entry import LONG, SHORT, Entry
from sjf_core.policy._fair_share import TenantPending
from sjf_core.policy._pending import DRRPending, HeapPending, PendingQueue
from sjf_core.policy._tau import TauConfig, TauEstimator
from sjf_core.policy.promotion import (PROMOTIONS, RULES, WIRE_DEFAULTS, FCFSBound, MaxWait, PromotionStrategy,
                                       WorkBound, make_promotion, with_max_wait)


def entry(seq, arrival, key, klass=SHORT, tokens=50.0, priority=0):
    return Entry(seq=seq, arrival=arrival, key=key, klass=klass, expected_tokens=tokens, priority=priority, payload=seq)


@pytest.mark.parametrize("name", PROMOTIONS)
def test_every_rule_is_a_strategy_and_serialises_every_wire_field(name):
    s = make_promotion(name)
    assert type(s) is RULES[name] and s.name == name
    for method in [m for m in dir(PromotionStrategy) if not m.startswith("_")]:
        assert callable(getattr(s, method, None)) or method == "name", method
    wire = s.wire()
    assert set(wire) == {"promotion", *WIRE_DEFAULTS} and wire["promotion"] == name


@pytest.mark.parametrize("option, rule", [({"horizon": 0}, "aging"), ({"k": 0}, "one-in-k"),
                                          ({"slack": -1}, "fcfs-bound"), ({"floor": math.inf}, "fcfs-bound"),
                                          ({"slowdown": 0}, "work-aging"), ({"work_slack": -0.5}, "work-bound"),
                                          ({"key_span": -1}, "aging")])
def test_each_option_is_checked_by_its_rule_whichever_rule_is_chosen(option, rule):
    name = next(iter(option))
    for chosen in ("work-bound", "strict"):
        with pytest.raises(ValueError) as err:
            make_promotion(chosen, **option)
        assert name in str(err.value) and rule in str(err.value)


def test_unknown_rule_and_bad_max_wait_raise():
    with pytest.raises(ValueError, match="promotion must be one of"):
        make_promotion("oldest")
    for bad in (0, -1, math.nan):
        with pytest.raises(ValueError, match="max_wait_s"):
            make_promotion("work-bound", max_wait_s=bad)


def test_a_strategy_serves_one_structure_and_takes_no_rule_options():
    s = make_promotion("strict")
    HeapPending(None, s)
    with pytest.raises(ValueError, match="one per structure"):
        HeapPending(None, s)
    with pytest.raises(ValueError, match="PromotionSettings"):
        make_promotion(PromotionSettings("strict"), slowdown=2.0)


def test_max_wait_wraps_a_rule_and_folds_into_fcfs_bound():
    fcfs = FCFSBound()
    assert with_max_wait(fcfs, 5.0) is fcfs and fcfs.cap_s == 5.0 and fcfs.wire()["max_wait_s"] == 5.0
    wrapped = with_max_wait(WorkBound(slowdown=3.0), 5.0)
    assert isinstance(wrapped, MaxWait) and wrapped.name == "work-bound" and wrapped.slowdown == 3.0
    assert wrapped.wire()["max_wait_s"] == 5.0 and wrapped.wire()["slowdown"] == 3.0
    plain = WorkBound()
    assert with_max_wait(plain, math.inf) is plain and with_max_wait(plain, None) is plain


def test_max_wait_goes_before_the_wrapped_rule_in_both_structures():
    for cls in (HeapPending, DRRPending):
        pend = cls(TauEstimator(TauConfig.parse(1000.0)), make_promotion("strict", max_wait_s=10.0))
        pend.push(entry(0, 0.0, 0.9, LONG, 900.0))
        pend.push(entry(1, 5.0, 0.1))
        assert pend.pop(6.0).payload == 1  # nothing due: the policy order
        pend.push(entry(2, 6.0, 0.0))
        got = pend.pop(11.0)
        assert got.payload == 0 and got.promoted and pend.promotions == 1, cls  # waited 11 s > 10 s
        assert pend.pop(11.0).payload == 2


class EverySecondIsDue:
    """A strategy written against the protocol alone (no base class, no optional hooks):
    the waiter with the highest seq is due when ``now`` is a whole even number."""

    name = "test-due"

    def __init__(self):
        self.waiting: list[Entry] = []

    def attach(self, pending):
        self.q = pending

    def on_push(self, e):
        self.waiting.append(e)

    def order_key(self, e):
        return e.sort_key()

    def due(self, now):
        live = [e for e in self.waiting if not e.removed and e.priority == self.q.top_band]
        return max(live, key=lambda e: e.seq) if live and now % 2 == 0 else None

    def on_pop(self, e, now, by_policy):
        self.waiting.remove(e)

    def on_remove(self, e):
        self.waiting.remove(e)

    def clear(self):
        self.waiting.clear()

    def wire(self):
        return {"promotion": self.name}


@pytest.mark.parametrize("cls", [HeapPending, DRRPending])
def test_any_protocol_strategy_plugs_into_either_structure(cls):
    pend = cls(None, EverySecondIsDue())
    for i in range(4):
        pend.push(entry(i, 0.0, i / 10))
    assert pend.pop(1.0).payload == 0 and pend.promotions == 0  # odd: policy order
    e = pend.pop(2.0)
    assert e.payload == 3 and e.promoted and pend.promotions == 1
    pend.observe(e, 1.0, SHORT, 40.0)  # no observed() hook: fine
    assert pend.backlog_s(2.0) == 0.0 and pend.promotion == "test-due"
    assert pend.remove(entry_of(pend, 2)) and len(pend) == 1
    assert pend.pop(3.0).payload == 1 and len(pend) == 0


def entry_of(pend, seq):
    return next(e for e in pend.live_entries() if e.seq == seq)


def test_observe_takes_answer_tokens_on_every_pending_structure():
    for obj in (PendingQueue, HeapPending, DRRPending, TenantPending):
        assert "answer_tokens" in inspect.signature(obj.observe).parameters, obj


def test_redis_store_reads_the_strategy_wire():
    a = policy_server_args(policy_of("sjf-tokens", promotion="work-bound", slowdown=4.0, work_slack=0.5,
                                       max_wait_s=9.0))
    assert (a.promotion, a.slowdown, a.work_slack, a.max_wait_s) == ("work-bound", 4.0, 0.5, 9.0)
    a = policy_server_args(policy_of("sjf", promotion="one-in-k", k=3))
    assert (a.promotion, a.k, a.max_wait_s) == ("one-in-k", 3, None)
    a = policy_server_args(policy_of("sjf-tokens", promotion="aging", horizon=3.0))
    assert (a.key_span, a.horizon) == (policy_of("sjf-tokens").key_span, 3.0)
    assert policy_server_args(policy_of("sjf", promotion="strict", k=5)).k == 1
    assert set(SUPPORTED_PROMOTIONS) == set(PROMOTIONS) - {"aged-sjf"}
    for bad in (policy_of("sjf", promotion="aged-sjf"), policy_of("fair")):
        with pytest.raises(ValueError, match="Redis store cannot run"):
            policy_server_args(bad)
