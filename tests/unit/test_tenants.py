"""Tenants and intent in the core: fair shares (DRR over tenants), defaults, supersede.

Drives the same objects the live queues use (TenantPending, AdmissionQueue), with a
manual clock; no timing assertions.
"""

from __future__ import annotations

import asyncio

import pytest

from sjf_core.admission._local import LocalAdmissionQueue
from sjf_core.policy._entry import SHORT
from sjf_core._errors import Superseded
from sjf_core.policy._fair_share import TenantPending
from sjf_core.predict._meta import request_meta
from sjf_core.policy._policies import RequestMeta, make_policy
from sjf_core.predict._prediction import Prediction
from sjf_core.settings import Fairness, IntentDefaults, hash_id


def pred(p_long: float) -> Prediction:
    return Prediction.from_probs([1.0 - p_long, 0.0, p_long])


def tenant_pending(policy):
    return TenantPending(lambda tau, svc: _sub(policy, tau, svc))


def _sub(policy, tau, svc):
    p = policy.new_pending()
    if tau is not None:
        p.tau = tau
    if svc is not None:
        p.service = svc
    return p


def push(pend, policy, seq, tenant, p_long=0.1, priority=0, arrival=0.0):
    e = policy.make_entry(seq, arrival, pred(p_long), RequestMeta(priority=priority, tenant=tenant))
    e.payload = (tenant, seq)
    pend.push(e)
    return e


def test_light_tenant_is_served_within_the_first_two_behind_a_flood():
    policy = make_policy("sjf", tau="off")
    pend = tenant_pending(policy)
    for i in range(10):
        push(pend, policy, i, "flood", p_long=0.01)  # the flood is all shorter
    push(pend, policy, 10, "light", p_long=0.5)
    order = []
    while len(pend):
        e = pend.pop(1.0)
        pend.observe(e, 2.0, SHORT, 50)
        order.append(e.payload[0])
    assert "light" in order[:2], order
    # fairness off: pure SJF puts it last
    flat = policy.new_pending()
    for i in range(10):
        push(flat, policy, i, "flood", p_long=0.01)
    push(flat, policy, 10, "light", p_long=0.5)
    assert [flat.pop(1.0).payload[0] for _ in range(11)][-1] == "light"


def test_backlogged_tenants_share_by_measured_service_time_and_weight():
    policy = make_policy("sjf", tau="off")
    pend = TenantPending(lambda tau, svc: _sub(policy, tau, svc), weight={"a": 1.0, "b": 2.0}.get)
    seq = 0
    for t in ("a", "b"):
        for _ in range(60):
            push(pend, policy, seq, t)
            seq += 1
    busy = {"a": 0.0, "b": 0.0}
    for _ in range(60):
        e = pend.pop(1.0)
        s = 4.0 if e.tenant == "a" else 1.0  # a's requests really take 4x as long
        busy[e.tenant] += s
        pend.observe(e, s, SHORT, 50)
    ratio = busy["b"] / busy["a"]
    assert 1.6 < ratio < 2.5, busy  # b's weight 2: about twice a's backend seconds


def test_a_tenant_alone_gets_everything_and_bands_stay_strict():
    policy = make_policy("sjf", tau="off")
    pend = tenant_pending(policy)
    for i in range(5):
        push(pend, policy, i, "a")
    assert [pend.pop(1.0).tenant for _ in range(3)] == ["a"] * 3  # work-conserving
    push(pend, policy, 10, "b", priority=0)
    push(pend, policy, 11, "c", priority=7)
    assert pend.pop(1.0).tenant == "c"  # the higher band first, whatever the shares
    got = sorted(pend.pop(1.0).tenant for _ in range(3))
    assert got == ["a", "a", "b"] and len(pend) == 0


def test_remove_and_random_mix_pop_everyone_once():
    import random

    rnd = random.Random(3)
    policy = make_policy("sjf-tokens")
    pend = tenant_pending(policy)
    live, seen, now = [], [], 0.0
    for i in range(300):
        if rnd.random() < 0.6:
            live.append(push(pend, policy, i, rnd.choice(["x", "y", "z", None]), rnd.random(),
                             rnd.choice([0, 0, 1]), now))
        elif live and rnd.random() < 0.2:
            e = live.pop(rnd.randrange(len(live)))
            assert pend.remove(e)
        elif len(pend):
            e = pend.pop(now)
            live.remove(e)
            seen.append(e)
            pend.observe(e, rnd.random() * 3, None, 40)
        now += rnd.random()
    while len(pend):
        e = pend.pop(now)
        live.remove(e)
        seen.append(e)
    assert not live and len({id(e) for e in seen}) == len(seen)


def test_fairness_spec_and_tenant_ids():
    f = Fairness.parse("user")
    t = f.tenant({"user": "alice"})
    assert t == hash_id("user", "alice") and "alice" not in t
    assert Fairness.parse("user", show_names=True).tenant({"user": "alice"}) == "alice"
    assert Fairness.parse("header:X-Team").tenant(None, {"x-team": "red"}) == hash_id("header", "red")
    assert Fairness.parse(None).mode == "key" and Fairness.parse("key").tenant(None, None, "sk-1") is not None
    assert Fairness.parse("off").tenant({"user": "a"}) is None
    assert Fairness.parse("team").tenant(None, None, "sk-1", "team-a") == hash_id("team", "team-a")
    assert Fairness.parse("team").tenant(None, None, "sk-1", None) is None
    assert f.tenant({"user": {"nested": 1}}) is None and f.tenant("garbage") is None
    assert Fairness.parse("user", {"alice": 3}).weight(t) == 3.0
    for bad in ("bogus", "header:"):
        with pytest.raises(ValueError):
            Fairness.parse(bad)
    with pytest.raises(ValueError):
        Fairness.parse("user", {"a": 0})


