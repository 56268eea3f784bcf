"""The admission queue contract: both stores give one ticket lifecycle.

The in-process asyncio queue and the Redis store (a real redis-server) run the same
scenarios: the states and the ``running`` / ``waiting`` / ``finished`` questions,
exactly-once release (also from many threads at once), cancel and release while
queued, the hold-limit expiry, and ``async with``. Waits are event-based (no timed
assertions).
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from waits import wait_until

from sjf_core.admission._ticket import TicketState
from sjf_core.admission._local import LocalAdmissionQueue
from sjf_core.admission._redis import RedisAdmissionQueue
from sjf_core.config import RedisSettings
from sjf_core.predict._prediction import Prediction

SHORT = Prediction.from_probs([1.0, 0.0, 0.0])



@pytest.fixture(params=["local", "redis"])
async def make_queue(request):
    made = []

    def make(**kw):
        name = f"http://127.0.0.1:1/{uuid.uuid4().hex[:8]}/v1"
        if request.param == "local":
            q = LocalAdmissionQueue(slots=1, name=name, **kw)
        else:
            url = request.getfixturevalue("redis_url")
            q = RedisAdmissionQueue(url, slots=1, name=name, options=RedisSettings(redis_lease_ttl_s=1.5, waiter_ttl_s=1.5),
                                    **kw)
        made.append(q)
        return q

    yield make
    for q in made:
        if isinstance(q, RedisAdmissionQueue):
            await q.aclose()


def _rid(t):
    """The Redis waiter id of a ticket on the Redis store (None until Redis has it)."""
    return getattr(t.redis, "rid", None)


async def queued(q, t) -> asyncio.Task:
    """Start ``t.acquire()`` in a task and wait until the store has it queued."""
    task = asyncio.ensure_future(t.acquire())
    before = q.stats.enqueued
    await wait_until(lambda: q.stats.enqueued > before and t.state == TicketState.QUEUED)
    if isinstance(q, RedisAdmissionQueue):
        await wait_until(lambda: _rid(t) is not None)
    return task


async def test_states_and_exactly_once_release(make_queue):
    q = make_queue()
    t = q.ticket(SHORT)
    assert t.state is TicketState.NEW and t.state == "new"
    assert t.waiting and not t.running and not t.finished
    await t.acquire()
    assert t.state is TicketState.RUNNING and t.running and not t.waiting and not t.finished
    assert q.in_flight == 1
    assert t.release(3) is True
    assert t.release(3) is False  # exactly once
    assert t.state is TicketState.RELEASED and t.finished and not t.running
    await wait_until(lambda: q.in_flight == 0)
    assert q.stats.released == 1 and q.stats.dispatched == 1
    with pytest.raises(RuntimeError):
        await t.acquire()  # a ticket is used once


async def test_release_from_many_threads_frees_one_slot(make_queue):
    q = make_queue()
    t = q.ticket(SHORT)
    await t.acquire()
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def worker():
        barrier.wait()
        results.append(t.release())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for th in threads:
        th.start()
    await asyncio.get_running_loop().run_in_executor(None, lambda: [th.join() for th in threads])
    assert sorted(results) == [False] * 7 + [True]
    await wait_until(lambda: q.stats.released == 1 and q.in_flight == 0)
    nxt = q.ticket(SHORT)
    await asyncio.wait_for(nxt.acquire(), 20)  # the slot came back, once
    assert nxt.running and q.in_flight == 1
    await nxt.arelease()


async def test_cancel_while_queued_leaves_the_queue(make_queue):
    q = make_queue()
    holder = q.ticket(SHORT)
    await holder.acquire()
    t = q.ticket(SHORT)
    task = await queued(q, t)
    assert t.waiting and q.waiting >= 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_until(lambda: t.state == TicketState.CANCELLED)
    assert t.finished and not t.running and t.release() is False
    assert q.stats.cancelled == 1
    await holder.arelease()
    nxt = q.ticket(SHORT)
    await asyncio.wait_for(nxt.acquire(), 20)  # the cancelled waiter took no slot
    assert q.stats.dispatched == 2
    await nxt.arelease()
    await wait_until(lambda: q.in_flight == 0)


async def test_release_while_queued_withdraws(make_queue):
    q = make_queue()
    holder = q.ticket(SHORT)
    await holder.acquire()
    t = q.ticket(SHORT)
    task = await queued(q, t)
    assert t.release() is False  # withdrawn, not released
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_until(lambda: t.state == TicketState.CANCELLED)
    assert t.finished and q.stats.released == 0
    await holder.arelease()
    await wait_until(lambda: q.in_flight == 0)
    assert q.stats.dispatched == 1


async def test_hold_limit_expires_a_lost_ticket_once(make_queue):
    q = make_queue(lease_ttl_s=0.2)
    t = q.ticket(SHORT)
    await t.acquire()
    waiter = q.ticket(SHORT)
    task = await queued(q, waiter)
    await asyncio.wait_for(task, 20)  # granted once the first one's hold limit ran out
    assert t.state == TicketState.RELEASED and t.finished and q.stats.expired == 1
    assert t.release() is False  # already force-released: nothing more to free
    assert waiter.running
    assert waiter.release() is True
    await wait_until(lambda: q.in_flight == 0)
    assert q.stats.released == 2


async def test_async_with_releases_on_exit_and_on_error(make_queue):
    q = make_queue()
    async with q.ticket(SHORT) as t:
        assert t.running
    assert t.finished and t.release() is False
    with pytest.raises(ZeroDivisionError):
        async with q.ticket(SHORT) as u:
            1 / 0
    assert u.state == TicketState.RELEASED
    await wait_until(lambda: q.in_flight == 0)
    assert q.stats.released == 2


async def test_both_stores_are_the_contract_and_score_when_they_must(make_queue):
    from sjf_core.admission._base import AdmissionQueue as Contract

    q = make_queue()
    assert isinstance(q, Contract) and q.store in ("local", "redis")
    calls = []
    long_pred = Prediction.from_probs([0.0, 0.0, 1.0])

    def scorer():
        calls.append(1)
        return long_pred, None

    t = q.ticket(None, None, None, scorer=scorer)
    if q.store == "redis":  # the store needs the class at the door: scored at once
        assert calls == [1] and t.entry.scored and t.entry.klass == 2 and not t.entry.fallback
    else:  # scored only when an order is to be decided; alone and idle it never is
        assert calls == [] and not t.entry.scored
    await t.acquire()
    assert t.running
    await t.arelease()
    assert len(calls) == (1 if q.store == "redis" else 0)


async def test_local_store_with_a_door_scores_at_once():
    q = LocalAdmissionQueue(slots=1, overload={"max_queue_depth": 10})
    t = q.ticket(None, None, None, scorer=lambda: (Prediction.from_probs([0.0, 0.0, 1.0]), None))
    assert t.entry.scored and t.entry.klass == 2  # overload control needs the class before the queue
    await t.acquire()
    assert t.release() is True
