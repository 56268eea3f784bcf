"""Overload control of one backend queue: admit, defer or reject along a cost ladder (seed 003).

Pure and clock-agnostic (the caller passes ``now``), shared by the live
:class:`~sjf_core.admission._local.AdmissionQueue` and the simulator.

Two limits, each optional:

* ``max_queue_depth``: requests *waiting* for a slot (running ones excluded);
* ``max_predicted_wait_s``: the wait a new request can expect, from the expected
  service seconds of the work ahead of it (:class:`~sjf_core.policy._service.ServiceStats`:
  expected tokens × observed seconds per token, else the observed mean of its
  predicted class) divided by the slots. For length-aware policies the work ahead
  of a class-c request is the running remainder plus the waiting work of classes
  ≤ c (it overtakes longer ones); for ``fcfs`` it is all waiting work.

**Cost ladder.** Class c is refused once the queue reaches ``ladder[c]`` × a
limit: by default Long at 60%, Medium at 80%, Short at 100%, so the most
expensive class is shed first and Short is refused only at the hard limit. A
refused request is *deferred* (held outside the queue, re-checked whenever the
queue drains) for up to ``defer_s`` seconds, then rejected with
:class:`~sjf_core._errors.AdmissionRejected` and a ``Retry-After`` estimate.
``defer_s = 0`` (default) rejects at once. A request that has entered the queue
is never dropped: overload control acts only at admission.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


from sjf_core.policy._entry import LONG, MEDIUM, SHORT, Entry
from sjf_core.policy._service import ServiceStats
from sjf_core.settings import OverloadConfig  # noqa: F401  (the settings of the control: re-exported)


@dataclass(frozen=True)
class Verdict:
    """Why a request is refused now.

    Attributes:
        reason: "queue_depth" or "predicted_wait".
        retry_after_s: suggested wait before retrying (seconds).
        klass: the class the ladder applied (0 Short, 1 Medium, 2 Long).
    """

    reason: str
    retry_after_s: float
    klass: int


class OverloadControl:
    """Bookkeeping of the work in one queue and admission verdicts.

    Args:
        config: the limits.
        service: the queue's service statistics (shared with its pending queue).
        slots: the queue's slots (>= 1).
        length_aware: True when the policy lets shorter classes overtake longer
            ones (everything but ``fcfs``); see the module docstring.
    """

    def __init__(self, config: OverloadConfig, service: ServiceStats, slots: int = 1, length_aware: bool = True):
        self.config = config
        self.service = service
        self.slots = max(1, int(slots))
        self.length_aware = length_aware
        self._waiting: dict[int, tuple[int, float]] = {}  # id(entry) -> (class, expected s)
        self._waiting_work = [0.0, 0.0, 0.0]
        self._running: dict[int, tuple[float, float]] = {}  # id(entry) -> (expected s, start)
        self.rejected = [0, 0, 0]

    @staticmethod
    def _class(entry: Entry) -> int:
        return entry.klass if entry.klass in (SHORT, MEDIUM, LONG) else MEDIUM

    # ---- bookkeeping ------------------------------------------------------------------
    def enqueued(self, entry: Entry) -> None:
        """``entry`` entered the pending queue."""
        c = self._class(entry)
        est = self.service.expected_s(c, entry.expected_tokens)
        self._waiting[id(entry)] = (c, est)
        self._waiting_work[c] += est

    def left(self, entry: Entry) -> None:
        """A waiting ``entry`` left without dispatch (cancelled, timed out)."""
        item = self._waiting.pop(id(entry), None)
        if item is not None:
            c, est = item
            self._waiting_work[c] = max(0.0, self._waiting_work[c] - est)

    def dispatched(self, entry: Entry, now: float) -> None:
        """``entry`` got a slot at ``now``."""
        item = self._waiting.pop(id(entry), None)
        if item is None:
            return
        c, est = item
        self._waiting_work[c] = max(0.0, self._waiting_work[c] - est)
        self._running[id(entry)] = (est, now)

    def finished(self, entry: Entry) -> None:
        """``entry`` released its slot."""
        self._running.pop(id(entry), None)

    # ---- estimates and verdicts ---------------------------------------------------------
    def predicted_wait_s(self, klass: int, now: float) -> float:
        """Predicted wait (seconds) of a new request of predicted class ``klass`` at ``now``."""
        running = sum(max(0.0, est - (now - start)) for est, start in self._running.values())
        if len(self._running) < self.slots:
            running = 0.0 if not self._waiting else running  # a free slot: no wait unless queued work
        upto = klass if self.length_aware else LONG
        ahead = sum(self._waiting_work[: upto + 1])
        return (running + ahead) / self.slots

    def check(self, entry: Entry, waiting: int, now: float) -> Verdict | None:
        """Verdict for admitting ``entry`` now, with ``waiting`` requests queued; None = admit."""
        cfg = self.config
        c = self._class(entry)
        frac = cfg.ladder[c]
        if cfg.max_queue_depth is not None:
            limit = max(1, int(math.floor(cfg.max_queue_depth * frac + 1e-9)))
            if waiting + 1 > limit:
                mean = (sum(self._waiting_work) / waiting) if waiting else self.service.expected_s(c)
                retry = (waiting + 1 - limit) * mean / self.slots
                return self._verdict("queue_depth", retry, c)
        if cfg.max_predicted_wait_s is not None:
            limit_s = cfg.max_predicted_wait_s * frac
            wait = self.predicted_wait_s(c, now)
            if wait > limit_s:
                return self._verdict("predicted_wait", wait - limit_s, c)
        return None

    def _verdict(self, reason: str, retry_s: float, c: int) -> Verdict:
        cfg = self.config
        if not math.isfinite(retry_s):
            retry_s = cfg.max_retry_after_s
        retry_s = min(cfg.max_retry_after_s, max(cfg.min_retry_after_s, retry_s))
        return Verdict(reason, retry_s, c)
