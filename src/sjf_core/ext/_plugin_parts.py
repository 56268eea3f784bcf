"""Adapters from plugin hooks to the scheduler's parts: predictor, policy key, queue events.

Contract: :class:`PluginPredictor` asks ``sjf_predict`` plugins, then a base predictor
(raises on an unusable plugin result, so the scheduler counts a predictor error and serves
FCFS); :class:`PluginPolicy` lets ``sjf_ordering_key`` override a finite key, else the
base policy's; :class:`PluginEvents` forwards queue events, each plugin isolated.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pluggy

from sjf_core.admission._events import QueueEvents
from sjf_core.settings import DEFAULT_PROMOTION
from sjf_core.settings import backend_label
from sjf_core.policy._entry import CLASS_NAMES, class_of_tokens
from sjf_core.policy._policies import Policy, RequestMeta
from sjf_core.predict._prediction import Prediction

log = logging.getLogger("sjf_core.ext._hooks")

__all__ = ["to_prediction", "PluginPredictor", "PluginPolicy", "PluginEvents"]


# ---- predictor --------------------------------------------------------------------------

def _prob_prediction(probs: Sequence[Any], expected_tokens: Any = None) -> Prediction:
    ps = [float(p) for p in probs]
    if len(ps) != 3 or not all(math.isfinite(p) and p >= 0 for p in ps) or sum(ps) <= 0:
        raise ValueError("class probabilities must be 3 finite non-negative numbers with a positive sum")
    total = sum(ps)
    ps = [p / total for p in ps]
    if expected_tokens is not None:
        expected_tokens = float(expected_tokens)
        if not math.isfinite(expected_tokens) or expected_tokens < 0:
            raise ValueError("expected_tokens must be finite and >= 0")
    return Prediction.from_probs(ps, expected_tokens)


def _token_prediction(tokens: Any) -> Prediction:
    t = float(tokens)
    if not math.isfinite(t) or t < 0:
        raise ValueError("expected tokens must be finite and >= 0")
    probs = [0.0, 0.0, 0.0]
    probs[class_of_tokens(t)] = 1.0
    return Prediction(probs[0], probs[1], probs[2], CLASS_NAMES[class_of_tokens(t)], t)


def to_prediction(result: Any) -> Prediction | None:
    """Turn an ``sjf_predict`` result into a :class:`Prediction` (None stays None).

    Raises:
        ValueError, TypeError: the result has no usable shape (the message names the
            type only, never values).
    """
    if result is None:
        return None
    if isinstance(result, Prediction):
        return _prob_prediction((result.p_short, result.p_medium, result.p_long), result.expected_tokens)
    if isinstance(result, bool):
        raise TypeError("plugin predictor returned a bool")
    if isinstance(result, (int, float)):
        return _token_prediction(result)
    if isinstance(result, Mapping):
        probs = [result.get(k) for k in ("p_short", "p_medium", "p_long")]
        if all(p is not None for p in probs):
            return _prob_prediction(probs, result.get("expected_tokens"))
        if result.get("expected_tokens") is not None:
            return _token_prediction(result["expected_tokens"])
        raise ValueError("plugin predictor mapping lacks p_short/p_medium/p_long or expected_tokens")
    if isinstance(result, (str, bytes)):
        raise TypeError("plugin predictor returned a string")
    try:
        seq = list(result)
    except TypeError:
        raise TypeError(f"plugin predictor returned an unusable {type(result).__name__}") from None
    return _prob_prediction(seq)


class PluginPredictor:
    """Asks the ``sjf_predict`` plugins first, then the base predictor.

    Args (the wrapped part first, as :class:`PluginPolicy`):
        base: the built-in predictor (anything with ``.predict(text) -> Prediction``), or
            None (plugin predictions only; a request no plugin scores is unscored).
        pm: the plugin manager.

    :meth:`predict` raises when a plugin raises or returns an unusable result; the
    scheduler then counts a predictor error and serves the request in FCFS order.
    """

    def __init__(self, base: Any, pm: pluggy.PluginManager):
        self.base = base
        self.pm = pm

    def predict(self, text: str) -> Prediction | None:
        """Prediction for ``text``: the first plugin answer, else the built-in predictor's."""
        pred = to_prediction(self.pm.hook.sjf_predict(text=text))
        if pred is not None:
            return pred
        base = self.base
        return None if base is None else base.predict(text)


# ---- ordering key -----------------------------------------------------------------------

class PluginPolicy(Policy):
    """A policy whose key may be overridden by ``sjf_ordering_key`` plugins.

    Args (the wrapped part first, as :class:`PluginPredictor`): ``base`` (the policy),
    ``pm`` (the plugin manager). Delegates everything else (τ, pending structure, fallback
    key) to ``base``.
    """

    def __init__(self, base: Policy, pm: pluggy.PluginManager):
        self.base = base
        self.pm = pm
        self.name = base.name
        self.tau_config = base.tau_config
        self.promotion = getattr(base, "promotion", None) or DEFAULT_PROMOTION
        self.k = getattr(base, "k", 1)

    def __getattr__(self, name: str) -> Any:
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def fallback_key(self) -> float:
        return self.base.fallback_key()

    def new_pending(self):
        return self.base.new_pending()

    def key(self, prediction: Prediction, meta: RequestMeta) -> float:
        default = float(self.base.key(prediction, meta))
        try:
            k = self.pm.hook.sjf_ordering_key(prediction=prediction, meta=meta, default_key=default,
                                              policy=str(self.base.name))
            if k is None or isinstance(k, bool):
                return default
            k = float(k)
            return k if math.isfinite(k) else default
        except Exception as exc:
            log.warning("sjf_ordering_key plugin failed (%s); policy key used", type(exc).__name__)
            return default

    def __repr__(self) -> str:
        return f"PluginPolicy({self.base!r})"


# ---- events -----------------------------------------------------------------------------

class PluginEvents(QueueEvents):
    """Forwards queue events to the ``sjf_on_*`` hooks, each plugin isolated from the others."""

    def __init__(self, pm: pluggy.PluginManager):
        self.pm = pm

    def _call(self, hook: str, **kwargs: Any) -> None:
        for impl in getattr(self.pm.hook, hook).get_hookimpls():
            try:
                impl.function(*[kwargs[a] for a in impl.argnames])
            except Exception as exc:
                log.warning("sjf plugin %s.%s failed (%s)", impl.plugin_name, hook, type(exc).__name__)

    def on_enqueue(self, queue, entry):
        self._call("sjf_on_enqueue", backend=_backend(queue), entry=entry)

    def on_dispatch(self, queue, entry, wait_s):
        self._call("sjf_on_dispatch", backend=_backend(queue), entry=entry, wait_s=wait_s)

    def on_complete(self, queue, entry, service_s, answer_tokens):
        self._call("sjf_on_complete", backend=_backend(queue), entry=entry, service_s=service_s,
                   answer_tokens=answer_tokens)

    def on_cancel(self, queue, entry):
        self._call("sjf_on_cancel", backend=_backend(queue), entry=entry)

    def on_reject(self, queue, entry=None, reason="unknown", *args, **kw):
        self._call("sjf_on_reject", backend=_backend(queue), reason=str(kw.get("reason", reason)))


def _backend(queue: Any) -> str:
    return backend_label(getattr(queue, "name", queue))
