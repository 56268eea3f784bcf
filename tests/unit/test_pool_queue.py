"""The in-process pool (sjf_core.admission._pool): one shortest-first queue over several
backends' own queues. No sockets: asyncio only; no timed assertions (events are awaited)."""

from __future__ import annotations

import asyncio

import pytest

from sjf_core._scheduler import Scheduler
from sjf_core.predict._prediction import Prediction

A, B, C = "http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1", "http://127.0.0.1:8003/v1"


def sched(**kw) -> Scheduler:
    return Scheduler(predictor=None, plugins=False, memory=False, metrics=False, tau="off", **kw)


def pred(tokens: float) -> Prediction:
    short = tokens < 200
    return Prediction.from_probs((1.0, 0.0, 0.0) if short else (0.0, 0.0, 1.0), tokens)


async def settle(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


class Bound:
    """Records the most tickets ever running on each backend's queue (its ledger)."""

    def __init__(self, s: Scheduler, *urls):
        self.s, self.urls, self.most = s, urls, {u: 0 for u in urls}

    def check(self) -> None:
        for u in self.urls:
            q = self.s.queue(u)
            self.most[u] = max(self.most[u], q.in_flight)
            assert q.in_flight <= q.slots


def admit(s: Scheduler, pool, tokens: float, order: list, arrival=None):
    async def run():
        t = await pool.admit(pred(tokens), None, arrival, lambda key: s.queue(key).ticket(pred(tokens)))
        order.append((tokens, t.queue.name))
        return t
    return asyncio.ensure_future(run())


def test_the_head_goes_to_whichever_member_frees_and_no_member_exceeds_its_slots():
    async def main():
        s = sched()
        pool = s.pool([A, B])
        hold_a, hold_b = s.queue(A).ticket(None), s.queue(B).ticket(None)
        await hold_a.acquire()
        await hold_b.acquire()
        order: list = []
        bound = Bound(s, A, B)
        tasks = [admit(s, pool, t, order) for t in (1000, 50, 900, 60)]
        await settle()
        assert pool.waiting == 4 and order == []
        hold_b.release(1)  # B frees first: the shortest waiter goes to B
        await settle()
        bound.check()
        assert order == [(50, pool.members[1].key)]
        hold_a.release(1)
        await settle()
        bound.check()
        assert order[1] == (60, pool.members[0].key)
        running = {t.result().queue.name: t.result() for t in tasks if t.done()}
        for _ in range(2):
            for key in list(running):
                running.pop(key).release(10)
            await settle()
            bound.check()
            running = {t.result().queue.name: t.result() for t in tasks if t.done() and t.result().running}
        assert [tok for tok, _ in order] == [50, 60, 900, 1000]
        assert set(bound.most.values()) == {1}

    asyncio.run(main())


def test_a_backend_in_two_pools_keeps_one_slot_ledger():
    async def main():
        s = sched()
        p1, p2 = s.pool([A, B]), s.pool([B, C])
        assert s.pool([B, A]) is p1  # the same set of backends, the same pool
        for u in (A, C):
            await s.queue(u).ticket(None).acquire()  # A and C busy for good
        hold_b = s.queue(B).ticket(None)
        await hold_b.acquire()
        order: list = []
        t1 = admit(s, p1, 100, order)
        t2 = admit(s, p2, 50, order)
        await settle()
        hold_b.release(1)
        await settle()
        assert s.queue(B).in_flight == 1 and len(order) == 1  # one of the two pools got B, not both
        first = (t1 if t1.done() else t2).result()
        first.release(5)
        await settle()
        assert s.queue(B).in_flight == 1 and len(order) == 2

    asyncio.run(main())


def test_a_waiter_that_leaves_holds_nothing_and_a_down_member_gets_nothing():
    async def main():
        s = sched()
        pool = s.pool([A, B])
        hold_a = s.queue(A).ticket(None)
        await hold_a.acquire()
        pool.members[1].mark_down("test")
        order: list = []
        gone = admit(s, pool, 10, order)
        stays = admit(s, pool, 20, order)
        await settle()
        assert order == [] and pool.waiting == 2  # B is free but down
        gone.cancel()
        await settle()
        assert pool.waiting == 1 and pool.stats.cancelled == 1
        pool.members[1].mark_up()
        await settle()
        assert order == [(20, pool.members[1].key)] and stays.result().running
        assert s.queue(A).in_flight == 1 and s.queue(B).in_flight == 1

    asyncio.run(main())


def test_a_slot_taken_outside_the_pool_makes_the_waiter_queue_on_that_backend():
    async def main():
        s = sched()
        pool = s.pool([A, B])
        for u in (A, B):
            await s.queue(u).ticket(None).acquire()
        order: list = []
        w = admit(s, pool, 10, order)
        await settle()
        # a request pinned to A (outside the pool) queues on A's own queue
        pinned = s.queue(A).ticket(pred(5))
        pinned_task = asyncio.ensure_future(pinned.acquire())
        await settle()
        assert s.queue(A).waiting == 1
        assert pool.members[0].free() == 0  # A's own waiter goes first
        assert not w.done()
        pinned_task.cancel()
        await settle()
        assert pool.waiting == 1 and s.queue(A).in_flight == 1

    asyncio.run(main())


def test_pool_timeout_leaves_nothing_behind():
    async def main():
        s = sched()
        pool = s.pool([A, B])
        for u in (A, B):
            await s.queue(u).ticket(None).acquire()
        with pytest.raises(asyncio.TimeoutError):
            await pool.admit(pred(10), None, None, lambda k: s.queue(k).ticket(None), timeout=0.01)
        assert pool.waiting == 0

    asyncio.run(main())


def test_status_and_prometheus_show_the_pool():
    from prometheus_client import CollectorRegistry, generate_latest

    from sjf_core.ext._pool_metrics import watch_pools

    async def main():
        s = sched()
        pool = s.pool([A, B])
        await s.queue(A).ticket(None).acquire()
        await s.queue(B).ticket(None).acquire()
        waiter = admit(s, pool, 10, [])
        await settle()
        reg = CollectorRegistry()
        assert watch_pools(s.pools, reg)
        text = generate_latest(reg).decode()
        assert 'sjf_pool_queue_depth{pool="http://127.0.0.1:8001/v1,http://127.0.0.1:8002/v1"} 1.0' in text
        assert 'sjf_pool_member_in_flight{backend="http://127.0.0.1:8001/v1"' in text
        assert 'sjf_pool_member_up{backend="http://127.0.0.1:8002/v1"' in text
        st = s.pools.status()[0]
        assert st["waiting"] == 1 and [m["in_flight"] for m in st["members"]] == [1, 1]
        waiter.cancel()
        await settle()

    asyncio.run(main())


def test_a_down_member_comes_back_when_its_health_check_passes(monkeypatch):
    import sjf_core.admission._pool_members as pm

    monkeypatch.setattr(pm, "DOWN_RETRY_S", 0.001)
    answers = [False, RuntimeError("unreachable"), True]

    async def check():
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    async def main():
        s = sched()
        pool = s.pool([A, B])
        member = pool.members[0]
        member.health_check = check
        member.mark_down("HTTP 500")
        assert not member.healthy and member.free() == 0
        for _ in range(2000):
            if member.healthy:
                break
            await asyncio.sleep(0.001)
        assert member.healthy and answers == [] and member.status()["down_reason"] == ""

    asyncio.run(main())


def test_a_slot_held_through_the_last_resort_gate_is_not_handed_to_the_pool():
    """A's only unit is held by a gated request (its ledger, not its queue, shows it): the pool
    must not hand A to its waiter, which then goes to B when B frees."""
    async def main():
        s = sched()
        pool = s.pool([A, B])
        s.queue(A)  # the queue (and so the pool member) exists; its ledger is the gate's
        gated = s.last_resort.ticket(A)
        await gated.acquire()
        hold_b = s.queue(B).ticket(None)
        await hold_b.acquire()
        order: list = []
        waiter = admit(s, pool, 10, order)
        await settle()
        assert order == [] and pool.members[0].free() == 0
        hold_b.release(1)
        await settle()
        assert order == [(10, pool.members[1].key)] and waiter.result().running
        assert s.queue(A).waiting == 0  # nobody was left queued behind the gated request
        gated.release(None)
        waiter.result().release(5)
        await settle()

    asyncio.run(main())


def test_a_request_that_waits_for_a_much_faster_busy_member_shows_in_the_view_and_goes_there():
    """Speeds 1 : 20: a Long waits for the fast member (a clear gain), the view names it, and
    it runs there once that one frees; the slow member meanwhile takes the next request."""
    async def main():
        s = sched()
        pool = s.pool([A, B])
        fast, slow = (m for m in pool.members if m.key == A), (m for m in pool.members if m.key == B)
        fast, slow = next(fast), next(slow)
        fast.s_per_token, slow.s_per_token = 0.001, 0.02
        hold = s.queue(A).ticket(pred(100))
        await hold.acquire()  # the fast member busy, expected free in ~0.1 s
        order: list = []
        long = admit(s, pool, 2000, order)  # 2 s on the fast one, 40 s on the slow one
        await settle()
        assert pool.status()["reserved"] == 1 and order == []
        view = await pool.view()
        assert [r["for_member"] for r in view["reserved"]] == [A]
        short = admit(s, pool, 50, order)  # the slow member is not left idle
        t_short = await short
        assert t_short.queue.name == B
        hold.release(100)
        t_long = await long
        assert t_long.queue.name == A
        t_long.release(2000), t_short.release(50)
    asyncio.run(main())
