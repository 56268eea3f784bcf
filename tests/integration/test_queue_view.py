"""The read-only queue view (``AdmissionQueue.view()``, sjf_core.admission._view) on both stores.

One request holds the slot while three wait (a Long, a Medium and a Short prediction, queued
in that order); the view must list the runner and the waiters in dispatch (SJF) order with
their predicted class and tokens, band, tenant, time waited and when the guard promotes each,
and must not change the queue: the dispatch order afterwards is the listed one. The local queue
and the Redis store (a real redis-server) give the same answer.
"""

from __future__ import annotations

import asyncio

import pytest
from test_queue_contract import make_queue  # noqa: F401 (the fixture: a local and a Redis queue)
from waits import wait_until

from sjf_core.admission._local import LocalAdmissionQueue
from sjf_core.admission._view import local_view
from sjf_core.policy._policies import RequestMeta, make_policy
from sjf_core.config import PromotionSettings
from sjf_core.predict._prediction import Prediction

LONG = Prediction.from_probs([0.0, 0.1, 0.9], expected_tokens=1500.0)
MEDIUM = Prediction.from_probs([0.1, 0.8, 0.1], expected_tokens=450.0)
SHORT = Prediction.from_probs([0.9, 0.1, 0.0], expected_tokens=80.0)


async def _fill(q) -> tuple:
    runner = q.ticket(SHORT, RequestMeta(tenant="t-run"))
    await runner.acquire()
    waiters = []
    for p in (LONG, MEDIUM, SHORT):
        t = q.ticket(p, RequestMeta(tenant="t-wait"))
        waiters.append((t, asyncio.ensure_future(t.acquire())))
    await wait_until(lambda: _three_waiting(q), timeout=10)
    return runner, waiters


async def _three_waiting(q) -> bool:
    return (await q.view())["waiting"] == 3


async def _drain(runner, waiters) -> list:
    """Release the runner, then each waiter as it is granted; the grant order (by prediction)."""
    order = []
    runner.release(10)
    pending = {fut: t for t, fut in waiters}
    while pending:
        done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for fut in done:
            t = pending.pop(fut)
            order.append(t.entry.expected_tokens)
            t.release(10)
    return order


@pytest.mark.parametrize("rule", ["work-bound", "strict"])
async def test_view_lists_runner_and_waiters_in_dispatch_order(make_queue, rule):
    q = make_queue(policy=make_policy("sjf-tokens", tau="30" if rule == "strict" else "3x", promotion=rule))
    runner, waiters = await _fill(q)
    view = await q.view()
    assert (view["in_flight"], view["waiting"], len(view["running"]), view["truncated"]) == (1, 3, 1, 0)
    assert view["promotion"] == rule
    w = view["waiters"]
    assert [x["expected_tokens"] for x in w] == [80.0, 450.0, 1500.0]
    assert [x["class"] for x in w] == ["short", "medium", "long"]
    assert all(x["priority"] == 0 and x["waited_s"] >= 0 for x in w)
    if rule == "work-bound":  # due once the served-work clock has moved by max(8 × own work, ...)
        assert [x["due_in_tokens"] > 0 for x in w] == [True] * 3 and all(x["due_in_s"] is None for x in w)
        assert w[0]["due_in_tokens"] < w[1]["due_in_tokens"] < w[2]["due_in_tokens"]
    else:  # due τ = 30 s after its arrival
        assert all(x["due_in_tokens"] is None and 0 < x["due_in_s"] <= 30 for x in w)
    if q.store == "local":  # tenants travel with the entry (the Redis store keeps them only with fairness on)
        assert {x["tenant"] for x in w} == {"t-wait"} and view["running"][0]["tenant"] == "t-run"
    assert await _drain(runner, waiters) == [80.0, 450.0, 1500.0]  # the view changed nothing
    await wait_until(lambda: _drained(q), timeout=10)  # a Redis release lands a moment later


async def _drained(q) -> bool:
    v = await q.view()
    return (v["waiting"], v["in_flight"], v["waiters"], v["running"]) == (0, 0, [], [])


async def test_local_view_limit_and_max_wait_points():
    q = LocalAdmissionQueue(slots=1, policy=make_policy("sjf-tokens", promotion=PromotionSettings(max_wait_s=60)), name="http://127.0.0.1:1/v1")
    runner = q.ticket(SHORT)
    await runner.acquire()
    futs = [asyncio.ensure_future(q.ticket(p).acquire()) for p in (LONG, MEDIUM, SHORT)]
    await wait_until(lambda: q.waiting == 3)
    view = local_view(q, limit=2)
    assert len(view["waiters"]) == 2 and view["truncated"] == 1
    for x in view["waiters"]:  # work-bound and the absolute bound, both shown
        assert x["due_in_tokens"] > 0 and 0 < x["due_in_s"] <= 60
    for f in futs:
        f.cancel()
    runner.release(1)
    await asyncio.gather(*futs, return_exceptions=True)