def test_priority_inputs_and_defaults():
    assert request_meta({"priority": 3}).priority == -3  # LiteLLM / vLLM: lower is sooner
    m = request_meta({"priority": 3, "metadata": {"sjf_priority": 4}})
    assert m.priority == 4 and m.explicit_priority
    assert not request_meta({"priority": "x"}).explicit_priority
    d = IntentDefaults.parse(priority=2, deadline_s=30, backends={"http://b:1/v1": {"default_priority": 5}},
                             tenants={"alice": {"default_deadline_s": 5}})
    f = Fairness.parse("user")
    assert d.apply(request_meta({}), "http://other/v1").priority == 2
    assert d.apply(request_meta({}), "http://b:1/v1").priority == 5
    assert d.apply(request_meta({"metadata": {"sjf_priority": 0}}), "http://b:1/v1").priority == 0
    alice = d.apply(request_meta({}), None, f.tenant({"user": "alice"}), f)
    assert alice.deadline_s == 5 and d.apply(request_meta({}), None).deadline_s == 30
    for bad in ({"priority": "x"}, {"deadline_s": -1}, {"backends": {"u": {"nope": 1}}}):
        with pytest.raises(ValueError):
            IntentDefaults.parse(**bad)


async def test_supersede_removes_the_queued_one_and_never_a_running_one():
    q = LocalAdmissionQueue(slots=1, policy=make_policy("sjf", tau="off"), fairness="user")
    running = q.ticket(pred(0.1), RequestMeta(supersede="k", tenant="t1"))
    await running.acquire()
    t1 = q.ticket(pred(0.1), RequestMeta(supersede="k", tenant="t1"))
    other_tenant = q.ticket(pred(0.1), RequestMeta(supersede="k", tenant="t2"))
    a1 = asyncio.create_task(t1.acquire())
    a2 = asyncio.create_task(other_tenant.acquire())
    await asyncio.sleep(0)
    assert q.waiting == 2 and running.state == "running"
    t2 = q.ticket(pred(0.9), RequestMeta(supersede="k", tenant="t1"))
    a3 = asyncio.create_task(t2.acquire())
    with pytest.raises(Superseded):
        await a1
    assert t1.state == "superseded" and q.waiting == 2 and running.state == "running"
    assert q.stats.superseded == 1 and not t1.release()
    running.release()
    done, _ = await asyncio.wait([a2, a3], return_when=asyncio.FIRST_COMPLETED)
    first = other_tenant if a2 in done else t2
    first.release()
    await asyncio.gather(a2, a3)
    (t2 if first is other_tenant else other_tenant).release()
    assert q.in_flight == 0 and q.waiting == 0


async def test_per_tenant_depth_and_wait_in_prometheus():
    from prometheus_client import CollectorRegistry

    from sjf_core.ext._metrics import PrometheusMetrics

    reg = CollectorRegistry()
    q = LocalAdmissionQueue(slots=1, policy=make_policy("sjf", tau="off"), fairness="user", name="http://b/v1",
                       listeners=[PrometheusMetrics(reg)])
    first = q.ticket(pred(0.1), RequestMeta(tenant="aaaa"))
    await first.acquire()
    waiters = [q.ticket(pred(0.1), RequestMeta(tenant=t)) for t in ("aaaa", "aaaa", "bbbb")]
    tasks = [asyncio.create_task(w.acquire()) for w in waiters]
    await asyncio.sleep(0)
    depth = {t: reg.get_sample_value("sjf_tenant_queue_depth", {"backend": "http://b/v1", "tenant": t})
             for t in ("aaaa", "bbbb")}
    assert depth == {"aaaa": 2.0, "bbbb": 1.0}
    first.release()
    left = dict(zip(tasks, waiters))
    while left:  # each waiter in turn gets the slot, then gives it back
        done, _ = await asyncio.wait(list(left), return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            left.pop(task).release()
    assert reg.get_sample_value("sjf_tenant_queue_wait_seconds_count",
                                {"backend": "http://b/v1", "tenant": "aaaa"}) == 3.0  # incl. the first
    assert reg.get_sample_value("sjf_tenant_queue_depth", {"backend": "http://b/v1", "tenant": "aaaa"}) == 0.0


def test_simulator_two_tenants_fairness_protects_the_light_tenant():
    """The simulator runs the same TenantPending: at ρ = 0.8 the light tenant's Long P99
    drops with fair shares (same arrivals, same run), the flood's barely moves."""
    from sjf_lab.sim.experiments import markdown, tenants

    res = tenants(n=600, seeds=2)
    off, on = res["rows"]["sjf-tokens fairness=off"], res["rows"]["sjf-tokens fairness=user"]
    assert on["light_long_p99"] < 0.8 * off["light_long_p99"], res["rows"]
    assert on["flood_short_p50"] < 2.0 * off["flood_short_p50"], res["rows"]
    assert "light long P99" in markdown("tenants", res)


def test_many_tenants_stay_bounded():
    import sjf_core.policy._fair_share as fs

    policy = make_policy("sjf", tau="off")
    pend = tenant_pending(policy)
    for i in range(3 * fs.MAX_IDLE_SUBS):
        e = push(pend, policy, i, f"user-{i}")
        got = pend.pop(1.0)
        assert got is e
        pend.observe(got, 1.0, SHORT, 10)
    assert len(pend._subs) <= fs.MAX_IDLE_SUBS + 2 and len(pend) == 0
