"""From a regressor's output μ to the answer-length estimate: location and spread of
ln(1 + tokens), class probabilities, expected tokens, and the stated size's part in them (issue 23).

Contract (all pure functions of floats; no text):

* :func:`base_one` (μ, :class:`Knots` of a :class:`~sjf_core.predict._model_file.ModelInfo`) -> (location ℓ, σ,
  expected tokens): with a spread calibration (``sjf.calibration_spread``) ℓ and σ are its
  conditional median and spread of ln(1 + tokens) at μ; else ℓ = ln(1 + E) − σ²/2 with the
  model's σ (``sjf.log_sigma``). Expected tokens come from the mean map (``sjf.calibration``)
  when there is one, else exp(ℓ + σ²/2) − 1.
* :func:`with_stated` (ℓ, σ, expected, :class:`~sjf_core.predict._stated.StatedSize` or None) ->
  (ℓ, σ, expected): an explicit size (count or closed form) **dominates**: ℓ = w·ln(1 + stated) +
  (1 − w)·ℓ, w = :data:`STATED_WEIGHT`, σ = :data:`STATED_SIGMA`, expected = exp(ℓ) − 1; a verbosity
  cue **only shifts** ℓ and the expectation by :data:`CUE_SHIFT` (measured below).
* :func:`class_probs` (ℓ, σ, bounds) -> (P(Short), P(Medium), P(Long)) of ln(1 + tokens) ~ N(ℓ, σ).
* :func:`base_many` / :func:`class_probs_many`: the same over arrays.
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from sjf_core.predict._model_file import calibrated_log1p, spread_at

__all__ = ["Knots", "base_one", "base_many", "with_stated", "class_probs", "class_probs_many", "STATED_WEIGHT",
           "STATED_SIGMA", "CUE_SHIFT"]

#: Weight of an explicit stated size against the model's location (ln scale): it dominates.
STATED_WEIGHT = 0.92
#: Spread of ln(1 + tokens) around an explicit size: answers to prompts of ``../shared/data`` that
#: state a word count lie within about ±0.6 of it (issue 23; docs/predictor.md).
STATED_SIGMA = 0.6
#: Shift of ln(1 + tokens) for a verbosity cue: the mean out-of-family residual of the model on the
#: prompts of ``../shared/data`` with the cue (LOSO, issue 23): −0.08 "brief", +0.11 "in detail".
#: Small because the model already reads these words.
CUE_SHIFT = {-1: -0.08, 1: 0.11}
_SQRT2 = math.sqrt(2.0)


def _interp_one(x: float, xs, ys) -> float:
    """Piecewise-linear ``ys`` at ``x`` through ``xs``, continued with the end slopes."""
    if x <= xs[0]:
        return ys[0] + (x - xs[0]) * (ys[1] - ys[0]) / (xs[1] - xs[0])
    if x >= xs[-1]:
        return ys[-1] + (x - xs[-1]) * (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    i = bisect.bisect_right(xs, x)
    return ys[i - 1] + (x - xs[i - 1]) * (ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1])


class Knots:
    """Plain-float copies of a model's σ and calibration knots (the single-prompt path avoids numpy)."""

    def __init__(self, info):
        self.s = info.log_sigma
        self.cal = None if info.calibration is None else tuple([float(v) for v in a] for a in info.calibration)
        self.spread = None if info.spread is None else tuple([float(v) for v in a] for a in info.spread)


def base_one(mu: float, k: Knots) -> tuple[float, float, float]:
    """(ℓ, σ, expected tokens) of one model output μ, with the model's :class:`Knots` (module docstring)."""
    s = k.s
    le = _interp_one(mu, *k.cal) if k.cal is not None else None
    if k.spread is not None:
        xs, meds, sds = k.spread
        loc = _interp_one(mu, xs, meds)
        sig = sds[0] if mu <= xs[0] else sds[-1] if mu >= xs[-1] else _interp_one(mu, xs, sds)
        expected = math.expm1(le) if le is not None else math.expm1(loc + 0.5 * sig * sig)
        return loc, sig, max(0.0, expected)
    if le is not None:
        return le - 0.5 * s * s, s, max(0.0, math.expm1(le))
    return mu, s, max(0.0, math.expm1(mu + 0.5 * s * s))


def base_many(mu: np.ndarray, info) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`base_one` over an array of μ: (ℓ [N], σ [N], expected [N]) float64."""
    mu = np.asarray(mu, dtype=np.float64)
    s = info.log_sigma
    le = calibrated_log1p(mu, info.calibration) if info.calibration is not None else None
    if info.spread is not None:
        loc, sig = spread_at(mu, info.spread)
        expected = np.expm1(le) if le is not None else np.expm1(loc + 0.5 * sig * sig)
        return loc, sig, np.maximum(expected, 0.0)
    sig = np.full(mu.shape, s)
    if le is not None:
        return le - 0.5 * s * s, sig, np.maximum(np.expm1(le), 0.0)
    return mu, sig, np.maximum(np.expm1(mu + 0.5 * s * s), 0.0)


def with_stated(loc: float, sig: float, expected: float, size) -> tuple[float, float, float]:
    """The estimate with a stated size ``size`` (:class:`~sjf_core.predict._stated.StatedSize` or
    None) taken into account (module docstring)."""
    if size is None:
        return loc, sig, expected
    if size.kind == "vague":
        d = CUE_SHIFT.get(size.direction, 0.0)
        return loc + d, sig, expected * math.exp(d)
    loc = STATED_WEIGHT * math.log1p(size.tokens) + (1.0 - STATED_WEIGHT) * loc
    return loc, STATED_SIGMA, math.expm1(loc)


def class_probs(loc: float, sig: float, bounds: tuple) -> tuple[float, float, float]:
    """(P(Short), P(Medium), P(Long)) for ln(1 + tokens) ~ Normal(loc, sig)."""
    p_ge_lo = 0.5 * math.erfc((math.log1p(bounds[0]) - loc) / sig / _SQRT2)
    p_ge_hi = 0.5 * math.erfc((math.log1p(bounds[1]) - loc) / sig / _SQRT2)
    return 1.0 - p_ge_lo, p_ge_lo - p_ge_hi, p_ge_hi


def class_probs_many(loc: np.ndarray, sig: np.ndarray, bounds: tuple) -> np.ndarray:
    """:func:`class_probs` over arrays: float64 [N, 3]."""
    out = np.empty((len(loc), 3))
    for i, (l_, s_) in enumerate(zip(np.asarray(loc, float).tolist(), np.asarray(sig, float).tolist())):
        out[i] = class_probs(l_, s_, bounds)
    return out
