"""Tenants and intent through openai_sjf.wrap: the real openai SDK over real sockets
against the backend emulator. Supersede (openai.ConflictError at once, the backend gets
only the newest), our x-sjf-* headers never reach the backend, fair shares by ``user``."""

from __future__ import annotations

import asyncio
import time

import openai

import openai_sjf
from sjf_core._scheduler import Scheduler
from test_openai_wrapper import KeywordPredictor, _finish, _open_blocker, msg, rid, served_ids, until


async def test_supersede_raises_conflict_at_once_and_backend_gets_only_the_last(emulator_factory):
    emu = await emulator_factory(tokens_per_s=4000)
    sched = Scheduler(predictor=KeywordPredictor(), tau="off")
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0),
                             scheduler=sched)
    q = openai_sjf.queue_of(client)
    blocker = await _open_blocker(client)
    sent, answered, outcome = {}, {}, {}

    async def keystroke(i):
        sent[i] = time.monotonic()
        try:
            await client.chat.completions.create(
                model="m", messages=msg(f"complete line {i}"),
                extra_headers={**rid(f"k{i}"), "x-sjf-supersede": "editor-buffer", "x-sjf-priority": "1"})
            outcome[i] = "ok"
        except openai.ConflictError as exc:
            outcome[i] = exc.status_code
        answered[i] = time.monotonic()

    tasks = []
    for i in range(4):
        tasks.append(asyncio.ensure_future(keystroke(i)))
        await until(lambda: i in sent and q.waiting == 1)
        if i:
            await until(lambda: (i - 1) in answered)  # answered while the slot is still held
    assert q.in_flight == 1  # the blocker still runs: the 409s came at once, not at its end
    await _finish(blocker)
    await asyncio.gather(*tasks)
    assert outcome == {0: 409, 1: 409, 2: 409, 3: "ok"}, outcome
    print("\nsupersede via wrapper: 409 after its replacement was sent (s):",
          [round(answered[i] - sent[i + 1], 4) for i in range(3)])
    assert served_ids(emu) == ["blocker", "k3"]  # the backend got only the last keystroke
    assert all(not o["sjf_headers"] for o in emu.stats()["order"])  # x-sjf-* stripped
    assert q.stats.superseded == 3 and q.in_flight == 0 and q.waiting == 0


async def test_fairness_user_through_the_wrapper(emulator_factory):
    emu = await emulator_factory(tokens_per_s=4000)
    order = {}
    for fairness in ("user", "off"):
        sched = Scheduler(predictor=KeywordPredictor(), tau="off", fairness=fairness)
        client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x"), scheduler=sched)
        q = openai_sjf.queue_of(client)
        emu.reset()
        blocker = await _open_blocker(client)
        tasks = [asyncio.ensure_future(client.chat.completions.create(
            model="m", messages=msg(f"short flood {i}"), user="flood", extra_headers=rid(f"f{i}")))
            for i in range(10)]
        await until(lambda: q.waiting == 10)
        tasks.append(asyncio.ensure_future(client.chat.completions.create(
            model="m", messages=msg("a long one"), user="lone", extra_headers=rid("lone"))))
        await until(lambda: q.waiting == 11)
        await _finish(blocker)
        await asyncio.gather(*tasks)
        order[fairness] = served_ids(emu)[1:].index("lone")
    assert order["user"] < 2, order  # within the first 2 behind the flood
    assert order["off"] == 10, order  # SJF alone: the long one last
