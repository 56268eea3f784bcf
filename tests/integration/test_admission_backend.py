"""The in-process admission queue measured at a real backend (the emulator, over real
sockets on 127.0.0.1): DESIGN.md invariant 1, the backend never sees more than ``slots``."""

from __future__ import annotations

import asyncio

import httpx

from sjf_core.admission._local import LocalAdmissionQueue
from sjf_core.predict._prediction import Prediction


def pred(p_long: float) -> Prediction:
    return Prediction.from_probs([1 - p_long, 0.0, p_long])


# ---- 1. concurrency bound, measured at the backend ---------------------------------------------
async def test_slots_bound_measured_at_the_emulator(emulator_factory):
    emu = await emulator_factory(tokens_per_s=2000, slots=8, seed=3)
    q = LocalAdmissionQueue(slots=2, policy="sjf", name=emu.base_url)

    async def call(i, client):
        async with q.ticket(pred((i % 10) / 10)):
            r = await client.post(emu.base_url + "/chat/completions",
                                  json={"model": "m", "messages": [{"role": "user", "content": f"q{i}"}],
                                        "max_tokens": 20})
            r.raise_for_status()

    async with httpx.AsyncClient(timeout=60) as client:
        await asyncio.gather(*[call(i, client) for i in range(24)])
    st = emu.stats()
    assert st["served"] == 24
    assert st["max_in_flight"] == 2  # never more than slots, and both used (work-conserving)
    assert q.in_flight == 0 and q.stats.max_in_flight == 2
