"""The Redis admission store against a real redis-server (no mocks).

Covers: same dispatch order as the in-process queue for every supported promotion rule,
the concurrency bound across independent clients, fencing of stale holders, cancellation
(also when a wake-up crosses it), dead-waiter cleanup, τ measured in Redis, no polling
while waiting, hold limit, fail-open / fail-closed, a Redis restart in the middle of a
burst, and Cluster-safe key naming.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import uuid

import pytest
import redis.asyncio as ra

from redis_server import RedisServer, free_port
from waits import wait_until
from sjf_core.admission._local import LocalAdmissionQueue, QueueEvents
from sjf_lab.sim.policies import policy_of
from sjf_core._errors import AdmissionRejected
from sjf_core.policy._policies import RequestMeta
from sjf_core.predict._prediction import Prediction
from sjf_core.admission._redis import RedisAdmissionQueue, RedisUnavailable, hash_tag, policy_server_args
from sjf_core._scheduler import Scheduler
from sjf_core.config import RedisSettings

REDIS_OPTIONS = ("redis_lease_ttl_s", "waiter_ttl_s", "fail_mode", "prefix", "op_timeout_s", "retry_s")


def pred(p_long: float) -> Prediction:
    p_long = min(max(p_long, 0.0), 1.0)
    return Prediction.from_probs([1.0 - p_long, 0.0, p_long])


def backend() -> str:
    return f"http://127.0.0.1:1/{uuid.uuid4().hex[:8]}/v1"



def snap_is(q, **want):
    """An async condition: ``q.snapshot()`` has these values."""
    async def cond():
        try:
            snap = await q.snapshot()
        except ra.ConnectionError:  # a pooled connection to a restarted server: ask again
            return False
        return all(snap.get(k) == v for k, v in want.items())
    return cond


def snap_is_at_least(q, **want):
    """An async condition: ``q.snapshot()`` has at least these values."""
    async def cond():
        try:
            snap = await q.snapshot()
        except ra.ConnectionError:
            return False
        return all(snap.get(k, 0) >= v for k, v in want.items())
    return cond


@pytest.fixture
async def stores(redis_url):
    made = []

    def make(**kw):
        kw.setdefault("name", backend())
        options = {k: kw.pop(k) for k in REDIS_OPTIONS if k in kw}  # the store's RedisSettings
        s = RedisAdmissionQueue(kw.pop("url", redis_url), options=RedisSettings(**options), **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        await s.aclose()


# ---- order parity with the in-process queue -------------------------------------------------
#: τ and the absolute wait bound (s) of the scenarios, far from every age of workload():
#: young requests are 0-3.3 s old, old ones 106-112 s (due deadlines: 200-205 s), so no
#: run, however slow the machine, moves a request across either bound while it waits.
TAU_S = 60.0
MAX_WAIT_S = 50.0

SCENARIOS = [
    # (policy, options); τ in fixed seconds so both stores agree on it exactly
    ("fcfs", {}),
    ("sjf", {"tau": "off"}),
    # the default promotion ("work-bound") with 20 s Short service seeds
    ("sjf", {"tau": TAU_S, "initial_short_service_s": 20.0}),
    # the previous default ("fcfs-bound"); the seeds keep its bounds >= 20 s away
    ("sjf", {"tau": TAU_S, "promotion": "fcfs-bound", "slack": 0.5, "floor": 0.0, "initial_short_service_s": 20.0}),
    ("sjf", {"tau": TAU_S, "promotion": "strict"}),
    ("sjf", {"tau": TAU_S, "promotion": "one-in-k", "k": 3}),
    ("sjf", {"tau": TAU_S, "promotion": "aging"}),
    # aging has no threshold: a short τ scales it, and speed cannot cross anything
    ("sjf", {"tau": 0.75, "promotion": "aging", "horizon": 2.0}),
    ("sjf-tokens", {"tau": TAU_S, "promotion": "aging"}),
    ("sjf-tokens", {"tau": "off"}),
    # the served-work rules (the default is "work-bound"); small slowdowns so that they act
    ("sjf-tokens", {"tau": TAU_S, "promotion": "work-bound", "slowdown": 1.0, "work_slack": 0.0}),
    ("sjf", {"tau": TAU_S, "promotion": "work-bound", "slowdown": 2.0, "work_slack": 0.5}),
    ("sjf", {"tau": TAU_S, "promotion": "work-aging", "slowdown": 0.05}),
    ("sjf-tokens", {"tau": TAU_S, "promotion": "work-aging", "slowdown": 0.5}),
    # an absolute wait bound beside each rule
    ("sjf-tokens", {"tau": TAU_S, "max_wait_s": MAX_WAIT_S}),
    ("sjf", {"tau": TAU_S, "promotion": "strict", "max_wait_s": MAX_WAIT_S}),
    # fcfs-bound keeps max_wait_s when τ is off (its own bound is then infinite)
    ("sjf", {"tau": "off", "promotion": "fcfs-bound", "max_wait_s": MAX_WAIT_S}),
    ("sjf", {"tau": "off", "promotion": "strict", "max_wait_s": MAX_WAIT_S}),
]


def workload(seed: int, n: int = 14):
    """(prediction, meta, age_s) per request: tied keys, priorities, ages far from τ and
    the max wait (:data:`TAU_S`), a few deadlines (due ones and far ones)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        p = pred(rnd.choice([0.05, 0.2, 0.2, 0.6, 0.9, rnd.random()]))
        prio = rnd.choice([0, 0, 0, 0, 1, -1])
        deadline = None
        # distinct ages (20 ms apart): Redis stamps arrival on its own clock, so exact ties
        # would be ordered by network jitter rather than by arrival sequence
        a = rnd.choice([0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12])
        age = (a if a < 6 else 100 + a) + 0.02 * i  # young: 0-3.3 s; old: 106-112 s
        if rnd.random() < 0.15:
            # due: latest start (deadline - expected service, ≤ 30.1 s) is long past
            deadline = rnd.choice([0.5, 1.0]) if age > 0 else None
        elif rnd.random() < 0.1:
            deadline = 10_000.0
        if deadline is not None and deadline < 100 and age < 200:
            age = 200.0 + rnd.randint(0, 5) + 0.02 * i
        out.append((p, RequestMeta(max_tokens=rnd.choice([None, None, 50, 2000]), priority=prio, deadline_s=deadline), age))
    return out


