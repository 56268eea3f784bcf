"""Hold an orphan's slot until its backend is idle: the probe, or a bounded estimate.

Contract: ``await hold_until_idle(gate, make_send, timeout_s, deadline) -> str`` returns
when the slot of an orphan (a request whose client left while the backend may still be
answering) can be released, never later than the estimate once probes fail:

* ``"probe"`` — the idle probe (:mod:`sjf_core.admission._probe`) returned: a FIFO
  backend has finished the orphan (exact);
* ``"retry"`` — the probe failed (an HTTP error answer, a timeout), and a retry returned
  before the estimate ran out;
* ``"estimate"`` — probes kept failing and the orphan's estimated end passed.

``deadline()`` is called once the first probe has failed; it returns the monotonic time
by which the orphan is expected to be over (:func:`orphan_deadline`). Retries go out
0.25 s after a failure, doubling up to :data:`MAX_BACKOFF_S`, each bounded by the time
left. ``renew`` (optional) is called every ``renew_every_s`` while waiting (the ticket's
lease). Never raises but ``CancelledError``.

:func:`orphan_deadline` is the estimate: the orphan's expected answer (its entry's
``expected_tokens``; :data:`DEFAULT_TOKENS` when unscored), capped by its ``max_tokens``,
at the backend's measured speed (the adapter's tokens/s, else the queue's seconds per
token, else :data:`DEFAULT_S_PER_TOKEN`), from its dispatch. Worst cases (docs/litellm.md
"A probe that fails"): an orphan that runs longer than its estimate overlaps the next
request by the difference (at most its ``max_tokens`` at that speed); one that ends
sooner leaves the backend idle by the difference, at most :data:`MAX_BACKOFF_S` more
when a retry can prove it idle.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any, Awaitable, Callable

from sjf_core._faults import note_fault

log = logging.getLogger("sjf_core.admission._orphan_hold")

__all__ = ["hold_until_idle", "orphan_deadline", "DEFAULT_TOKENS", "DEFAULT_S_PER_TOKEN", "MAX_BACKOFF_S"]

#: Expected answer of an unscored orphan (the paper's typical Medium answer, tokens).
DEFAULT_TOKENS = 400.0
#: Seconds per token when the backend's speed was never measured (50 tokens/s).
DEFAULT_S_PER_TOKEN = 0.02
#: First retry delay after a failed probe, and the longest between retries (s).
FIRST_BACKOFF_S = 0.25
MAX_BACKOFF_S = 2.0


def _queue_s_per_token(queue: Any) -> float:
    """The queue's measured seconds per answer token (local store, or the Redis store's
    per-process statistics), NaN when unknown."""
    for q in (queue, getattr(queue, "local", None)):
        service = getattr(getattr(q, "pending", None), "service", None)
        spt = getattr(service, "s_per_token", math.nan)
        if isinstance(spt, float) and spt > 0 and math.isfinite(spt):
            return spt
    return math.nan


def orphan_deadline(ticket: Any, max_tokens: Any = None, tokens_per_s: Any = None, now: float | None = None) -> float:
    """The monotonic time by which ``ticket``'s orphan is expected to be over (module
    docstring); never before ``now``. Never raises."""
    now = time.monotonic() if now is None else now
    try:
        e = ticket.entry
        tokens = float(e.expected_tokens) if (not e.fallback and getattr(e, "scored", True)) else math.nan
        if not (tokens > 0 and math.isfinite(tokens)):
            tokens = DEFAULT_TOKENS
        if isinstance(max_tokens, (int, float)) and not isinstance(max_tokens, bool) and max_tokens >= 0:
            tokens = min(tokens, float(max_tokens))
        spt = 1.0 / float(tokens_per_s) if isinstance(tokens_per_s, (int, float)) and tokens_per_s > 0 else math.nan
        if not (spt > 0 and math.isfinite(spt)):
            spt = _queue_s_per_token(getattr(ticket, "queue", None))
        if not (spt > 0 and math.isfinite(spt)):
            spt = DEFAULT_S_PER_TOKEN
        start = float(e.dispatched_at)
        start = start if math.isfinite(start) else now
        return max(now, start + tokens * spt)
    except Exception:  # a ticket without an entry: the default estimate, from now
        note_fault(log, "the orphan's estimate could not be read; the default one is used", level=logging.DEBUG)
        return now + DEFAULT_TOKENS * DEFAULT_S_PER_TOKEN


async def _renewing(wait: Awaitable[bool], renew: Callable[[], None] | None, every: float) -> bool:
    task = asyncio.ensure_future(wait)
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=every)
            if not task.done() and renew is not None:
                renew()
        return bool(task.result())
    finally:
        if not task.done():
            task.cancel()


async def hold_until_idle(gate: Any, make_send: Callable[[float], Callable[[], Awaitable[Any]]], timeout_s: float,
                          deadline: Callable[[], float], renew: Callable[[], None] | None = None,
                          renew_every_s: float = 60.0) -> str:
    """Wait until the orphan's backend is idle, or its estimate ran out (module contract)."""
    every = max(0.05, float(renew_every_s))
    if await _renewing(gate.wait_idle(make_send(timeout_s), timeout_s), renew, every):
        return "probe"
    until = deadline()
    backoff = FIRST_BACKOFF_S
    while True:
        left = until - time.monotonic()
        if left <= 0:
            break
        await asyncio.sleep(min(backoff, left))
        backoff = min(backoff * 2, MAX_BACKOFF_S)
        left = until - time.monotonic()
        if left <= 0:
            break
        attempt_s = max(0.05, min(float(timeout_s), left))
        if await _renewing(gate.wait_idle(make_send(attempt_s), attempt_s, retry=True), renew, every):
            return "retry"
    gate.count_estimate()
    return "estimate"
