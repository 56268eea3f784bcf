#!/usr/bin/env python
"""Orphaned calls through ``openai_sjf.wrap``: backend concurrency and idle gap, per path.

For each case the real SDK (wrapped, defaults or ``--on-close``) sends one request
that becomes an orphan, then at once a short request; the serial backend emulator (a
real aiohttp server on 127.0.0.1, one slot, tick 0.5 s) records every request's
arrival ``t_in`` and end ``t_out``. Printed per case, from those records (the
wrapper's own idle probes, marked ``x-sjf-probe``, left out):

* ``max in flight``: most of our requests the backend held at once (must be 1 = slots);
* ``idle gap s``: seconds between the orphan's end and the next request's arrival
  (negative: the next one arrived while the orphan still ran);
* ``probes``: idle probes the backend received.

Cases: an under-predicted orphan ("Hi!" running 300 tokens) and an over-predicted one
(a "long ... chess engine" prompt answering 60), non-streamed and cancelled, non-streamed
and timed out (read timeout 0.2 s), and streamed then closed early; on an emulator that
keeps generating after a disconnect ("continue") and one that stops at its next tick
("stop"). Run with any ``openai_sjf`` on the path (e.g. the previous release-at-once
code) to compare: ``PYTHONPATH=src python benchmarks/orphan_release.py``. ~40 s.
"""

from __future__ import annotations

import argparse
import asyncio

import openai

import openai_sjf
from sjf_lab.emulator import REQUEST_ID_HEADER, Emulator, EmulatorConfig
from sjf_core.predict._prediction import Prediction
from sjf_core._scheduler import Scheduler

ORPHANS = {"under-predicted": ("Hi!", 300), "over-predicted": ("write a long and complete chess engine", 60)}


class KeywordPredictor:
    """"long" in the prompt: P(Long) 0.9, else 0.1 (so the two orphans are mis-predicted)."""

    def predict(self, text: str) -> Prediction:
        p = 0.9 if "long" in text.lower() else 0.1
        return Prediction.from_probs([1 - p, 0.0, p])


def overlap(records) -> int:
    ev = []
    for r in records:
        ev += [(r["t_in"], 1), (r["t_out"], -1)]
    cur = best = 0
    for _, d in sorted(ev, key=lambda e: (e[0], e[1])):
        cur += d
        best = max(best, cur)
    return best


async def until(cond, timeout=30.0):
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.005)


async def one(case: str, backend: str, how: str, on_close: str | None) -> dict:
    prompt, tokens = ORPHANS[case]
    emu = Emulator(EmulatorConfig(tokens_per_s=200, tick_s=0.5, on_disconnect=backend, trace_records=[
        {"prompt": prompt, "answer_tokens": tokens}, {"prompt": "short next", "answer_tokens": 3}]))
    await emu.start()
    try:
        kw = {} if on_close is None else {"on_close": on_close}
        client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0),
                                 scheduler=Scheduler(predictor=KeywordPredictor()), **kw)
        q = openai_sjf.queue_of(client)
        msgs = [{"role": "user", "content": prompt}]
        h = {REQUEST_ID_HEADER: "orphan"}
        if how == "cancel":
            t = asyncio.ensure_future(client.chat.completions.create(model="m", messages=msgs, extra_headers=h))
            await until(lambda: emu.stats()["generating"] == 1)
            t.cancel()
            try:
                await t
            except asyncio.CancelledError:
                pass
        elif how == "timeout":
            try:
                await client.with_options(timeout=0.2).chat.completions.create(model="m", messages=msgs,
                                                                                extra_headers=h)
            except openai.APITimeoutError:
                pass
        else:  # stream closed early
            s = await client.chat.completions.create(model="m", messages=msgs, stream=True, extra_headers=h)
            await s.__anext__()
            await s.close()
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "short next"}],
                                             extra_headers={REQUEST_ID_HEADER: "next"})
        await until(lambda: q.in_flight == 0 and emu.stats()["in_flight"] == 0)
        order = emu.stats()["order"]
        ours = [r for r in order if not r.get("probe")]
        rec = {r["id"]: r for r in ours}
        return {"max": overlap(ours), "gap": rec["next"]["t_in"] - rec["orphan"]["t_out"],
                "probes": sum(1 for r in order if r.get("probe"))}
    finally:
        await emu.stop()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--on-close", default=None, help="wrap(on_close=...) (default: the wrapper's default)")
    a = ap.parse_args()
    print(f"openai {openai.__version__}; on_close={a.on_close or 'default'}")
    print(f"{'orphan':16} {'backend':9} {'path':17} {'max in flight':>13} {'idle gap s':>10} {'probes':>6}")
    for case in ORPHANS:
        for backend in ("continue", "stop"):
            for how in ("cancel", "timeout", "stream-closed"):
                r = await one(case, backend, how, a.on_close)
                print(f"{case:16} {backend:9} {how:17} {r['max']:>13} {r['gap']:>10.3f} {r['probes']:>6}")


if __name__ == "__main__":
    asyncio.run(main())
