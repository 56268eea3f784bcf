"""The requests of ``sjf bench --scenario faults`` and the clients that send them.

:func:`make_workload` draws one round: unique prompts with planned answer lengths (the
emulator's trace), and per request at most one planned event:

* a client that leaves **mid-answer** (:data:`MID`): it waits until its request holds the
  backend's slot (the emulator's ``/emulator/wait-start``, so the disconnect is timed after
  dispatch, not after submit) and leaves after a share of its answer time; long answers,
  streamed or not;
* a client that leaves after a while from submit (:data:`QUEUED`; queued or running), or a
  stream dropped after its first chunk (:data:`FIRST_CHUNK`), as in ``benchmarks/soak.py``;
* an injected backend fault (trace ``fault``: 500, 503, a dropped connection, a stream
  dropped mid-answer);
* a predictor fault (:mod:`sjf_lab.bench.fault_predictor`: the predictor raises, or its
  prediction raises when read).

:func:`send` sends one and returns what its client saw: ``ok`` (HTTP 200, a full body or a
stream ending in ``[DONE]``, with the answer's length in words), ``error`` (an HTTP error,
a truncated stream, a dropped connection), ``left`` (the client left as planned; ``mid``
True when it left after its request got the slot and before its answer ended).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass

from sjf_lab.bench.fault_predictor import FAILS_WHEN_READ, RAISES
from sjf_lab.emulator import short_hash

MID, QUEUED, FIRST_CHUNK = "mid-answer", "queued", "first-chunk"
TOPICS = ["binary search", "photosynthesis", "the French revolution", "TCP congestion control", "black holes",
          "sourdough bread", "Rust ownership", "the Krebs cycle", "Kubernetes operators", "impressionism"]
FORMS = ["In one sentence, what is {t}?", "Define {t}.", "Write a detailed, multi-section essay about {t}.",
         "Explain {t} step by step with examples.", "List three facts about {t}.",
         "Write a long tutorial on {t}, with code where useful."]


@dataclass
class FaultRequest:
    """One request of a round (no field holds anything but the prompt we made up)."""

    i: int
    prompt: str
    tokens: int
    stream: bool
    fault: str | None = None  # trace fault of the emulator
    leave: str | None = None  # MID, QUEUED, FIRST_CHUNK or None
    after_s: float = 0.0  # MID: after its start at the backend; QUEUED: after submit
    predictor: str | None = None  # "raises", "fails-when-read" or None


def make_workload(n: int, rnd: int, rng: random.Random, tokens_per_s: float, mid_frac: float = 0.08,
                  queued_frac: float = 0.04, fault_frac: float = 0.05, predictor_frac: float = 0.06,
                  stream_frac: float = 0.5) -> list[FaultRequest]:
    """One round of ``n`` requests (module docstring). ``rnd`` makes the prompts unique per round."""
    reqs = []
    for i in range(n):
        form = rng.choice(FORMS)
        prompt = f"[r{rnd}-{i}] " + form.format(t=rng.choice(TOPICS))
        long_form = "essay" in form or "tutorial" in form or "step by step" in form
        r = FaultRequest(i, prompt, rng.randint(300, 900) if long_form else rng.randint(10, 150),
                         rng.random() < stream_frac)
        x = rng.random()
        if x < mid_frac:
            r.leave, r.tokens = MID, rng.randint(1500, 3000)
            r.after_s = rng.uniform(0.1, 0.6) * r.tokens / tokens_per_s
        elif x < mid_frac + queued_frac:
            r.leave, r.after_s = QUEUED, rng.uniform(0.2, 10.0)
        elif x < mid_frac + queued_frac + fault_frac:
            r.fault = rng.choice(["500", "503", "drop"] + (["drop-mid"] if r.stream else []))
        elif x < mid_frac + queued_frac + fault_frac + 0.02:
            r.stream, r.leave = True, FIRST_CHUNK
        elif x < mid_frac + queued_frac + fault_frac + 0.02 + predictor_frac:
            r.predictor = "raises" if rng.random() < 0.5 else "fails-when-read"
            r.prompt = f"{RAISES if r.predictor == 'raises' else FAILS_WHEN_READ} {r.prompt}"
        reqs.append(r)
    return reqs


def trace_records(reqs: list[FaultRequest]) -> list[dict]:
    """The emulator's trace lines of these requests."""
    return [{"prompt": r.prompt, "answer_tokens": r.tokens, **({"fault": r.fault} if r.fault else {})} for r in reqs]


async def _post(session, url: str, key: str, r: FaultRequest) -> dict:
    body = {"model": "emu", "messages": [{"role": "user", "content": r.prompt}], "stream": r.stream}
    async with session.post(url, json=body, headers={"Authorization": f"Bearer {key}"}) as resp:
        if resp.status != 200:
            await resp.read()
            return {"outcome": "error", "detail": f"HTTP {resp.status}"}
        if not r.stream:
            data = await resp.json(content_type=None)
            try:
                words = len(data["choices"][0]["message"]["content"].split())
            except (KeyError, IndexError, TypeError, AttributeError):
                return {"outcome": "error", "detail": "200 without an answer"}
            return {"outcome": "ok", "detail": "200", "words": words}
        words, done = 0, False
        async for line in resp.content:
            if r.leave == FIRST_CHUNK:
                return {"outcome": "left", "detail": FIRST_CHUNK}
            line = line.strip()
            if line == b"data: [DONE]":
                done = True
            elif line.startswith(b"data: "):
                try:
                    ch = json.loads(line[6:])
                    words += len(((ch.get("choices") or [{}])[0].get("delta") or {}).get("content", "").split())
                except (ValueError, AttributeError, IndexError):
                    pass
        return {"outcome": "ok" if done else "error", "detail": "stream done" if done else "truncated stream",
                "words": words}


async def _started(session, emu_url: str, r: FaultRequest, task: asyncio.Task, deadline: float) -> bool:
    """Wait until ``r`` holds the backend's slot (the emulator answers when it does)."""
    h = short_hash(r.prompt)
    while not task.done() and time.monotonic() < deadline:
        try:
            async with session.post(emu_url + "/emulator/wait-start", json={"hash": h, "timeout": 5.0}) as resp:
                if (await resp.json()).get("started"):
                    return True
        except Exception:  # the backend is restarting: ask again
            await asyncio.sleep(0.2)
    return False


async def send(session, url: str, key: str, r: FaultRequest, emu_url: str, deadline_s: float) -> dict:
    """Send ``r`` and play its client's part; the outcome (module docstring) with ``t_end``."""
    import aiohttp

    task = asyncio.ensure_future(_post(session, url, key, r))
    out = None
    try:
        if r.leave == MID:
            if await _started(session, emu_url, r, task, time.monotonic() + deadline_s):
                done, _ = await asyncio.wait({task}, timeout=r.after_s)
                if not done:
                    out = {"outcome": "left", "detail": MID, "mid": True}
        elif r.leave == QUEUED:
            done, _ = await asyncio.wait({task}, timeout=r.after_s)
            if not done:
                out = {"outcome": "left", "detail": f"left after {r.after_s:.1f} s"}
        if out is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        else:
            out = await task
    except asyncio.CancelledError:
        task.cancel()
        raise
    except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError) as exc:
        out = {"outcome": "error", "detail": type(exc).__name__}
    out["t_end"] = time.monotonic()
    return out