def promotion_workload():
    """A burst in which the served-work bound ("work-bound", the default rule) changes the
    order, which the seeded workloads never show (their key order is their work order):
    key order and work order disagree, behind one request that arrived 1,000 s ago. Only
    for key order and that rule: its ages (20 ms apart) are too close for the time-aging
    rules, whose Redis arrival stamps may shift by the enqueue latency.

    * 0: Long, 1,000 s old (past τ, the max wait and every aging horizon);
    * 1-5: predicted Medium (P(Long) ~0.01: first under ``sjf``, ~420 tokens of work each);
    * 6-10: predicted Long but capped at ``max_tokens`` ~50 (first under ``sjf-tokens``,
      ~1,100 tokens of work each);
    * 11-13: cheap Shorts (~130-250 tokens of work), after 1-10 in one policy's key order
      or the other's: the served-work bound brings them forward.
    """
    out = [(pred(0.97), RequestMeta(), 1000.0)]
    out += [(Prediction.from_probs([0.0, 0.99 - 0.001 * k, 0.01 + 0.001 * k]), RequestMeta(), 0.0) for k in range(5)]
    out += [(pred(0.9 + 0.01 * k), RequestMeta(max_tokens=50 + k), 0.0) for k in range(5)]
    out += [(pred(0.05 + 0.05 * k), RequestMeta(), 0.0) for k in range(3)]
    # distinct ages, 20 ms apart (see workload())
    return [(p, meta, age + 0.02 * i) for i, (p, meta, age) in enumerate(out)]


#: Rules a burst cannot move in this harness (one served-work point for all: "work-aging";
#: FCFS bounds of synthetic past arrivals are never reached: "fcfs-bound" without a max
#: wait), and the tests in which they do act (with the same parity check).
BURST_BLIND = {"work-aging": "test_served_work_rules_same_order_while_arrivals_interleave",
               "fcfs-bound": "test_fcfs_bound_promotes_a_waiter_past_its_fcfs_bound"}


async def dispatch_order(queue, work, hold_s: float = 0.0) -> list[int]:
    """Hold the only slot, enqueue ``work`` in order (each enqueued before the next), wait
    ``hold_s``, then free the slot and record the order in which the waiters are served."""
    loop = asyncio.get_running_loop()
    blocker = queue.ticket(pred(0.0))
    await blocker.acquire()
    order: list[int] = []

    async def job(i, t):
        await t.acquire()
        order.append(i)
        await asyncio.sleep(0)
        if hasattr(t, "arelease"):
            await t.arelease(10)
        else:
            t.release(10)

    tasks = []
    base = queue.clock()  # one time base: enqueue latency must not change the ages
    for i, (p, meta, age) in enumerate(work):
        t = queue.ticket(p, meta, arrival=base - age)
        tasks.append(loop.create_task(job(i, t)))
        await wait_until(lambda: t.state == "queued" and (t.queue.store == "local" or (t.redis is not None and t.redis.rid is not None)))
    await asyncio.sleep(hold_s)
    if hasattr(blocker, "arelease"):
        await blocker.arelease(10)
    else:
        blocker.release(10)
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    return order


@pytest.mark.parametrize("policy,opts", SCENARIOS, ids=[f"{p}-{o}" for p, o in SCENARIOS])
async def test_same_order_as_in_process_queue(stores, policy, opts):
    changed = []  # per workload: did the rule change the order (vs the same policy, τ off)?
    works = [("seed 0", workload(0)), ("seed 1", workload(1))]
    if policy != "fcfs" and opts.get("promotion", "work-bound") == "work-bound":
        works.append(("promotion", promotion_workload()))
    for name, work in works:
        local = LocalAdmissionQueue(1, policy_of(policy, **opts), "parity")
        expected = await dispatch_order(local, work)
        shared = stores(slots=1, policy=policy_of(policy, **opts))
        got = await dispatch_order(shared, work)
        assert got == expected, (policy, opts, name)
        unguarded = await dispatch_order(LocalAdmissionQueue(1, policy_of(policy, tau="off"), "p0"), work)
        changed.append(expected != unguarded)

        snap = await shared.snapshot()
        assert snap["in_flight"] == 0 and snap["waiting"] == 0
        assert snap["dispatched"] == len(work) + 1
    rule = policy != "fcfs" and (opts.get("tau") != "off" or "max_wait_s" in opts)
    blind = opts.get("promotion") in BURST_BLIND and "max_wait_s" not in opts
    if rule and not blind:
        # a store that ignored the rule would serve the unguarded order: parity must tell
        assert any(changed), f"the rule never changed the order: parity proves nothing {changed}"


