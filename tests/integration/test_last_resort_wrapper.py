"""Issue 20, openai_sjf side: an admission fault never sends a request unscheduled.

Real parts: the openai SDK with the wrapper, the emulator (a real HTTP server, 1 slot) and,
where the store is Redis, a real redis-server killed with SIGKILL. Every bound is counted
at the backend (the emulator's ``max_in_flight`` / ``peak_in_flight`` of user requests),
and asserted here explicitly. Each of these tests fails on the code before the
last-resort gate (a fault then sent the request straight through: 2 to 8 in flight).
"""

from __future__ import annotations

import asyncio

import openai
import pytest
from waits import wait_until as until

import openai_sjf
from sjf_core._scheduler import Scheduler
from sjf_core.predict._prediction import Prediction
from sjf_lab.emulator import FAULT_HEADER
from redis_server import RedisServer

N = 8


def msg(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


class LazyFailingPrediction:
    """A prediction computed elsewhere that fails when read (e.g. a remote predictor's
    future that timed out): the predictor returns it, every attribute read raises."""

    def __getattr__(self, name):
        raise RuntimeError("remote prediction failed")


class FailingPredictor:
    def predict(self, text: str):
        return LazyFailingPrediction()


class OddBugScheduler(Scheduler):
    """Every other request's ticket raises: a bug of ours between scoring and the queue."""

    n = 0

    def lazy_ticket(self, *args, **kw):
        OddBugScheduler.n += 1
        if OddBugScheduler.n % 2:
            raise RuntimeError("bug in our own code")
        return super().lazy_ticket(*args, **kw)


async def _burst(client, n: int = N, **kw) -> list[int]:
    async def one(i):
        r = await client.chat.completions.create(model="m", messages=msg(f"question {i}"), max_tokens=20, **kw)
        return r.usage.completion_tokens

    return await asyncio.wait_for(asyncio.gather(*[one(i) for i in range(n)]), 120)


async def test_a_bug_on_half_the_requests_keeps_one_in_flight_with_the_normal_queue(emulator_factory):
    """The gated half shares the backend's slot with the normally queued half."""
    emu = await emulator_factory(tokens_per_s=400)
    sched = OddBugScheduler(predictor=None, plugins=False)
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0), scheduler=sched)
    assert await _burst(client) == [20] * N
    st = emu.stats()
    assert st["max_in_flight"] == 1 and st["served"] == N, st["max_in_flight"]
    t = openai_sjf.transport_of(client)
    assert t.stats.gated == t.stats.internal_errors == N // 2
    assert sched.last_resort.counts["internal"] == N // 2
    led = sched.last_resort.ledger(emu.base_url)
    assert led.used == 0 and sched.queue(emu.base_url).in_flight == 0


async def test_a_predictor_fault_on_every_request_keeps_one_in_flight(emulator_factory, redis_url):
    """Redis store (which scores at the door): the prediction raises when read."""
    emu = await emulator_factory(tokens_per_s=400)
    sched = Scheduler(predictor=FailingPredictor(), plugins=False, redis_url=redis_url)
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0), scheduler=sched)
    assert await _burst(client) == [20] * N
    st = emu.stats()
    assert st["max_in_flight"] == 1 and st["served"] == N, st["max_in_flight"]
    assert openai_sjf.transport_of(client).stats.gated == N
    assert sum(sched.last_resort.counts.values()) == N
    assert sched.last_resort.ledger(emu.base_url).used == 0


