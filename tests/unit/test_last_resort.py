"""The last-resort gate and the in-process slot ledger (sjf_core.admission._last_resort,
_ledger): a request whose admission failed waits FIFO for the backend's slots, which the
gate shares with the normal queue, and releases exactly once on every path.

No sockets: the holders are counted in-process (the integration tests count at the
backend, tests/integration/test_last_resort_*.py).
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from sjf_core._scheduler import Scheduler
from sjf_core.admission._last_resort import LastResort, fault_kind
from sjf_core.admission._ledger import SlotLedger

SECRET = "my secret prompt text 4711"
B = "http://b/v1"


def _sched(**kw) -> Scheduler:
    return Scheduler(predictor=None, plugins=False, metrics=False, memory=False, **kw)


class Peak:
    """Counts holders at once (what the backend would see)."""

    def __init__(self):
        self.now = self.peak = 0

    async def hold(self, s: float = 0.005):
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(s)
        self.now -= 1


@pytest.mark.parametrize("slots", [1, 2])
async def test_gate_and_normal_queue_share_the_slots_of_a_backend(slots):
    """The pitfall: 1 admitted normally + 1 through the gate must not make 2 on a 1-slot backend."""
    s = _sched(slots=slots)
    lr, p = s.last_resort, Peak()

    async def normal(i):
        t = s.ticket(B, {})
        await t.acquire()
        await p.hold()
        t.release()

    async def gated(i):
        t = await lr.admit(B, RuntimeError(SECRET))
        await p.hold()
        assert t.release() is True and t.release() is False  # exactly once

    await asyncio.gather(*[(gated if i % 3 == 0 else normal)(i) for i in range(60)])
    assert p.peak == slots
    q = s.queue(B)
    assert q.in_flight == 0 and q.waiting == 0 and q.stats.dispatched == q.stats.released == 40
    st = lr.status()
    assert st["by_kind"]["internal"] == 20
    assert st["backends"][B] == {"slots": slots, "held": 0, "waiting": 0, "gate_in_flight": 0, "gate_granted": 20,
                                 "gate_released": 20, "gate_expired": 0}


async def test_gate_is_fifo_and_a_freed_slot_goes_to_the_gate_first():
    s = _sched()
    lr = s.last_resort
    first = s.ticket(B, {})
    await first.acquire()
    order = []

    async def gated(i):
        t = await lr.admit(B, ValueError())
        order.append(i)
        await asyncio.sleep(0)
        t.release()

    waiters = [asyncio.ensure_future(gated(i)) for i in range(5)]
    queued = s.ticket(B, {})
    normal = asyncio.ensure_future(queued.acquire())
    await asyncio.sleep(0.01)
    assert s.queue(B).waiting == 1 and lr.ledger(B).waiting == 5 and order == []
    first.release()
    await asyncio.gather(*waiters)
    await normal  # the queue's waiter goes once the gate's line is empty
    assert order == [0, 1, 2, 3, 4] and queued.running
    queued.release()
    assert lr.ledger(B).used == 0


async def test_a_gate_waiter_that_leaves_or_times_out_holds_nothing():
    s = _sched()
    lr = s.last_resort
    holder = await lr.admit(B)
    t1 = lr.ticket(B)
    w1 = asyncio.ensure_future(t1.acquire())
    t2 = lr.ticket(B)
    with pytest.raises(asyncio.TimeoutError):
        await t2.acquire(0.02)
    await asyncio.sleep(0)
    w1.cancel()
    with pytest.raises(asyncio.CancelledError):
        await w1
    t3 = lr.ticket(B)
    w3 = asyncio.ensure_future(t3.acquire())
    await asyncio.sleep(0)
    assert t3.release() is False  # withdrawn while waiting: its acquire leaves
    with pytest.raises(asyncio.CancelledError):
        await w3
    assert lr.ledger(B).waiting == 0 and not (t1.running or t2.running or t3.running)
    holder.release()
    assert lr.ledger(B).used == 0
    again = await asyncio.wait_for(lr.admit(B), 1)  # the slot is free: nothing leaked
    again.release()


async def test_a_gate_ticket_whose_release_is_lost_is_freed_by_its_lease(caplog):
    s = _sched(lease_ttl_s=0.05)
    t = await s.last_resort.admit(B)
    t.renew()
    nxt = s.ticket(B, {})
    await asyncio.wait_for(nxt.acquire(), 5)  # the lease force-released the lost one
    assert not t.running and t.release() is False and s.last_resort.gate(B).expired == 1
    nxt.release()


async def test_a_cross_thread_release_frees_the_slot_on_its_loop():
    s = _sched()
    t = await s.last_resort.admit(B)
    await asyncio.to_thread(t.release)
    t2 = await asyncio.wait_for(s.last_resort.admit(B), 1)
    t2.release()


async def test_slots_auto_resolved_later_resizes_the_ledger():
    s = _sched(slots="auto")
    a = await s.last_resort.admit(B)
    b = s.last_resort.ticket(B)
    w = asyncio.ensure_future(b.acquire())
    await asyncio.sleep(0.01)
    assert not w.done()
    assert s.set_slots(B, 2) is True
    await asyncio.wait_for(w, 1)  # the new room goes to the waiter
    assert s.queue(B).slots == 2 and s.last_resort.ledger(B).slots == 2
    a.release(), b.release()


def test_faults_are_classified_by_the_room_they_come_from():
    assert fault_kind(None) == "internal"

    def raise_in(path: str):
        code = compile("raise RuntimeError('x')", path, "exec")
        try:
            exec(code, {})
        except RuntimeError as exc:
            return exc

    assert fault_kind(raise_in("/x/site-packages/redis/connection.py")) == "store"
    assert fault_kind(raise_in("/x/src/sjf_core/admission/_redis_grant.py")) == "store"
    assert fault_kind(raise_in("/x/src/sjf_core/predict/_predictor.py")) == "predictor"
    assert fault_kind(raise_in("/x/src/sjf_core/memory/_evidence.py")) == "memory"
    assert fault_kind(raise_in("/x/src/sjf_core/admission/_local.py")) == "internal"
    import redis.exceptions

    assert fault_kind(redis.exceptions.ConnectionError("down")) == "store"


async def test_gated_requests_are_counted_by_kind_and_logged_once_per_kind_without_text(caplog):
    counted = []

    class Metrics:
        def fail_open(self, backend, reason):
            counted.append((backend, reason))

    lr = LastResort(lambda key: 1, None, [Metrics()])
    with caplog.at_level(logging.DEBUG, logger="sjf_core.admission._last_resort"):
        for _ in range(3):
            (await lr.admit(B, RuntimeError(SECRET))).release()
        import redis.exceptions

        (await lr.admit(B, redis.exceptions.ConnectionError(SECRET))).release()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2  # one per kind
    assert "internal: RuntimeError" in errors[0].getMessage() and "store: ConnectionError" in errors[1].getMessage()
    assert SECRET not in caplog.text
    assert lr.counts == {"store": 1, "predictor": 0, "memory": 0, "internal": 3}
    assert counted == [(B, "gate_internal")] * 3 + [(B, "gate_store")]


async def test_ledger_hands_a_unit_to_a_waiter_on_another_loop():
    led = SlotLedger("k", 1)
    assert led.try_take()
    got = []

    def other_loop():
        async def wait():
            await led.take(5)
            got.append(True)
            led.give()

        asyncio.run(wait())

    th = asyncio.ensure_future(asyncio.to_thread(other_loop))
    await asyncio.sleep(0.05)
    assert led.waiting == 1 and not led.try_take()
    led.give()
    await th
    assert got == [True] and led.used == 0 and led.try_take()