async def interleaved_order(queue, groups) -> list[int]:
    """Serve one request at a time while new ones keep arriving: group g is enqueued while
    the g-th request of the run holds the slot, so the served-work clock moves between
    groups (a burst alone never exercises the served-work rules)."""
    loop = asyncio.get_running_loop()
    order: list[int] = []
    gates: dict[int, asyncio.Event] = {}

    async def job(i, t):
        await t.acquire()
        order.append(i)
        await gates.setdefault(i, asyncio.Event()).wait()
        if hasattr(t, "arelease"):
            await t.arelease(300)
        else:
            t.release(300)

    blocker = queue.ticket(pred(0.0))
    await blocker.acquire()
    tasks, n = [], 0
    for g, group in enumerate(groups):
        for p, meta in group:
            t = queue.ticket(p, meta)
            tasks.append(loop.create_task(job(n, t)))
            n += 1
            await wait_until(lambda: t.state == "queued" and (t.queue.store == "local" or (t.redis is not None and t.redis.rid is not None)))
        if g == 0:
            if hasattr(blocker, "arelease"):
                await blocker.arelease(300)
            else:
                blocker.release(300)
        else:
            gates.setdefault(order[-1], asyncio.Event()).set()  # the running one finishes
        await wait_until(lambda: len(order) == g + 1)
    while len(order) < n:
        gates.setdefault(order[-1], asyncio.Event()).set()
        k = len(order)
        await wait_until(lambda: len(order) > k or len(order) == n)
    gates.setdefault(order[-1], asyncio.Event()).set()
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    return order


@pytest.mark.parametrize("policy,opts", [
    ("sjf-tokens", {"tau": 60.0, "promotion": "work-aging", "slowdown": 0.5}),
    ("sjf", {"tau": 60.0, "promotion": "work-aging", "slowdown": 0.2}),
    ("sjf-tokens", {"tau": 60.0, "promotion": "work-bound", "slowdown": 2.0, "work_slack": 0.0}),
])
async def test_served_work_rules_same_order_while_arrivals_interleave(stores, policy, opts):
    rnd = random.Random(7)
    groups = [[(pred(rnd.choice([0.05, 0.3, 0.6, 0.95])), RequestMeta()) for _ in range(3)] for _ in range(5)]
    expected = await interleaved_order(LocalAdmissionQueue(1, policy_of(policy, **opts), "parity"), groups)
    unguarded = await interleaved_order(LocalAdmissionQueue(1, policy_of(policy, tau="off"), "p0"), groups)
    assert expected != unguarded, "the rule never changed the order: parity would prove nothing"
    got = await interleaved_order(stores(slots=1, policy=policy_of(policy, **opts)), groups)
    assert got == expected


async def test_strict_tau_promotes_oldest_long(stores):
    q = stores(slots=1, policy=policy_of("sjf", tau=2.0, promotion="strict"))
    order = await dispatch_order(q, [(pred(0.95), None, 10.0), (pred(0.05), None, 0.0), (pred(0.1), None, 0.0)])
    assert order == [0, 1, 2]
    assert q.stats.promoted == 1
    q2 = stores(slots=1, policy=policy_of("sjf", tau=60.0, promotion="strict"))
    assert await dispatch_order(q2, [(pred(0.95), None, 10.0), (pred(0.05), None, 0.0), (pred(0.1), None, 0.0)]) == [1, 2, 0]


async def test_fcfs_bound_promotes_a_waiter_past_its_fcfs_bound(stores):
    # Short service seeds of 0.2 s (Long 3.0 s, paper Table 1 ratios): the Long's FCFS
    # bound is its arrival + max(τ, backlog ≈ 0.2 s) and comes due during the hold; the
    # Shorts queued behind it have bounds ≈ 3 s away, so they keep SJF order.
    opts = dict(tau=0.3, promotion="fcfs-bound", initial_short_service_s=0.2)
    work = [(pred(0.95), None, 0.0), (pred(0.05), None, 0.0), (pred(0.1), None, 0.0), (pred(0.02), None, 0.0)]
    for q in (LocalAdmissionQueue(1, policy_of("sjf", **opts), "parity"), stores(slots=1, policy=policy_of("sjf", **opts))):
        assert await dispatch_order(q, work, hold_s=0.8) == [0, 3, 1, 2]
        assert q.stats.promoted == 1
        assert await dispatch_order(q, work, hold_s=0.0) == [3, 1, 2, 0]


def test_unsupported_policy_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot run policy 'fair'"):
        RedisAdmissionQueue("redis://127.0.0.1:1/0", policy="fair")
    with pytest.raises(ValueError, match="aged-sjf"):
        RedisAdmissionQueue("redis://127.0.0.1:1/0", policy=policy_of("sjf", promotion="aged-sjf"))
    with pytest.raises(ValueError):
        RedisAdmissionQueue("redis://127.0.0.1:1/0", options=RedisSettings(fail_mode="maybe"))
    assert policy_server_args(policy_of("sjf", tau="3x")).tau_mode == "multiple"