async def test_redis_killed_mid_burst_keeps_one_in_flight_and_loses_nothing(emulator_factory):
    """One request holds the backend through Redis; Redis dies (SIGKILL) while 7 wait in it;
    they fail open to the local queue, which must wait for the Redis-granted holder."""
    emu = await emulator_factory(tokens_per_s=400)
    with RedisServer() as srv:
        sched = Scheduler(predictor=None, plugins=False, redis_url=srv.url, redis_options={"retry_s": 0.2})
        client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0),
                                 scheduler=sched)
        q = sched.queue(emu.base_url)
        holder = asyncio.ensure_future(client.chat.completions.create(
            model="m", messages=msg("hold"), max_tokens=20, extra_headers={FAULT_HEADER: "hold"}))
        await until(lambda: emu.held == 1)
        rest = asyncio.ensure_future(_burst(client, N - 1))
        await until(lambda: q.waiting >= N - 1, timeout=30)
        await asyncio.get_running_loop().run_in_executor(None, srv.stop, 9)  # SIGKILL
        await until(lambda: q.stats.failopen >= N - 1, timeout=30)  # all of them in the local queue now
        await asyncio.sleep(0.2)  # the local queue had time to (wrongly) dispatch beside the holder
        assert emu.stats()["in_flight"] == 1
        emu.release_holds()
        assert (await asyncio.wait_for(holder, 60)).usage.completion_tokens == 20
        assert await rest == [20] * (N - 1)
    st = emu.stats()
    assert st["max_in_flight"] == 1 and st["served"] == N, st["max_in_flight"]
    await until(lambda: sched.last_resort.ledger(emu.base_url).used == 0)


class AllBugScheduler(Scheduler):
    """Every ticket raises: each request goes through the last-resort gate."""

    def lazy_ticket(self, *args, **kw):
        raise RuntimeError("bug in our own code")


async def test_a_gated_request_releases_exactly_once_on_every_path(emulator_factory):
    """Success, a backend error, a stream read to its end, a stream closed early (idle probe), a
    non-streamed call cancelled mid-answer (idle probe), on a backend that generates on."""
    emu = await emulator_factory(tokens_per_s=400, on_disconnect="continue", trace_records=[
        {"prompt": "fails", "answer_tokens": 5, "fault": "500"}, {"prompt": "long", "answer_tokens": 400}])
    sched = AllBugScheduler(predictor=None, plugins=False)
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0), scheduler=sched)
    r = await client.chat.completions.create(model="m", messages=msg("ok"), max_tokens=20)
    assert r.usage.completion_tokens == 20
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model="m", messages=msg("fails"))
    s = await client.chat.completions.create(model="m", messages=msg("stream"), max_tokens=30, stream=True)
    assert len([c async for c in s]) > 2  # read to its end
    s = await client.chat.completions.create(model="m", messages=msg("long"), stream=True)
    await s.__anext__()
    await s.close()  # closed early: the slot waits for the probe
    left = asyncio.ensure_future(client.chat.completions.create(model="m", messages=msg("long")))
    await until(lambda: emu.stats()["generating"] == 1 and emu.stats()["order"][-1]["stream"] is False, timeout=30)
    left.cancel()
    await asyncio.gather(left, return_exceptions=True)
    r = await client.chat.completions.create(model="m", messages=msg("after"), max_tokens=20)
    assert r.usage.completion_tokens == 20
    g = sched.last_resort.gate(emu.base_url)
    await until(lambda: g.in_flight == 0, timeout=30)
    assert g.granted == g.released == 6 and g.expired == 0
    assert sched.last_resort.ledger(emu.base_url).used == 0
    assert emu.stats()["max_in_flight"] == 1
    t = openai_sjf.transport_of(client).stats
    assert t.gated == 6 and t.orphans == 2 and t.probes_ok == 2


async def test_a_bug_in_the_redis_store_on_half_the_requests_keeps_one_in_flight(emulator_factory, redis_url,
                                                                                   monkeypatch):
    """A fault of the store that is not a Redis error (so not its fail-open): counted as "store"."""
    from sjf_core.admission._redis_grant import RedisGrants

    real, n = RedisGrants._acquire, [0]

    async def buggy(self, t):
        n[0] += 1
        if n[0] % 2:
            raise TypeError("bug in the store")
        return await real(self, t)

    monkeypatch.setattr(RedisGrants, "_acquire", buggy)
    emu = await emulator_factory(tokens_per_s=400)
    sched = Scheduler(predictor=None, plugins=False, redis_url=redis_url)
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0), scheduler=sched)
    assert await _burst(client) == [20] * N
    st = emu.stats()
    assert st["max_in_flight"] == 1 and st["served"] == N, st["max_in_flight"]
    assert sched.last_resort.counts["store"] == N // 2
    await until(lambda: sched.last_resort.ledger(emu.base_url).used == 0)
