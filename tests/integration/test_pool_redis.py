"""The pool in Redis mode (sjf_core.admission._pool_redis) against a real redis-server: two
schedulers stand for two proxy workers sharing one pool of two backends; the backends' own
Redis queues are the ledger (their shared in-flight count is read from Redis)."""

from __future__ import annotations

import asyncio
import uuid

from sjf_core._scheduler import Scheduler
from sjf_core.predict._prediction import Prediction
from waits import wait_until


def pred(tokens: float) -> Prediction:
    return Prediction.from_probs((1.0, 0.0, 0.0) if tokens < 200 else (0.0, 0.0, 1.0), tokens)


def worker(url: str, prefix: str) -> Scheduler:
    return Scheduler(predictor=None, plugins=False, memory=False, metrics=False, tau="off", redis_url=url,
                     redis_options={"prefix": prefix})


async def test_two_workers_share_one_pool_and_each_backend_keeps_one_slot(redis_url):
    prefix = "pooltest-" + uuid.uuid4().hex[:8]
    a, b = f"http://127.0.0.1:1/{prefix}a/v1", f"http://127.0.0.1:1/{prefix}b/v1"
    w1, w2 = worker(redis_url, prefix), worker(redis_url, prefix)
    p1, p2 = w1.pool([a, b]), w2.pool([a, b])
    assert p1.slots == 2
    order: list = []
    most = {a: 0, b: 0}

    async def shared_in_flight():
        for key in (a, b):
            snap = await w1.queue(key).snapshot()
            most[key] = max(most[key], snap["in_flight"])
        return True

    async def one(w, pool, tokens):
        t = await pool.admit(pred(tokens), None, None, lambda k: w.queue(k).ticket(pred(tokens)))
        order.append(tokens)
        await shared_in_flight()
        return t

    # both backends taken through the pool by worker 1, then a mixed queue from both workers
    first = [await one(w1, p1, 10), await one(w1, p1, 11)]
    assert {t.queue.name for t in first} == {w1.queue(a).name, w1.queue(b).name}
    waiters = [asyncio.ensure_future(one(w, p, tok)) for w, p, tok in
               ((w2, p2, 900), (w1, p1, 50), (w2, p2, 40), (w1, p1, 800))]
    async def queued():
        return (await p1.queue.snapshot())["waiting"] == 4

    await wait_until(queued, timeout=30)  # the order is decided in Redis: all four are there
    running = list(first)
    while running:
        n = len(order)
        await running.pop(0).arelease(10)
        if n < 6:
            await wait_until(lambda: len(order) > n, timeout=30)
            running += [x.result() for x in waiters if x.done() and x.result().running and x.result() not in running]
    assert order[2:] == [40, 50, 800, 900]  # one shortest-first order across both workers
    assert most == {a: 1, b: 1}
    for w in (w1, w2):
        for q in w.queues.values():
            await q.aclose()