# ---- concurrency bound, release, fencing ------------------------------------------------------
async def test_concurrency_bound_across_independent_clients(stores):
    name = backend()
    # three stores = three "processes" (separate connections, separate local state)
    qs = [stores(name=name, slots=2) for _ in range(3)]
    running = 0
    peak = 0
    rnd = random.Random(7)

    async def job(q):
        nonlocal running, peak
        async with q.ticket(pred(rnd.random())):
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(rnd.choice([0, 0.001, 0.005]))
            running -= 1

    await asyncio.wait_for(asyncio.gather(*(job(qs[i % 3]) for i in range(60))), 60)
    assert peak == 2
    snap = await qs[0].snapshot()
    assert snap["in_flight"] == 0 and snap["waiting"] == 0 and snap["dispatched"] == 60 and snap["released"] == 60


async def test_release_is_idempotent_and_thread_safe(stores):
    q = stores(slots=1)
    t = q.ticket(pred(0.1))
    await t.acquire()
    results = []
    threads = [threading.Thread(target=lambda: results.append(t.release(5))) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(results) == [False, False, False, True]
    t2 = q.ticket(pred(0.1))
    await asyncio.wait_for(t2.acquire(), 5)  # the slot came back
    assert await t2.arelease() is True
    assert await t2.arelease() is False
    assert (await q.snapshot())["in_flight"] == 0


async def test_stale_holder_cannot_release_a_newer_lease(stores):
    # a 2 s lease: B's heartbeat (every 0.67 s) keeps it on a loaded machine
    q = stores(slots=1, redis_lease_ttl_s=2.0)
    a = q.ticket(pred(0.1))
    await a.acquire()
    ls = q.loop_state()
    ls.held.pop(a.redis.fence)  # A's process stalls: its lease is no longer renewed
    b = q.ticket(pred(0.1))
    await asyncio.wait_for(b.acquire(), 20)  # granted after A's lease expired
    assert b.redis.fence != a.redis.fence and int(b.redis.fence) > int(a.redis.fence)
    c = q.ticket(pred(0.1))
    c_task = asyncio.create_task(c.acquire())
    await wait_until(snap_is(q, waiting=1))  # C waits in Redis
    assert await a.arelease() is True  # A believes it released ...
    # ... but B's slot stays B's: a release grants the next waiter in the same script, so
    # right after it Redis still has B in flight and C waiting
    snap = await q.snapshot()
    assert snap["in_flight"] == 1 and snap["waiting"] == 1 and snap["expired_leases"] == 1
    assert not c_task.done()
    await b.arelease()
    await asyncio.wait_for(c_task, 5)
    await c.arelease()


async def test_lease_hold_limit_force_releases(stores):
    q = stores(slots=1, lease_ttl_s=0.4, redis_lease_ttl_s=5.0)  # the hold limit, not Redis's TTL, acts
    a = q.ticket(pred(0.1))
    await a.acquire()
    b = q.ticket(pred(0.1))
    await asyncio.wait_for(b.acquire(), 20)  # a never released: the hold limit did it
    assert a.state == "released" and q.stats.expired == 1
    assert a.release() is False
    await b.arelease()


async def test_renew_keeps_a_long_holder(stores):
    # TTLs a loaded machine keeps with margin: the hold limit renewed every 0.5 s (2 s), the
    # Redis lease by the heartbeat every 0.5 s (1.5 s)
    q = stores(slots=1, lease_ttl_s=2.0, redis_lease_ttl_s=1.5)
    a = q.ticket(pred(0.1))
    await a.acquire()
    b = q.ticket(pred(0.1))
    b_task = asyncio.create_task(b.acquire())
    for _ in range(7):  # 3.5 s: > both TTLs, renewed by the holder
        await asyncio.sleep(0.5)
        a.renew()
    assert not b_task.done() and a.state == "running"
    await a.arelease()
    await asyncio.wait_for(b_task, 5)
    await b.arelease()


# ---- cancellation ---------------------------------------------------------------------------
async def test_cancel_and_timeout_leave_the_queue(stores):
    q = stores(slots=1)
    hold = q.ticket(pred(0.1))
    await hold.acquire()
    t1 = q.ticket(pred(0.1))
    with pytest.raises(asyncio.TimeoutError):
        await t1.acquire(timeout=0.2)
    t2 = q.ticket(pred(0.1))
    task = asyncio.create_task(t2.acquire())
    await wait_until(lambda: (t2.redis and t2.redis.rid) is not None)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    t3 = q.ticket(pred(0.9))
    task3 = asyncio.create_task(t3.acquire())
    await wait_until(lambda: (t3.redis and t3.redis.rid) is not None)
    assert t3.release() is False  # release while queued withdraws it
    with pytest.raises(asyncio.CancelledError):
        await task3
    snap = await q.snapshot()
    assert snap["waiting"] == 0 and snap["cancelled"] == 3
    assert {t1.state, t2.state, t3.state} == {"cancelled"}
    late = q.ticket(pred(0.5))
    late_task = asyncio.create_task(late.acquire())
    await wait_until(lambda: (late.redis and late.redis.rid) is not None)
    await hold.arelease()
    await asyncio.wait_for(late_task, 5)  # the cancelled ones were skipped
    await late.arelease()
    assert (await q.snapshot())["in_flight"] == 0


async def test_wakeup_crossing_a_cancellation_never_leaks_the_slot(stores):
    q = stores(slots=1)
    for i in range(12):
        hold = q.ticket(pred(0.1))
        await hold.acquire()
        w = q.ticket(pred(0.1))
        task = asyncio.create_task(w.acquire())
        await wait_until(lambda: (w.redis and w.redis.rid) is not None)
        # the grant (release → dispatch to w) and w's cancellation race in varying order
        hold.release()
        for _ in range(i % 4):
            await asyncio.sleep(0)
        if i % 3 == 0:
            await asyncio.sleep(0.002 * (i % 5))
        task.cancel()
        try:
            await task
            await w.arelease()  # it won the race: it holds the slot, give it back
        except asyncio.CancelledError:
            pass
        await wait_until(lambda: not q.loop_state().tasks, timeout=5)
        snap = await q.snapshot()
        assert snap["in_flight"] == 0 and snap["waiting"] == 0, (i, snap)


# ---- liveness: dead waiters, no polling -------------------------------------------------------
async def test_dead_waiter_is_removed(stores):
    ttl = 1.5  # heartbeat every 0.5 s: 1 s of margin for a live waiter on a loaded machine
    q = stores(slots=1, waiter_ttl_s=ttl, redis_lease_ttl_s=ttl)
    hold = q.ticket(pred(0.1))
    await hold.acquire()
    ls = q.loop_state()
    # a waiter whose process died right after enqueueing: nobody heartbeats it
    await q.run(ls, "enqueue", ["0.1", 0, 0, "0", "", str(ttl), "999@dead"])
    assert (await q.snapshot())["waiting"] == 1
    await wait_until(snap_is(q, waiting=0, expired_waiters=1), timeout=30, step=0.1)
    # a live waiter behind it is heart-beaten and not removed, well past its TTL
    w = q.ticket(pred(0.5))
    task = asyncio.create_task(w.acquire())
    await wait_until(snap_is(q, waiting=1))
    await asyncio.sleep(2.5 * ttl)
    snap = await q.snapshot()
    assert snap["waiting"] == 1 and snap["expired_waiters"] == 1
    await hold.arelease()
    await asyncio.wait_for(task, 5)
    await w.arelease()


async def test_waiters_do_not_poll(stores):
    """Five waiters behind a held slot send Redis nothing while idle but the batched
    heartbeat: every command is counted (INFO commandstats on a server of this test's own,
    so no other test's traffic is in the figures)."""
    with RedisServer() as srv:
        # heartbeat every min(ttl) / 3 = 10 s: at most one lands in the 2 s window
        q = stores(url=srv.url, slots=1, waiter_ttl_s=30.0, redis_lease_ttl_s=30.0)
        hold = q.ticket(pred(0.1))
        await hold.acquire()

        modes = []

        async def job():
            async with q.ticket(pred(0.5)) as t:
                modes.append(t.mode)

        tasks = [asyncio.create_task(job()) for _ in range(5)]
        r = ra.Redis.from_url(srv.url, decode_responses=True)

        async def all_wait_in_redis():
            info = await r.info("commandstats")
            return (await q.snapshot())["waiting"] == 5 and info.get("cmdstat_blpop", {}).get("calls", 0) >= 5

        # until all five wait in Redis and block in BLPOP; a waiter that failed open to the
        # local queue would send Redis nothing either, so not getting there is a failure
        try:
            await wait_until(all_wait_in_redis, timeout=30)
        except AssertionError:
            raise AssertionError(f"the five waiters never all waited in Redis: {await q.snapshot()}, "
                                 f"failopen={q.stats.failopen}, local waiting={q.local.waiting}") from None
        assert q.stats.failopen == 0 and q.local.waiting == 0
        before = await r.info("commandstats")
        await asyncio.sleep(2.0)  # LiteLLM's scheduler would poll ~66 times per waiter here
        after = await r.info("commandstats")
        await r.aclose()

        delta = {k: after[k]["calls"] - before.get(k, {}).get("calls", 0) for k in after}
        delta = {k.removeprefix("cmdstat_"): n for k, n in delta.items() if n}
        expected = {"info": 1}  # the first INFO above (a command is counted once it has run)
        assert delta.get("evalsha", 0) <= 1, delta  # at most one heartbeat
        assert {k: n for k, n in delta.items() if k != "evalsha"} == expected, delta
        await hold.arelease()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        assert modes == ["redis"] * 5 and hold.mode == "redis"  # all granted by Redis
        await q.aclose()


# ---- τ in Redis -------------------------------------------------------------------------------
async def test_tau_is_measured_on_redis_and_shared(stores):
    name = backend()
    q1 = stores(name=name, slots=1, policy=policy_of("sjf", tau="3x", initial_short_service_s=2.0))
    q2 = stores(name=name, slots=1, policy=policy_of("sjf", tau="3x", initial_short_service_s=2.0))
    assert (await q1.snapshot())["tau_s"] == pytest.approx(6.0)
    for _ in range(5):
        async with q1.ticket(pred(0.9)) as t:  # predicted Long, truly Short (answer 20 tokens)
            await asyncio.sleep(0.01)
        t.release(20)
    t = q1.ticket(pred(0.9))
    await t.acquire()
    await t.arelease(20)
    snap = await q2.snapshot()  # another "process" sees the same τ
    assert snap["completed_short"] >= 1
    assert snap["mean_short_service_s"] < 2.0
    assert snap["tau_s"] == pytest.approx(3 * snap["mean_short_service_s"], rel=1e-3)
    long_t = q2.ticket(pred(0.1))
    await long_t.acquire()
    before = (await q2.snapshot())["mean_short_service_s"]
    await long_t.arelease(1500)  # true Long: does not move the Short mean
    snap = await q1.snapshot()
    assert snap["mean_short_service_s"] == before
    # the service statistics (expected service for deadlines and FCFS bounds) are shared too
    assert snap["service_s_by_class"][2] < 30.1 and snap["service_s_by_class"][1] == 8.5
    assert 0 < snap["service_s_per_token"] < 0.01


# ---- events, keys ---------------------------------------------------------------------------
async def test_listeners_and_cluster_hash_tag(stores, redis_url):
    events = []

    class L(QueueEvents):
        def on_enqueue(self, queue, entry):
            events.append("enqueue")

        def on_dispatch(self, queue, entry, wait_s):
            events.append("dispatch")

        def on_complete(self, queue, entry, service_s, answer_tokens):
            events.append(("complete", answer_tokens))

    name = "http://h:1/{odd}/v1"
    q = stores(name=name, slots=1, listeners=[L()])
    async with q.ticket(pred(0.2)):
        pass
    assert events == ["enqueue", "dispatch", ("complete", None)]
    tag = hash_tag("sjf", name)
    assert tag.count("{") == 1 and tag.count("}") == 1
    r = ra.Redis.from_url(redis_url, decode_responses=True)
    keys = [k async for k in r.scan_iter(match="*odd*")]
    await r.aclose()
    assert keys and all(k.startswith(tag + ":") for k in keys)


# ---- Redis unavailable ----------------------------------------------------------------------------
async def test_fail_open_when_redis_is_unreachable(caplog):
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    q = RedisAdmissionQueue(url, slots=1, name=backend(), options=RedisSettings(op_timeout_s=0.5))
    caplog.set_level(logging.WARNING, logger="sjf_core.admission._redis")
    running = peak = 0

    async def job():
        nonlocal running, peak
        async with q.ticket(pred(0.3)):
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1

    await asyncio.wait_for(asyncio.gather(*(job() for _ in range(10))), 20)
    assert peak == 1  # the per-process queue still bounds this process
    assert q.stats.failopen == 10 and q.degraded
    downs = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(downs) == 1 and "fail-open" in downs[0].getMessage()
    await q.aclose()


async def test_fail_closed_refuses_before_admission():
    q = RedisAdmissionQueue(f"redis://127.0.0.1:{free_port()}/0", slots=1, name=backend(), options=RedisSettings(fail_mode="closed", op_timeout_s=0.5))
    t = q.ticket(pred(0.3))
    with pytest.raises(RedisUnavailable) as ei:
        await t.acquire()
    assert isinstance(ei.value, AdmissionRejected) and ei.value.retry_after_s > 0
    assert t.state == "cancelled" and t.release() is False
    await q.aclose()


async def test_redis_restart_mid_burst_loses_no_admitted_request(caplog):
    """Two workers (a Scheduler each, as two proxy processes: each has its own slot ledger)
    share one 1-slot backend through Redis, which restarts while worker 0 holds the slot
    and a burst of 40 waits. Nothing admitted is lost, both fail open and come back, and
    the backend never sees more than one request of a worker at once: worker 0's fail-open
    queue waits for the request Redis granted it before the restart (docs/redis.md: while
    Redis is down each process bounds only itself, so the backend may see workers × slots)."""
    caplog.set_level(logging.WARNING, logger="sjf_core.admission._redis")
    with RedisServer() as srv:
        name = backend()
        workers = [Scheduler(predictor=None, plugins=False, slots=1, redis_url=srv.url,
                             redis=RedisSettings(retry_s=0.2, redis_lease_ttl_s=1.5)) for _ in range(2)]
        qs = [w.queue(name) for w in workers]
        assert all(isinstance(q, RedisAdmissionQueue) for q in qs)
        done = []
        admitted = set()
        modes = []
        running = [0, 0]  # in flight at the backend, per worker
        peak = [0, 0]
        peak_all = 0

        def enter(w):
            nonlocal peak_all
            running[w] += 1
            peak[w] = max(peak[w], running[w])
            peak_all = max(peak_all, sum(running))

        async def job(i):
            w = i % 2
            async with qs[w].ticket(pred(random.Random(i).random())) as t:
                admitted.add(i)
                modes.append(t.mode)
                enter(w)
                await asyncio.sleep(0.03)
                running[w] -= 1
            done.append(i)

        holder = qs[0].ticket(pred(0.0))  # granted by Redis; runs across the restart
        await holder.acquire()
        assert holder.mode == "redis"
        enter(0)
        tasks = [asyncio.create_task(job(i)) for i in range(40)]
        await wait_until(snap_is_at_least(qs[0], waiting=20), timeout=20)  # the burst waits in Redis
        await asyncio.get_running_loop().run_in_executor(None, lambda: srv.restart(down_s=0.3))
        # worker 0 failed open: its fail-open queue has the burst's waiters (and must not
        # run one beside the holder)
        await wait_until(lambda: qs[0].stats.failopen >= 1 and qs[0].local.waiting + qs[0].local.in_flight >= 1,
                         timeout=20)
        running[0] -= 1
        await holder.arelease()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        assert sorted(done) == list(range(40)) and admitted == set(range(40))
        assert "local" in modes  # fail-open observed
        assert qs[0].stats.failopen >= 1 and qs[1].stats.failopen >= 1
        # the bound, per worker (slots=1), and so at most workers x slots in all
        assert peak == [1, 1] and peak_all <= 2, f"in flight at the backend: per worker {peak}, all {peak_all}"
        # after the restart the shared queue is used again
        async with qs[0].ticket(pred(0.1)) as t:
            assert t.mode == "redis"
        snap = await qs[0].snapshot()
        assert snap["in_flight"] == 0
        msgs = [r.getMessage() for r in caplog.records]
        assert sum("unreachable" in m for m in msgs) <= 2  # once per store
        assert any("reachable again" in m for m in msgs)
        for q in qs:
            await q.aclose()


async def test_leases_are_reasserted_after_redis_lost_its_data():
    with RedisServer() as srv:
        q = RedisAdmissionQueue(srv.url, slots=1, name=backend(), options=RedisSettings(redis_lease_ttl_s=3.0, retry_s=0.1))
        a = q.ticket(pred(0.1))
        await a.acquire()
        await asyncio.get_running_loop().run_in_executor(None, srv.restart)
        # the holder's next heartbeat re-creates its lease in the new state
        await wait_until(snap_is(q, in_flight=1, reasserted=1), timeout=30, step=0.05)
        b = q.ticket(pred(0.1))
        task = asyncio.create_task(b.acquire())
        await wait_until(snap_is(q, waiting=1))  # b reached Redis and waits there:
        assert not task.done() and (await q.snapshot())["in_flight"] == 1  # the bound holds again
        await a.arelease()
        await asyncio.wait_for(task, 5)
        assert b.mode == "redis"
        await b.arelease()
        await q.aclose()


# ---- configuration --------------------------------------------------------------------------------
async def test_scheduler_selects_redis_by_argument_or_env(redis_url, monkeypatch):
    from sjf_core._scheduler import Scheduler
    from sjf_core.config import SchedulerConfig

    monkeypatch.delenv("SJF_REDIS_URL", raising=False)
    assert Scheduler(predictor=None).redis_url is None
    s = Scheduler(predictor=None, redis_url=redis_url, redis_options={"fail_mode": "closed"})
    q = s.queue(backend())
    assert isinstance(q, RedisAdmissionQueue) and q.fail_mode == "closed"
    t = s.ticket(q.name, {"messages": [{"role": "user", "content": "hi"}]})
    async with t:
        assert t.mode == "redis"
    await q.aclose()
    monkeypatch.setenv("SJF_REDIS_URL", redis_url)
    monkeypatch.setenv("SJF_REDIS_LEASE_TTL_S", "4.5")
    assert Scheduler(predictor=None).redis_url is None  # building a Scheduler reads no environment
    s2 = Scheduler(SchedulerConfig.from_env(), predictor=None)
    q2 = s2.queue(backend())
    assert isinstance(q2, RedisAdmissionQueue) and q2.redis_lease_ttl_s == 4.5
    assert not isinstance(Scheduler(predictor=None, redis_url="").queue("x"), RedisAdmissionQueue)
    with pytest.raises(ValueError, match="fair"):
        Scheduler(SchedulerConfig.from_env(), predictor=None, policy="fair")
    monkeypatch.setenv("SJF_REDIS_FAIL_MODE", "sometimes")
    with pytest.raises(ValueError, match="SJF_REDIS_FAIL_MODE"):
        SchedulerConfig.from_env()


def test_plugin_settings_select_redis_from_file_or_env(tmp_path):
    from litellm_sjf.settings import load_settings

    f = tmp_path / "sjf.yaml"
    f.write_text("redis_url: redis://127.0.0.1:7/0\nredis: {fail_mode: closed, redis_lease_ttl_s: 4}\n")
    s = load_settings({"SJF_CONFIG": str(f)})
    assert s.redis_url == "redis://127.0.0.1:7/0" and (s.redis["fail_mode"], s.redis["redis_lease_ttl_s"]) == ("closed", 4)
    s = load_settings({"SJF_CONFIG": str(f), "SJF_REDIS_URL": "redis://h:8/1", "SJF_REDIS_FAIL_MODE": "open"})
    assert s.redis_url == "redis://h:8/1" and (s.redis["fail_mode"], s.redis["redis_lease_ttl_s"]) == ("open", 4)  # env beats the file
    f.write_text("redis_url: redis://127.0.0.1:7/0\nredis: {lease: 4}\n")
    with pytest.raises(ValueError, match="unknown Redis options"):
        load_settings({"SJF_CONFIG": str(f)})
    with pytest.raises(ValueError, match="cannot run policy 'fair'"):
        load_settings({"SJF_REDIS_URL": "redis://h:8/1", "SJF_POLICY": "fair"})


# ---- strict priority bands --------------------------------------------------------------------
BAND_SCENARIOS = [
    ("sjf", {"tau": 5.5, "promotion": "strict"}),
    ("sjf", {"tau": 5.5, "promotion": "one-in-k", "k": 2}),
    ("sjf", {"tau": 5.5, "promotion": "aging", "horizon": 0.5}),
    ("sjf-tokens", {"tau": 5.5, "max_wait_s": 5.0}),
    ("sjf", {"tau": 5.5, "promotion": "fcfs-bound", "floor": 0.0, "initial_short_service_s": 0.5}),
]


@pytest.mark.parametrize("policy,opts", BAND_SCENARIOS, ids=[f"{p}-{o}" for p, o in BAND_SCENARIOS])
async def test_strict_bands_same_order_as_in_process_queue(stores, policy, opts):
    """Old, due low-priority waiters (deadline past, past τ, max wait, FCFS bound) and
    fresh high-priority ones: both stores serve every priority-10 waiter first, then
    apply the rule inside band 0, in the same order."""
    work = [(pred(0.9), RequestMeta(deadline_s=0.5 if i % 2 else None), 40.0 + 0.02 * i) for i in range(4)]
    work += [(pred(0.1 * i), RequestMeta(priority=10), 0.02 * i) for i in range(4)]
    work += [(pred(0.05), RequestMeta(priority=-3), 60.0)]
    local = LocalAdmissionQueue(1, policy_of(policy, **opts), "parity")
    expected = await dispatch_order(local, work)
    assert sorted(expected[:4]) == [4, 5, 6, 7], expected  # band 10 before every due band-0 waiter
    assert expected[-1] == 8  # the lowest band last, although oldest and shortest
    got = await dispatch_order(stores(slots=1, policy=policy_of(policy, **opts)), work)
    assert got == expected, (policy, opts)


# ---- fair shares across tenants ---------------------------------------------------------------
@pytest.mark.parametrize("fairness", ["user", "off"])
async def test_fair_shares_across_tenants_in_redis(stores, fairness):
    """Three stores (three independent clients of one redis-server) share one backend:
    tenant "flood" queues 10 short requests, then tenant "lone" one long one. With fair
    shares the lone one is served within the first 2; without, SJF serves it last."""
    name = backend()
    qs = [stores(slots=1, name=name, policy=policy_of("sjf", tau="off"), fairness=fairness) for _ in range(3)]
    blocker = qs[0].ticket(pred(0.0), RequestMeta(tenant="holder"))
    await blocker.acquire()
    order: list[str] = []

    async def job(q, tenant, p):
        t = q.ticket(pred(p), RequestMeta(tenant=tenant))
        await t.acquire()
        order.append(tenant)
        await t.arelease(10)

    tasks = []
    for i in range(10):
        tasks.append(asyncio.create_task(job(qs[i % 3], "flood", 0.05)))
    snap = await qs[0].snapshot()
    while snap["waiting"] < 10:
        await asyncio.sleep(0.01)
        snap = await qs[0].snapshot()
    tasks.append(asyncio.create_task(job(qs[2], "lone", 0.9)))
    while snap["waiting"] < 11:
        await asyncio.sleep(0.01)
        snap = await qs[0].snapshot()
    await blocker.arelease(10)
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    pos = order.index("lone")
    if fairness == "user":
        assert pos < 2, order
    else:
        assert pos == 10, order
    snap = await qs[0].snapshot()
    assert snap["in_flight"] == 0 and snap["waiting"] == 0


async def test_supersede_across_processes_in_redis(stores):
    """Keystrokes from two stores (two processes' view of one queue) with one supersede key:
    each newer one removes the queued older one, which raises Superseded at once; a
    running ticket is never touched; another tenant's key is separate."""
    from sjf_core._errors import Superseded

    name = backend()
    qs = [stores(slots=1, name=name, policy=policy_of("sjf", tau="off"), fairness="user") for _ in range(2)]
    running = qs[0].ticket(pred(0.1), RequestMeta(tenant="ed", supersede="buf"))
    await running.acquire()
    tickets, tasks = [], []
    for i in range(4):
        t = qs[i % 2].ticket(pred(0.1), RequestMeta(tenant="ed", supersede="buf"))
        tickets.append(t)
        tasks.append(asyncio.create_task(t.acquire()))
        await wait_until(lambda: (t.redis and t.redis.rid) is not None)
        if i:
            with pytest.raises(Superseded):
                await asyncio.wait_for(tasks[i - 1], 10)  # told at once, while the slot is held
    other = qs[1].ticket(pred(0.1), RequestMeta(tenant="someone-else", supersede="buf"))
    other_task = asyncio.create_task(other.acquire())
    await wait_until(lambda: (other.redis and other.redis.rid) is not None)
    snap = await qs[0].snapshot()
    assert snap["waiting"] == 2 and snap["in_flight"] == 1 and running.state == "running"
    await running.arelease(5)
    done, _ = await asyncio.wait([tasks[3], other_task], return_when=asyncio.FIRST_COMPLETED)
    first = tickets[3] if tasks[3] in done else other
    await first.arelease(5)
    await asyncio.gather(tasks[3], other_task)
    await (other if first is tickets[3] else tickets[3]).arelease(5)
    snap = await qs[0].snapshot()
    assert snap["in_flight"] == 0 and snap["waiting"] == 0 and snap["dispatched"] == 3
