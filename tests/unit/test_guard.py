"""The starvation guard after real traffic (issue 11): a burst keeps SJF order on a queue that
has already served requests one at a time, after a quiet period, and after the backend's speed
changed; and starvation stays bounded on the served-work clock.

Drives the pending structures with an explicit virtual clock (the simulator's way) and the
live asyncio ``AdmissionQueue`` (real event loop, no sockets): no timing assertions.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from sjf_core.admission._local import LocalAdmissionQueue
from sjf_lab.sim.policies import policy_of
from sjf_core.policy._entry import LONG, SHORT
from sjf_core.policy._pending import REQUEST_OVERHEAD_TOKENS
from sjf_core.predict._prediction import Prediction


def tokens_pred(tokens: float) -> Prediction:
    klass = SHORT if tokens < 200 else LONG if tokens >= 800 else 1
    probs = [0.0, 0.0, 0.0]
    probs[klass] = 1.0
    return Prediction.from_probs(probs, float(tokens))


#: the burst: Longs (1100 tokens) and Shorts (60) interleaved, Longs first in arrival order
BURST = [1100.0 if i % 2 == 0 else 60.0 + i for i in range(20)]


def warm_up(policy, pending, n: int = 100, tokens_per_s: float = 100.0, t0: float = 0.0) -> float:
    """Serve ``n`` requests one at a time (each arrives when the previous one is done), as a
    quiet morning would; returns the clock after the last one."""
    now = t0
    for i in range(n):
        tokens = (40.0, 500.0, 1100.0)[i % 3]  # every class, so every estimate is learned
        e = policy.make_entry(10_000 + i, now, tokens_pred(tokens))
        pending.push(e)
        got = pending.pop(now)
        assert got is e
        service = tokens / tokens_per_s
        now += service
        pending.observe(e, service, SHORT if tokens < 200 else LONG if tokens >= 800 else 1, tokens)
    return now


def held_burst_order(policy, pending, now: float, spread_s: float = 0.05) -> list[int]:
    """Queue the whole burst behind a busy backend (arrivals ``spread_s`` apart), then serve it."""
    entries = []
    for i, tokens in enumerate(BURST):
        e = policy.make_entry(i, now + i * spread_s, tokens_pred(tokens))
        e.payload = i
        pending.push(e)
        entries.append(e)
    now += len(BURST) * spread_s
    order = []
    while len(pending):
        e = pending.pop(now)
        order.append(e.payload)
        service = BURST[e.payload] / 100.0
        now += service
        pending.observe(e, service, SHORT if BURST[e.payload] < 200 else LONG, BURST[e.payload])
    return order


KEY_ORDER = sorted(range(len(BURST)), key=lambda i: (BURST[i], i))


@pytest.mark.parametrize("idle_s", [0.0, 3600.0])
def test_warmed_up_queue_serves_a_held_burst_in_key_order(idle_s):
    policy = policy_of("sjf-tokens")  # the project defaults
    pending = policy.new_pending()
    now = warm_up(policy, pending) + idle_s
    assert held_burst_order(policy, pending, now) == KEY_ORDER


def test_a_burst_with_close_keys_is_not_served_in_arrival_order():
    """Requests that arrive together are not "ahead" of each other: with close, noisy keys
    (what a real predictor gives) a held burst of 40 is still served in key order, not by
    due points spread over its arrival order (which FCFS-start bounds would give)."""
    import random

    rnd = random.Random(3)
    keys = [rnd.uniform(300.0, 700.0) for _ in range(40)]
    policy = policy_of("sjf-tokens")
    pending = policy.new_pending()
    now = warm_up(policy, pending)
    for i, k in enumerate(keys):
        e = policy.make_entry(i, now + 0.01 * i, tokens_pred(k))
        e.payload = i
        pending.push(e)
    now += 1.0
    order = []
    while len(pending):
        e = pending.pop(now)
        order.append(e.payload)
        now += keys[e.payload] / 100.0
        pending.observe(e, keys[e.payload] / 100.0, 1, keys[e.payload])
    assert order == sorted(range(40), key=lambda i: keys[i])


def test_a_speed_change_after_warm_up_does_not_change_the_burst_order():
    policy = policy_of("sjf-tokens")
    pending = policy.new_pending()
    now = warm_up(policy, pending, tokens_per_s=5000.0)  # 50x faster than the burst
    assert held_burst_order(policy, pending, now, spread_s=0.2) == KEY_ORDER


def test_cold_and_warm_give_the_same_order():
    policy = policy_of("sjf-tokens")
    cold = held_burst_order(policy, policy.new_pending(), 0.0)
    warm_pending = policy.new_pending()
    warm = held_burst_order(policy, warm_pending, warm_up(policy, warm_pending))
    assert cold == warm == KEY_ORDER


def test_tau_off_disables_the_guard():
    policy = policy_of("sjf-tokens", tau="off", slowdown=0.01, work_slack=0.0)
    pending = policy.new_pending()
    long_e = policy.make_entry(0, 0.0, tokens_pred(1100.0))
    pending.push(long_e)
    now = 0.0
    for i in range(1, 200):  # a stream of Shorts, one arriving per dispatch
        pending.push(policy.make_entry(i, now, tokens_pred(50.0)))
        assert pending.pop(now) is not long_e
        now += 0.5


@pytest.mark.parametrize("slowdown,slack", [(8.0, 0.2), (2.0, 0.0), (4.0, 1.0)])
def test_work_bound_starvation_bound_under_a_stream_of_shorts(slowdown, slack):
    """A Long waiting behind a backlog and an endless stream of Shorts is dispatched once the
    backend has served max(slowdown × its work, (1 + slack) × the work ahead of it) since it
    arrived, and not much later (one Short of granularity)."""
    policy = policy_of("sjf-tokens", slowdown=slowdown, work_slack=slack)
    pending = policy.new_pending()
    now = 0.0
    ahead = [policy.make_entry(i, now, tokens_pred(500.0)) for i in range(3)]
    for e in ahead:
        pending.push(e)
    long_e = policy.make_entry(3, now, tokens_pred(1100.0))
    start = pending.served_work
    pending.push(long_e)
    work_ahead = 3 * (500.0 + REQUEST_OVERHEAD_TOKENS)
    bound = max(slowdown * (1100.0 + REQUEST_OVERHEAD_TOKENS), (1 + slack) * work_ahead)
    seq = 4
    served_before = None
    for _ in range(10_000):
        pending.push(policy.make_entry(seq, now, tokens_pred(50.0)))
        seq += 1
        served = pending.served_work - start
        got = pending.pop(now)
        if got is long_e:
            served_before = served
            break
        now += 0.5
    assert served_before is not None, "the Long starved"
    assert served_before >= bound - 1e-6
    assert served_before <= bound + 500.0 + REQUEST_OVERHEAD_TOKENS  # at most one more request


def test_max_wait_s_is_an_absolute_bound():
    policy = policy_of("sjf-tokens", tau=1000.0, promotion="strict", max_wait_s=30.0)
    pending = policy.new_pending()
    long_e = policy.make_entry(0, 0.0, tokens_pred(1100.0))
    pending.push(long_e)
    now = 0.0
    for i in range(1, 1000):
        pending.push(policy.make_entry(i, now, tokens_pred(50.0)))
        got = pending.pop(now)
        if got is long_e:
            break
        now += 1.0
    assert got is long_e and 30.0 <= now <= 31.0


@pytest.mark.parametrize("bad", [{"slowdown": 0}, {"slowdown": math.inf}, {"work_slack": -1},
                                 {"max_wait_s": 0}, {"max_wait_s": -5}])
def test_bad_guard_options_raise(bad):
    with pytest.raises(ValueError):
        policy_of("sjf-tokens", **bad)


async def test_live_queue_after_warm_up_and_idle_serves_the_held_burst_in_key_order():
    """The same through the asyncio AdmissionQueue, with real tasks: 100 requests served one
    at a time, a quiet pause, then a burst queued behind a held slot."""
    q = LocalAdmissionQueue(1, policy_of("sjf-tokens"), "warm")
    for i in range(100):
        t = q.ticket(tokens_pred(40.0 if i % 3 else 500.0))
        await t.acquire()
        await asyncio.sleep(0)
        t.release(40 if i % 3 else 500)
    await asyncio.sleep(0.05)  # the quiet period (real time, no assertion on it)
    blocker = q.ticket(tokens_pred(50.0))
    await blocker.acquire()
    order: list[int] = []

    async def job(i, tokens):
        t = q.ticket(tokens_pred(tokens))
        await t.acquire()
        order.append(i)
        await asyncio.sleep(0)
        t.release(int(tokens))

    tasks = []
    for i, tokens in enumerate(BURST):
        tasks.append(asyncio.ensure_future(job(i, tokens)))
        await asyncio.sleep(0)
    while q.waiting < len(BURST):
        await asyncio.sleep(0.001)
    blocker.release(50)
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    assert order == KEY_ORDER
    assert q.in_flight == 0
