"""Tenants and intent through a real LiteLLM proxy (plugin loaded), the real openai SDK
and the serial backend emulator: fair shares across users, strict priority bands,
LiteLLM's ``priority`` field consumed, superseded requests answered 409.

Two proxies: one with ``SJF_FAIRNESS=user`` (defaults otherwise), one with fairness off
and a tiny fixed τ with the paper's strict promotion (every waiter is past τ at once).
"""

from __future__ import annotations

import asyncio
import time

import openai
import pytest

from sjf_lab.emulator import EmulatorThread, short_hash
from test_litellm_plugin import HOLD, Harness, _predicted_keys, _start, until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

FLOOD = [f"What is the capital city of country number {i}?" for i in range(10)]
LONE = "Write a long short story of at least 2000 words about a lighthouse keeper who discovers a message in a bottle."
BAND0 = ["Define photosynthesis in one sentence.", "Who wrote the novel Pride and Prejudice?",
         "What is the boiling point of water at sea level?", "Name the largest planet in the solar system."]
VIP = ("Implement a full-featured command line todo application in Rust with persistent storage, unit tests and "
       "documentation.")
KEYSTROKES = [f"def fib(n): return fib(n-1) + fib(n-{i})" for i in range(1, 5)]
TRACE = ([{"prompt": p, "answer_tokens": 12} for p in FLOOD + [LONE] + BAND0 + [VIP] + KEYSTROKES]
         + [{"prompt": HOLD, "answer_tokens": 5, "fault": "hold"}])


def _proxy(env: dict):
    emu = EmulatorThread(tokens_per_s=400, slots=1, trace_records=TRACE)
    proxy, port = _start({"e": emu}, env)
    return proxy, Harness(proxy, port, {"e": emu})


@pytest.fixture(scope="module")
def fair():
    proxy = None
    try:
        proxy, h = _proxy({"SJF_FAIRNESS": "user"})
        yield h
    finally:
        if proxy is not None:
            proxy.stop()
        for e in (h.emus.values() if proxy is not None else ()):
            e.stop()


@pytest.fixture(scope="module")
def flat():
    proxy = None
    try:
        proxy, h = _proxy({"SJF_FAIRNESS": "off", "SJF_TAU": "0.05", "SJF_PROMOTION": "strict"})
        yield h
    finally:
        if proxy is not None:
            proxy.stop()
        for e in (h.emus.values() if proxy is not None else ()):
            e.stop()


async def _flood_then_lone(h: Harness) -> list[str]:
    """Hold the backend, queue user "flood"'s 10 requests, then user "lone"'s one; release;
    return the service order (prompt hashes) after the holder."""
    h.emus["e"].reset()
    holder = asyncio.create_task(h.chat("e", HOLD, user="holder"))
    assert await until(lambda: h.emus["e"].stats()["held"] == 1), h.dump()
    tasks = []
    for p in FLOOD:
        tasks.append(asyncio.create_task(h.chat("e", p, user="flood")))
        await asyncio.sleep(0.02)
    assert await until(lambda: h.queue("e")["waiting"] == len(FLOOD)), h.dump()
    tasks.append(asyncio.create_task(h.chat("e", LONE, user="lone")))
    assert await until(lambda: h.queue("e")["waiting"] == len(FLOOD) + 1), h.dump()
    status = h.queue("e")
    h.emus["e"].release_holds()
    await asyncio.gather(holder, *tasks)
    served = [o["hash"] for o in h.emus["e"].stats()["order"]]
    assert served[0] == short_hash(HOLD)
    return served[1:], status


