"""The in-process admission queue (asyncio): DESIGN.md invariants 1–5 and 7, rate limits.

Invariant 1 measured at a real backend is in tests/integration/test_admission_backend.py;
these tests use the queue directly. τ uses an injected clock, so no test depends on wall-clock speed.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from sjf_core.admission._local import LocalAdmissionQueue, QueueEvents
from sjf_core._errors import AdmissionRejected
from sjf_core.policy._policies import Policy, RequestMeta, make_policy
from sjf_core.predict._prediction import Prediction


def pred(p_long: float) -> Prediction:
    return Prediction.from_probs([1 - p_long, 0.0, p_long])


class Clock:
    """A manual monotonic clock (seconds)."""

    def __init__(self, t: float = 100.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


# ---- 2. exactly-once release -----------------------------------------------------------------
async def test_exactly_once_release_on_every_path():
    q = LocalAdmissionQueue(slots=1, policy="sjf", lease_ttl_s=30)
    holder = q.ticket(pred(0.5))
    await holder.acquire()

    outcomes = []

    async def ok():
        async with q.ticket(pred(0.1)):
            await asyncio.sleep(0)
        outcomes.append("ok")

    async def error():
        try:
            async with q.ticket(pred(0.2)):
                raise RuntimeError("backend 500")
        except RuntimeError:
            outcomes.append("error")

    async def timeout_queued():
        t = q.ticket(pred(0.9))
        with pytest.raises(asyncio.TimeoutError):
            await t.acquire(timeout=0.05)
        assert t.release() is False
        outcomes.append("timeout")

    async def cancelled_running():
        async with q.ticket(pred(0.3)):
            await asyncio.sleep(3600)

    async def cancelled_queued():
        await q.ticket(pred(0.95)).acquire()

    tasks = [asyncio.create_task(f()) for f in (ok, error, timeout_queued)]
    running = asyncio.create_task(cancelled_running())
    queued = asyncio.create_task(cancelled_queued())
    await asyncio.sleep(0.1)  # the timeout fires while the holder keeps the slot
    queued.cancel()
    await settle()
    assert holder.release() is True
    assert holder.release() is False  # idempotent
    await asyncio.sleep(0.05)
    running.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    with pytest.raises(asyncio.CancelledError):
        await running
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert sorted(outcomes) == ["error", "ok", "timeout"]
    assert q.in_flight == 0 and q.waiting == 0
    assert q.stats.dispatched == q.stats.released == 4  # holder, ok, error, cancelled_running
    assert q.stats.cancelled == 2


async def test_release_from_another_thread_and_lease_expiry():
    q = LocalAdmissionQueue(slots=1, policy="sjf", lease_ttl_s=0.05)
    t1 = q.ticket(pred(0.5))
    await t1.acquire()
    t2 = q.ticket(pred(0.5))
    waiter = asyncio.create_task(t2.acquire())
    th = threading.Thread(target=t1.release, args=(100,))
    th.start()
    th.join()
    await asyncio.wait_for(waiter, 5)
    assert t2.state == "running"
    # t2's owner vanishes: the lease force-releases it once
    await asyncio.sleep(0.2)
    assert t2.state == "released" and q.stats.expired == 1 and q.in_flight == 0
    assert t2.release() is False and q.stats.released == 2


# ---- 3. work-conserving ------------------------------------------------------------------------
async def test_release_dispatches_the_next_waiter_at_once():
    q = LocalAdmissionQueue(slots=1, policy="sjf")
    t1 = q.ticket(pred(0.5))
    await t1.acquire()
    t2 = q.ticket(pred(0.5))
    task = asyncio.create_task(t2.acquire())
    await settle()
    assert t2.state == "queued"
    t1.release()
    # granted synchronously inside release(): no polling gap, no idle backend with a queue
    assert t2.state == "running" and q.in_flight == 1 and q.waiting == 0
    await task
    t2.release()


async def test_arrival_at_an_idle_queue_is_admitted_without_waiting():
    q = LocalAdmissionQueue(slots=2, policy="sjf", clock=Clock())
    t = q.ticket(pred(0.9))
    await t.acquire()
    assert t.state == "running" and t.wait_s == 0.0  # granted at the same clock instant
    t.release()


# ---- 4. τ bound, strict, on the live queue -----------------------------------------------------
async def test_strict_tau_promotes_the_oldest_aged_waiter():
    clock = Clock()
    q = LocalAdmissionQueue(slots=1, policy=make_policy("sjf", tau=5.0, promotion="strict"), clock=clock)
    holder = q.ticket(pred(0.5))
    await holder.acquire()
    order = []

    async def run(name, p):
        t = q.ticket(pred(p))
        await t.acquire()
        order.append(name)
        t.release()

    tasks = [asyncio.create_task(run("old-long", 0.95))]
    await settle()
    clock.t += 3
    tasks.append(asyncio.create_task(run("older-long", 0.9)))
    await settle()
    clock.t += 4  # old-long waited 7 s > τ, older-long 4 s
    tasks.append(asyncio.create_task(run("short", 0.01)))
    await settle()
    holder.release()
    await asyncio.gather(*tasks)
    # aged first (oldest first), then SJF order: older-long has waited 4 s < τ, so the
    # short's lower key wins
    assert order == ["old-long", "short", "older-long"]
    assert q.stats.promoted == 1


# ---- 5. fail-open -------------------------------------------------------------------------------
async def test_unscored_and_broken_policy_degrade_to_fcfs(caplog):
    class Exploding(Policy):
        name = "exploding"

        def key(self, prediction, meta):
            raise ZeroDivisionError("policy bug")

    class BadListener(QueueEvents):
        def on_enqueue(self, queue, entry):
            raise RuntimeError("listener bug")

    q = LocalAdmissionQueue(slots=1, policy=Exploding(tau="off"), listeners=[BadListener()])
    holder = q.ticket(pred(0.5))
    with caplog.at_level(logging.ERROR, logger="sjf_core.admission._local"):
        await holder.acquire()
    order = []

    async def run(i, p):
        t = q.ticket(p)
        await t.acquire()
        order.append(i)
        t.release()

    tasks = []
    for i, p in enumerate([pred(0.9), None, pred(0.1), pred(0.5)]):
        tasks.append(asyncio.create_task(run(i, p)))
        await settle()
    holder.release()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3]  # every key fell back to the same neutral key: arrival order
    assert q.stats.fallback == 5 and q.in_flight == 0
    assert any("listener" in r.getMessage() for r in caplog.records)


# ---- 7. cancellation while queued --------------------------------------------------------------
async def test_cancelled_waiter_leaves_at_once_and_never_runs():
    q = LocalAdmissionQueue(slots=1, policy="sjf")
    holder = q.ticket(pred(0.5))
    await holder.acquire()
    ran = []

    async def client(p):
        async with q.ticket(pred(p)):
            ran.append(p)

    gone = asyncio.create_task(client(0.01))
    stays = asyncio.create_task(client(0.9))
    await settle()
    assert q.waiting == 2
    gone.cancel()
    await settle()
    assert q.waiting == 1 and q.stats.cancelled == 1  # left promptly, while the slot is still held
    holder.release()
    await stays
    assert ran == [0.9]


async def test_release_of_a_queued_ticket_withdraws_it():
    q = LocalAdmissionQueue(slots=1, policy="sjf")
    holder = q.ticket(pred(0.5))
    await holder.acquire()
    t = q.ticket(pred(0.1))
    task = asyncio.create_task(t.acquire())
    await settle()
    assert t.release() is False
    await settle()
    assert q.waiting == 0 and t.state == "cancelled"
    with pytest.raises(asyncio.CancelledError):
        await task
    holder.release()
    assert q.in_flight == 0


# ---- deadlines and priority through the live queue -------------------------------------------
async def test_priority_and_deadline_metadata_reach_the_order():
    clock = Clock()
    q = LocalAdmissionQueue(slots=1, policy=make_policy("sjf", tau="off"), clock=clock)
    holder = q.ticket(pred(0.5))
    await holder.acquire()
    order = []

    async def run(name, p, meta):
        t = q.ticket(pred(p), meta)
        await t.acquire()
        order.append(name)
        t.release()

    tasks = [asyncio.create_task(run("plain-short", 0.05, RequestMeta())),
             asyncio.create_task(run("vip-long", 0.95, RequestMeta(priority=5))),
             asyncio.create_task(run("deadline-long", 0.99, RequestMeta(deadline_s=31.0)))]
    await settle()
    clock.t += 2.0  # deadline-long: latest start = 31 - 30.1 s (Long mean) = 0.9 s: due
    holder.release()
    await asyncio.gather(*tasks)
    # strict bands: the priority-5 band first; the due deadline then goes first inside band 0
    assert order == ["vip-long", "deadline-long", "plain-short"]


# ---- rate limit -----------------------------------------------------------------------------------
async def test_rate_limit_spaces_dispatches_in_policy_order():
    q = LocalAdmissionQueue(slots=1, policy="sjf", rate_limit="1/s")
    q.rate_limit = q.rate_limit.__class__(1, 0.2)  # one dispatch per 0.2 s keeps the test short
    q.grants.throttler = q.rate_limit.throttler()
    order, sent = [], []
    loop = asyncio.get_running_loop()
    holder = q.ticket(pred(0.5))
    await holder.acquire()
    sent.append(loop.time())

    async def run(name, p):
        t = q.ticket(pred(p))
        await t.acquire()
        sent.append(loop.time())
        order.append(name)
        t.release()

    tasks = [asyncio.create_task(run(n, p)) for n, p in (("long", 0.9), ("mid", 0.5), ("short", 0.1))]
    await settle()
    holder.release()
    await asyncio.gather(*tasks)
    assert order == ["short", "mid", "long"]  # the rate limit never reorders
    gaps = [b - a for a, b in zip(sent, sent[1:])]
    assert all(g >= 0.19 for g in gaps), gaps  # a lower bound: the limit is enforced
    assert q.in_flight == 0


async def test_rejected_ticket_release_is_a_no_op():
    q = LocalAdmissionQueue(slots=1, policy="sjf", overload={"max_queue_depth": 1})
    holder = q.ticket(pred(0.5))
    await holder.acquire()
    waiting = asyncio.create_task(q.ticket(pred(0.1)).acquire())
    await settle()
    t = q.ticket(pred(0.1))
    with pytest.raises(AdmissionRejected):
        await t.acquire()
    assert t.state == "rejected" and t.release() is False
    holder.release()
    await waiting
    assert q.in_flight == 1


# ---- lazy scoring (ticket(scorer=...)): the predictor only where there is an order to decide ----
class Events(QueueEvents):
    def __init__(self):
        self.log = []

    def on_enqueue(self, queue, entry):
        self.log.append(("enqueue", entry.seq, entry.scored))

    def on_complete(self, queue, entry, service_s, answer_tokens):
        self.log.append(("complete", entry.seq, entry.scored, entry.klass))


async def test_lazy_scoring_skips_the_predictor_at_zero_contention():
    ev = Events()
    q = LocalAdmissionQueue(slots=1, policy=make_policy("sjf", tau="3x"), listeners=[ev])
    calls = []
    short_s = q.pending.service.by_predicted[0]
    t = q.ticket(scorer=lambda: (calls.append(1) or pred(0.9), None))
    await t.acquire()
    assert t.state == "running" and not t.entry.scored
    t.release(40)
    await settle()
    assert calls == [] and q.in_flight == 0 and q.stats.fallback == 0
    assert ev.log == [("enqueue", 0, False), ("complete", 0, False, t.entry.klass)]
    # it fed the true-class statistics only: no predicted class was invented for it
    assert q.pending.service.by_predicted[0] == short_s and q.pending.tau.completed_short == 1


async def test_lazy_scoring_scores_the_runner_and_newcomers_once_the_order_matters():
    q = LocalAdmissionQueue(slots=1, policy=make_policy("sjf", tau="3x", promotion="fcfs-bound"))
    calls = []

    def scorer(name, p_long):
        return lambda: (calls.append(name) or pred(p_long), None)

    runner = q.ticket(scorer=scorer("runner", 0.9))
    await runner.acquire()
    assert calls == []
    long_, short = q.ticket(scorer=scorer("long", 0.8)), q.ticket(scorer=scorer("short", 0.1))
    order = []

    async def go(name, t):
        await t.acquire()
        order.append(name)
        t.release()

    tasks = [asyncio.create_task(go("long", long_)), asyncio.create_task(go("short", short))]
    await settle()
    # the first waiter scored itself and the runner; the second scored itself
    assert calls == ["long", "runner", "short"]
    assert runner.entry.scored and runner.entry.klass == 2
    # the runner's remaining work is now estimated from its class (the "fcfs-bound" backlog)
    assert q.pending.strategy.backlog.running[id(runner.entry)][0] == q.pending.service.expected_s(2)
    runner.release()
    await asyncio.gather(*tasks)
    assert order == ["short", "long"]  # ascending P(Long), as if scored up front
    assert calls == ["long", "runner", "short"]  # nobody scored twice


async def test_lazy_scoring_is_immediate_under_overload_control_and_a_broken_scorer_is_fcfs():
    q = LocalAdmissionQueue(slots=1, policy="sjf", overload={"max_queue_depth": 10})
    calls = []
    t = q.ticket(scorer=lambda: (calls.append(1) or pred(0.2), None))
    await t.acquire()
    assert calls == [1] and t.entry.scored  # overload control needs the class at the door
    t.release()

    def broken():
        raise RuntimeError("scorer down")

    q2 = LocalAdmissionQueue(slots=1, policy="sjf")
    a = q2.ticket(scorer=broken)
    await a.acquire()
    b = q2.ticket(scorer=broken)
    task = asyncio.create_task(b.acquire())
    await settle()
    assert a.entry.fallback and b.entry.fallback  # both scored (failed): FCFS key, no crash
    a.release()
    await task
    b.release()
    await settle()
    assert q2.in_flight == 0 and q2.stats.fallback == 2
