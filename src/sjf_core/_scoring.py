"""Scoring of one scheduler: the predictor (loaded once, wrapped by extensions), the
length memory's blend, and the ``on_predict`` events.

Contract: :meth:`Scoring.predict` returns a :class:`~sjf_core.predict._prediction.Prediction`
or None (unscorable body, no predictor, or a predictor error: counted in
``predictor_errors``, logged without prompt text); it never raises.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from sjf_core._faults import note_fault
from sjf_core.memory._core import handle_of
from sjf_core.predict._prediction import Prediction
from sjf_core.predict._text import scored_text

log = logging.getLogger("sjf_core._scheduler")

__all__ = ["Scoring", "load_predictor_spec"]


def load_predictor_spec(spec: Any):
    """A predictor from its spec: "default" / a model path (onnxruntime, imported on first
    use: the predictor module pulls in onnxruntime, which callers without a model never pay
    for), or the object itself."""
    if isinstance(spec, str):
        from sjf_core.predict._predictor import load_predictor  # lazy: onnxruntime

        return load_predictor(None if spec == "default" else spec)
    return spec


class Scoring:
    """The predictor side of a :class:`~sjf_core._scheduler.Scheduler`.

    Args:
        owner: the scheduler (passed to ``on_predict`` listeners).
        spec: a predictor object, "default", a model path, or None (no predictor).
        memory: a :class:`~sjf_core.memory.LengthMemory` or None.
        listeners: the scheduler's listener list (read at each call).
    """

    def __init__(self, owner: Any, spec: Any, memory: Any, listeners: list):
        self.owner, self.spec, self.memory, self.listeners = owner, spec, memory, listeners
        self._base = None
        self._base_failed = False
        self._predictor = None
        self._ready = False
        self._wrappers: list[Callable] = []
        self._lock = threading.RLock()
        self.predictor_errors = 0

    def add_wrapper(self, wrap: Callable) -> None:
        """Wrap the loaded predictor with ``wrap(base) -> predictor`` (from the next call on)."""
        with self._lock:
            self._wrappers.append(wrap)
            self._ready = False

    def remove_wrapper(self, wrap: Callable) -> None:
        with self._lock:
            self._wrappers.remove(wrap)
            self._ready = False

    @property
    def predictor(self):
        """The predictor (loaded on first use, wrapped by any extensions), or None when
        disabled or unloadable (then FCFS order)."""
        if self._ready:
            return self._predictor
        with self._lock:
            if not self._ready:
                if self._base is None and not self._base_failed and self.spec is not None:
                    try:
                        self._base = load_predictor_spec(self.spec)
                    except Exception as exc:
                        self._base_failed = True
                        log.error("predictor could not be loaded (%s); admitting in FCFS order", exc)
                p = self._base
                for wrap in self._wrappers:
                    p = wrap(p)
                self._predictor, self._ready = p, True
            return self._predictor

    def preload(self) -> threading.Thread:
        """Load the predictor in a background (daemon) thread and return it, so the first
        request that has to wait is not the one that pays the model load (~0.3-1 s).
        Never raises; a load failure is logged by :attr:`predictor` (FCFS order)."""
        def load():
            try:
                self.predictor
            except Exception:  # the property logs and fails open itself; this is a second guard
                note_fault(log, "predictor preload failed; requests are scored once it loads, FCFS until then")

        th = threading.Thread(target=load, name="sjf-predictor-preload", daemon=True)
        th.start()
        return th

    def predict(self, body: Any, endpoint: str = "chat/completions") -> Prediction | None:
        """Predict the answer length of a request body; None when it cannot be scored."""
        try:
            text = scored_text(body, endpoint)
            if text is None:
                return None
            p = self.predictor
            if p is None:
                return None
            t0 = time.perf_counter()
            try:
                prediction = p.predict(text)
            except Exception as exc:
                self._emit_predict(time.perf_counter() - t0, type(exc).__name__)
                raise
            self._emit_predict(time.perf_counter() - t0, None)
            if self.memory is not None:
                prediction = self._remember(p, body, text, prediction, True)
            return prediction
        except Exception as exc:
            self.predictor_errors += 1
            log.warning("request could not be scored (%s); FCFS order for it", type(exc).__name__)
            return None

    def _remember(self, p, body, text, prediction: Prediction, count: bool) -> Prediction:
        """The memory's blend of ``prediction`` (features from the predictor's own layout)."""
        layout = getattr(p, "layout", None)
        features = None
        if layout is not None:
            try:
                features = layout.extract(text)
            except Exception:
                note_fault(log, "memory features could not be extracted; the memory blends without them")
                features = None
        info = getattr(p, "info", None)
        sigma0 = getattr(info, "log_sigma", 1.0) if info is not None else 1.0
        return self.memory.score(body, text, features, prediction, sigma0, count)

    def learn_unscored(self, body: Any, endpoint: str):
        """Evidence of a request that was never scored (lazy: it ran alone), to learn from it."""
        text = scored_text(body, endpoint)
        p = self.predictor
        if text is None or p is None or self.memory is None:
            return None
        return handle_of(self._remember(p, body, text, p.predict(text), False))

    def memory_status(self) -> dict:
        """The length memory's status (:meth:`~sjf_core.memory.LengthMemory.status`), or
        ``{"enabled": False}``."""
        if self.memory is None:
            return {"enabled": False}
        try:
            return self.memory.status()
        except Exception as exc:
            note_fault(log, "length memory status unavailable", exc)
            return {"enabled": True, "error": type(exc).__name__}

    def _emit_predict(self, latency_s: float, error: str | None) -> None:
        for listener in self.listeners:
            fn = getattr(listener, "on_predict", None)
            if fn is not None:
                try:
                    fn(self.owner, latency_s, error)
                except Exception:  # a listener must never break scoring
                    log.exception("listener %s.on_predict failed", type(listener).__name__)