async def test_fairness_user_serves_a_lone_request_within_the_first_two_behind_a_flood(fair, flat):
    policy = fair.status()["settings"]["policy"]
    keys = _predicted_keys(FLOOD + [LONE], policy)
    assert keys[LONE] > max(keys[p] for p in FLOOD), keys  # SJF alone would serve it last
    served, status = await _flood_then_lone(fair)
    pos = served.index(short_hash(LONE))
    print(f"\nfairness=user: lone request served at position {pos + 1} of {len(served)} behind a flood of 10")
    assert pos < 2, (served, status.get("tenants"), status)
    tenants = status["tenants"]  # per-tenant depth in /sjf/status, hashed ids
    assert sorted(t["waiting"] for t in tenants.values() if t["waiting"]) == [1, 10], tenants
    assert not any(name in tenants for name in ("flood", "lone"))
    # fairness off: the same requests are served in SJF order, the lone long one last
    served, _ = await _flood_then_lone(flat)
    pos = served.index(short_hash(LONE))
    print(f"fairness=off: lone request served at position {pos + 1} of {len(served)}")
    assert pos == len(served) - 1, served


async def test_priority_band_beats_every_due_priority_0_request(flat):
    """τ = 0.05 s with strict promotion: every band-0 waiter is past τ (before: the oldest
    went first). The priority-10 request, predicted longest and arrived last, goes first;
    LiteLLM's own `priority` field (lower first) is consumed and never reaches the backend."""
    h = flat
    policy = h.status()["settings"]["policy"]
    keys = _predicted_keys(BAND0 + [VIP], policy)
    assert keys[VIP] > max(keys[p] for p in BAND0), keys
    for how in ({"extra_headers": {"x-sjf-priority": "10"}}, {"extra_body": {"priority": -10}}):
        h.emus["e"].reset()
        holder = asyncio.create_task(h.chat("e", HOLD))
        assert await until(lambda: h.emus["e"].stats()["held"] == 1), h.dump()
        tasks = []
        for p in BAND0:
            tasks.append(asyncio.create_task(h.chat("e", p, extra_body={"priority": 0})))
            await asyncio.sleep(0.02)
        assert await until(lambda: h.queue("e")["waiting"] == len(BAND0)), h.dump()
        await asyncio.sleep(0.2)  # all band-0 waiters are now older than τ
        tasks.append(asyncio.create_task(h.chat("e", VIP, **how)))
        assert await until(lambda: h.queue("e")["waiting"] == len(BAND0) + 1), h.dump()
        h.emus["e"].release_holds()
        await asyncio.gather(holder, *tasks)
        order = h.emus["e"].stats()["order"]
        assert [o["hash"] for o in order[:2]] == [short_hash(HOLD), short_hash(VIP)], (how, order)
        assert all("priority" not in o["keys"] for o in order), order  # consumed, not forwarded
    assert h.queue("e")["stats"]["promoted"] >= 1  # τ still acts inside band 0


async def test_superseded_keystrokes_get_409_and_never_reach_the_backend(fair):
    h = fair
    h.emus["e"].reset()
    holder = asyncio.create_task(h.chat("e", HOLD, user="editor"))
    assert await until(lambda: h.emus["e"].stats()["held"] == 1), h.dump()
    sent, answered, outcome = {}, {}, {}

    async def keystroke(i, p):
        sent[i] = time.monotonic()
        try:
            await h.chat("e", p, user="editor", extra_headers={"x-sjf-supersede": "buffer-1"})
            outcome[i] = "ok"
        except openai.ConflictError as exc:
            outcome[i] = exc.status_code
        answered[i] = time.monotonic()

    tasks = []
    for i, p in enumerate(KEYSTROKES):
        tasks.append(asyncio.create_task(keystroke(i, p)))
        assert await until(lambda: i in sent and h.queue("e")["waiting"] == 1), h.dump()
        if i:
            assert await until(lambda: (i - 1) in answered), h.dump()  # answered while the slot is still held
    assert h.emus["e"].stats()["held"] == 1  # nothing was released meanwhile: "at once"
    h.emus["e"].release_holds()
    await asyncio.gather(holder, *tasks)
    assert outcome == {0: 409, 1: 409, 2: 409, 3: "ok"}, outcome
    lat = [answered[i] - sent[i + 1] for i in range(3)]
    print("\nsupersede via proxy: 409 after its replacement was sent (s):", [round(x, 3) for x in lat])
    served = [o["hash"] for o in h.emus["e"].stats()["order"]]
    assert served == [short_hash(HOLD), short_hash(KEYSTROKES[-1])]  # the backend got only the last
    assert h.status()["counters"]["superseded_409"] >= 3
