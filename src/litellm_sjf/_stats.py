"""The LiteLLM plugin's counters and per-backend answer rates (no prompt text).

* :class:`HandlerStats` — one ``int`` field per counter, all starting at 0, bumped on the
  event loop's thread only. :meth:`HandlerStats.as_dict` is ``status()["counters"]``:
  ``{name: int}`` in field order (the keys are part of the status contract).
* :class:`TokenRates` — per backend key, an EWMA (weight 0.2) of answer tokens per second
  of service, from released calls that report ``usage``. ``status()["tokens_per_s"]``.

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


class TokenRates:
    """Per-backend EWMA of answer tokens per second of service."""

    __slots__ = ("_rates", "weight")

    def __init__(self, weight: float = 0.2):
        self._rates: dict[str, float] = {}
        self.weight = weight

    def observe(self, backend: str, answer_tokens: int, service_s: float) -> None:
        """Fold one finished answer in; ignored when ``service_s`` ≤ 50 ms or not finite."""
        if not answer_tokens or not (service_s > 0.05) or not math.isfinite(service_s):
            return
        rate = answer_tokens / service_s
        old = self._rates.get(backend)
        self._rates[backend] = rate if old is None else old + self.weight * (rate - old)

    def as_dict(self) -> dict[str, float]:
        """``{backend key: tokens/s}`` (a copy)."""
        return dict(self._rates)
