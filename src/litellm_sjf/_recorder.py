"""What the operator's view remembers: recent completions and the ranking accuracy over time.

:class:`OpsRecorder` is a queue-event listener (:class:`sjf_core.admission._events.QueueEvents`)
the plugin adds to its scheduler. It keeps, in bounded rings and without prompt text:

* ``recent()``: the last ``keep`` completed requests, newest first: ``{"t"`` (Unix time),
  ``"backend"`` (its label, no credentials), ``"class"`` (predicted), ``"expected_tokens"``,
  ``"answer_tokens"`` (from ``usage``; None when unknown), ``"true_class"``, ``"wait_s"``,
  ``"service_s"``, ``"promoted"``, ``"tenant"``, ``"model"`` (the request's model group, from
  ``model_of(entry)``; None when unknown)\\ ``}``;
* ``accuracy_history()``: ``[{"t", "memory", "base", "n"}]``, the online ranking accuracy
  (paper Eq. 2, memory vs base) sampled at a completion at most every ``every_s`` seconds,
  the last ``points`` samples. ``accuracy`` is a callable returning
  :meth:`sjf_core.memory.LengthMemory.online_accuracy`'s dict, or None (no memory).

Event methods run on the event loop and never raise (the queue logs a listener that does);
the readers return copies and may run on another thread.
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from typing import Any, Callable

from sjf_core import CLASS_NAMES, QueueEvents, backend_label, class_of_tokens, note_fault

__all__ = ["OpsRecorder"]

log = logging.getLogger("litellm_sjf")


def _finite(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _class(entry: Any) -> str:
    """The predicted class of an entry, "unscored" when it was not scored (fail-open, idle)."""
    if entry.fallback or not entry.scored:
        return "unscored"
    return CLASS_NAMES[entry.klass] if 0 <= entry.klass < len(CLASS_NAMES) else "unscored"


class OpsRecorder(QueueEvents):
    """Recent completions and accuracy samples (module docstring)."""

    def __init__(self, accuracy: Callable[[], dict | None] | None = None, keep: int = 50,
                 points: int = 360, every_s: float = 10.0, clock: Callable[[], float] = time.time):
        self._accuracy = accuracy
        self._recent: collections.deque = collections.deque(maxlen=keep)
        self._history: collections.deque = collections.deque(maxlen=points)
        self.every_s = float(every_s)
        self.clock = clock
        self._last_sample = -math.inf
        self._lock = threading.Lock()
        #: ``entry -> model group or None`` (the handler's :meth:`OpsLabels.group_of`)
        self.model_of: Callable[[Any], str | None] | None = None

    def on_complete(self, queue: Any, entry: Any, service_s: float, answer_tokens: int | None) -> None:
        ok = answer_tokens is not None and answer_tokens >= 0
        row = {"t": self.clock(), "backend": backend_label(getattr(queue, "name", "?")),
               "class": _class(entry), "expected_tokens": _finite(entry.expected_tokens) if entry.scored else None,
               "answer_tokens": int(answer_tokens) if ok else None,
               "true_class": CLASS_NAMES[class_of_tokens(answer_tokens)] if ok else None,
               "wait_s": _finite(entry.dispatched_at - entry.arrival), "service_s": _finite(service_s),
               "promoted": bool(entry.promoted), "tenant": entry.tenant, "model": self._model(entry)}
        with self._lock:
            self._recent.appendleft(row)
        self.sample()

    def _model(self, entry: Any) -> str | None:
        try:
            return self.model_of(entry) if self.model_of is not None else None
        except Exception:  # a name is not worth an event: the row shows none
            note_fault(log, "litellm_sjf: a completion's model name unreadable", level=logging.DEBUG)
            return None

    def sample(self, force: bool = False) -> None:
        """Record one accuracy sample unless one was taken less than ``every_s`` ago."""
        now = self.clock()
        if self._accuracy is None or (not force and now - self._last_sample < self.every_s):
            return
        self._last_sample = now
        try:
            acc = self._accuracy()
        except Exception:  # the memory's own fault: no sample this time
            note_fault(log, "litellm_sjf: the ranking accuracy could not be read; no sample this time")
            return
        if acc:
            with self._lock:
                self._history.append({"t": now, "memory": acc.get("memory"), "base": acc.get("base"),
                                      "n": acc.get("n", 0)})

    def recent(self) -> list[dict]:
        with self._lock:
            return [dict(r) for r in self._recent]

    def accuracy_history(self) -> list[dict]:
        with self._lock:
            return [dict(r) for r in self._history]
