"""The LiteLLM plugin's counters and per-backend answer rates (no prompt text).

* :class:`HandlerStats` — one ``int`` field per counter, all starting at 0, bumped on the
  event loop's thread only. :meth:`HandlerStats.as_dict` is ``status()["counters"]``:
  ``{name: int}`` in field order (the keys are part of the status contract).
* :data:`COUNTER_GROUPS` / :func:`grouped` — the counters by what they are about, each with
  one line saying what it counts (``status()["counter_groups"]``, the page's "Counters").
* :class:`TokenRates` — per backend key, answer tokens per second of slot time: an EWMA
  (weight 0.2) of the answer tokens of released calls that report them, over an EWMA of the
  seconds their slot was held (grant to release: the backend's prompt processing and
  generation, plus LiteLLM's and the network's share). A ratio of averages, so that short
  answers, whose fixed costs dominate, do not pull the figure far below the backend's
  generation speed. ``status()["tokens_per_s"]``.

Neither raises on well-typed input; neither is thread-safe for writers.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

#: the ``reason`` of :meth:`HandlerStats.count_release` (the ``released_*`` fields)
RELEASE_REASONS = ("success", "stream", "failure", "backup", "rerun", "probe")


@dataclass
class HandlerStats:
    """What the plugin did, counted per event (see ``docs/`` for each path)."""

    scored: int = 0  # pre-call: a prediction was made
    unscored: int = 0  # pre-call: the request could not be scored (FCFS key)
    passthrough: int = 0  # a call type or shape we do not schedule
    admitted: int = 0  # a slot was granted
    rejected_429: int = 0  # overload control refused it (HTTP 429)
    cancelled_queued: int = 0  # the caller left while queued
    released_success: int = 0
    released_stream: int = 0
    released_failure: int = 0
    released_backup: int = 0  # by the background logger's event
    released_rerun: int = 0  # a fallback re-ran the request elsewhere
    released_probe: int = 0  # an orphan's slot, after the idle probe returned
    drained: int = 0  # a stream read to its end after its client left
    drain_aborted: int = 0  # ... cut at drain_max_s
    drain_unavailable: int = 0  # the stream could not be kept open: probed instead
    orphan_probes: int = 0
    probe_failed: int = 0  # probes failed: released at the orphan's estimated end
    probe_unavailable: int = 0  # no api_base to probe: released at once
    rejected_early: int = 0  # LiteLLM would refuse it before the backend: no slot
    fail_open: int = 0  # an internal fault, absorbed (the request goes on)
    gated: int = 0  # ... while queueing: admitted by the last-resort gate (FIFO, slots kept)
    duplicate_call_ids: int = 0
    superseded_409: int = 0
    pooled: int = 0  # a pool handed the request to one of its group's backends (docs/pool.md)

    def count_release(self, reason: str) -> None:
        """Count one freed slot under ``released_<reason>`` (``reason`` in
        :data:`RELEASE_REASONS`; ValueError otherwise)."""
        if reason not in RELEASE_REASONS:
            raise ValueError(f"unknown release reason {reason!r}")
        name = "released_" + reason
        setattr(self, name, getattr(self, name) + 1)

    def as_dict(self) -> dict[str, int]:
        """``{counter: value}``, in field order (a copy)."""
        return dataclasses.asdict(self)


#: (group, what it is about, [(counter, what it counts)]): every counter of
#: :class:`HandlerStats` once, plus the status's ``store_fail_open``
COUNTER_GROUPS = (
    ("admission", "what happened to requests as they arrived", (
        ("scored", "requests whose answer length was predicted"),
        ("unscored", "requests that could not be scored: they queue first come, first served"),
        ("passthrough", "requests of a kind the plugin does not schedule (embeddings, no call id)"),
        ("admitted", "requests granted a backend slot"),
        ("pooled", "of those, handed to a backend by a model group's pool"),
        ("rejected_429", "refused by overload control (HTTP 429 with Retry-After)"),
        ("rejected_early", "requests LiteLLM refuses before the backend: they took no slot"),
        ("superseded_409", "replaced by a newer request with the same x-sjf-supersede key (HTTP 409)"),
        ("cancelled_queued", "clients that left while their request waited"),
        ("duplicate_call_ids", "requests that reused a call id already in flight"))),
    ("releases", "how each slot was given back (each slot exactly once)", (
        ("released_success", "a non-streamed answer ended"),
        ("released_stream", "a stream ended"),
        ("released_failure", "the attempt failed or was refused"),
        ("released_backup", "by LiteLLM's logging event, after the hooks missed it"),
        ("released_rerun", "a fallback re-ran the request on another backend"),
        ("released_probe", "a client left a running answer: freed once the backend was idle"))),
    ("clients that left mid-answer", "the backend may still be generating for nobody", (
        ("drained", "streams read to their end after the client left"),
        ("drain_aborted", "drains cut at drain_max_s"),
        ("drain_unavailable", "streams that could not be kept open: probed instead"),
        ("orphan_probes", "idle probes sent to learn when the backend is free"),
        ("probe_failed", "probes that failed: the slot was freed at the answer's estimated end"),
        ("probe_unavailable", "no api_base to probe: the slot was freed at once"))),
    ("faults absorbed", "internal faults that let requests through, with the slot bound kept", (
        ("fail_open", "internal faults absorbed (the request went on)"),
        ("gated", "of those, requests admitted by the backend's last-resort gate (FIFO, slots kept)"),
        ("store_fail_open", "requests admitted by the per-process queue while Redis was unreachable"))),
)


def grouped(counters: dict) -> list[dict]:
    """``[{"group", "about", "counters": [{"name", "value", "means"}]}]`` of ``counters``
    (:data:`COUNTER_GROUPS`' order; a counter not listed there goes to a last group "other")."""
    out, seen = [], set()
    for group, about, items in COUNTER_GROUPS:
        rows = [{"name": n, "value": counters[n], "means": means} for n, means in items if n in counters]
        seen.update(n for n, _ in items)
        out.append({"group": group, "about": about, "counters": rows})
    rest = [{"name": n, "value": v, "means": None} for n, v in counters.items() if n not in seen]
    if rest:
        out.append({"group": "other", "about": None, "counters": rest})
    return out


class TokenRates:
    """Per-backend answer tokens per second of slot time (module docstring)."""

    __slots__ = ("_tokens", "_seconds", "weight")

    def __init__(self, weight: float = 0.2):
        self._tokens: dict[str, float] = {}
        self._seconds: dict[str, float] = {}
        self.weight = weight

    def observe(self, backend: str, answer_tokens: int, service_s: float) -> None:
        """Fold one finished answer in; ignored when ``service_s`` ≤ 50 ms or not finite."""
        if not answer_tokens or not (service_s > 0.05) or not math.isfinite(service_s):
            return
        for ewma, x in ((self._tokens, float(answer_tokens)), (self._seconds, float(service_s))):
            old = ewma.get(backend)
            ewma[backend] = x if old is None else old + self.weight * (x - old)

    def as_dict(self) -> dict[str, float]:
        """``{backend key: tokens/s}`` (a copy)."""
        return {k: self._tokens[k] / s for k, s in self._seconds.items() if s > 0}
