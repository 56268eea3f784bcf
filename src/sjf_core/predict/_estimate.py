"""From a regressor's output μ to the answer-length estimate: location and spread of
ln(1 + tokens), class probabilities, expected tokens, and the stated size's part in them (issue 23).

Contract (pure functions of floats; no text). An :class:`Estimate` is (location ℓ, spread σ,
expected tokens, z_short, z_long) where P(tokens ≥ Short bound) = Φ(z_short) and
P(tokens ≥ Long bound) = Φ(z_long):

* :func:`base_one` (μ, :class:`Knots` of a :class:`~sjf_core.predict._model_file.ModelInfo`) and
  :func:`base_many` (arrays): with a spread calibration (``sjf.calibration_spread``) ℓ and σ are
  its conditional median and spread of ln(1 + tokens) at μ, and z_short / z_long are
  interpolated between the knots' (median − bound) / spread, each made strictly increasing in μ,
  so that P(Long) rises with μ as ``expected_tokens`` does (the ``sjf`` and ``sjf-tokens`` orders
  agree); else ℓ = ln(1 + E) − σ²/2 with the model's σ (``sjf.log_sigma``). Expected tokens come
  from the mean map (``sjf.calibration``) when there is one, else exp(ℓ + σ²/2) − 1.
* :func:`with_stated` (:class:`Estimate`, :class:`~sjf_core.predict._stated.StatedSize` or None):
  an explicit size (count or closed form) **dominates**: ℓ = w·ln(1 + stated) + (1 − w)·ℓ,
  w = :data:`STATED_WEIGHT`, σ = :data:`STATED_SIGMA`, expected = exp(ℓ) − 1; a verbosity cue
  **only shifts** ℓ, z and the expectation by :data:`CUE_SHIFT` (measured below).
* :func:`class_probs` / :func:`class_probs_many` -> (P(Short), P(Medium), P(Long)).
"""

from __future__ import annotations

import bisect
import math
from typing import NamedTuple

import numpy as np

from sjf_core.predict._calibration import pav
from sjf_core.predict._model_file import calibrated_log1p, spread_at

__all__ = ["Knots", "Estimate", "base_one", "base_many", "with_stated", "class_probs", "class_probs_many",
           "STATED_WEIGHT", "STATED_SIGMA", "CUE_SHIFT"]

#: Weight of an explicit stated size against the model's location (ln scale): it dominates.
STATED_WEIGHT = 0.92
#: Spread of ln(1 + tokens) around an explicit size, for the class probabilities (issue 23;
#: docs/predictor.md "Stated answer sizes").
STATED_SIGMA = 0.6
#: Shift of ln(1 + tokens) for a verbosity cue: the mean out-of-family residual of the model on the
#: prompts of the public conversation data (docs/data.md) with the cue (LOSO, issue 23): −0.08 "brief", +0.11 "in detail".
#: Small because the model already reads these words.
CUE_SHIFT = {-1: -0.08, 1: 0.11}
_SQRT2 = math.sqrt(2.0)


class Estimate(NamedTuple):
    loc: float
    sig: float
    expected: float
    z_short: float
    z_long: float


def _interp_one(x: float, xs, ys) -> float:
    """Piecewise-linear ``ys`` at ``x`` through ``xs``, continued with the end slopes."""
    if x <= xs[0]:
        return ys[0] + (x - xs[0]) * (ys[1] - ys[0]) / (xs[1] - xs[0])
    if x >= xs[-1]:
        return ys[-1] + (x - xs[-1]) * (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    i = bisect.bisect_right(xs, x)
    return ys[i - 1] + (x - xs[i - 1]) * (ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1])


def _increasing(z: np.ndarray, min_step: float = 1e-4) -> list[float]:
    """``z`` made strictly increasing (pool-adjacent-violators, then a minimum step)."""
    out = [float(v) for v in pav(z, np.ones(len(z)))]
    for i in range(1, len(out)):
        out[i] = max(out[i], out[i - 1] + min_step)
    return out


class Knots:
    """A model's σ, bounds and calibration knots as plain floats (the single-prompt path avoids numpy)."""

    def __init__(self, info):
        self.s = info.log_sigma
        self.ln_lo, self.ln_hi = math.log1p(info.bounds[0]), math.log1p(info.bounds[1])
        self.cal = None if info.calibration is None else tuple([float(v) for v in a] for a in info.calibration)
        self.spread = None
        if info.spread is not None:
            xs, meds, sds = (np.asarray(a, dtype=np.float64) for a in info.spread)
            self.spread = ([float(v) for v in xs], [float(v) for v in meds], [float(v) for v in sds],
                           _increasing((meds - self.ln_lo) / sds), _increasing((meds - self.ln_hi) / sds))


def base_one(mu: float, k: Knots) -> Estimate:
    """The model's :class:`Estimate` at output μ (module docstring)."""
    s = k.s
    le = _interp_one(mu, *k.cal) if k.cal is not None else None
    if k.spread is not None:
        xs, meds, sds, zs, zl = k.spread
        loc = _interp_one(mu, xs, meds)
        sig = sds[0] if mu <= xs[0] else sds[-1] if mu >= xs[-1] else _interp_one(mu, xs, sds)
        expected = math.expm1(le) if le is not None else math.expm1(loc + 0.5 * sig * sig)
        return Estimate(loc, sig, max(0.0, expected), _interp_one(mu, xs, zs), _interp_one(mu, xs, zl))
    loc = le - 0.5 * s * s if le is not None else mu
    expected = math.expm1(le) if le is not None else math.expm1(mu + 0.5 * s * s)
    return Estimate(loc, s, max(0.0, expected), (loc - k.ln_lo) / s, (loc - k.ln_hi) / s)


def base_many(mu: np.ndarray, info, k: Knots) -> tuple[np.ndarray, ...]:
    """:func:`base_one` over an array of μ: (ℓ, σ, expected, z_short, z_long), float64 [N] each."""
    mu = np.asarray(mu, dtype=np.float64)
    s = info.log_sigma
    le = calibrated_log1p(mu, info.calibration) if info.calibration is not None else None
    if k.spread is not None:
        xs, _, _, zs, zl = k.spread
        loc, sig = spread_at(mu, info.spread)
        expected = np.expm1(le) if le is not None else np.expm1(loc + 0.5 * sig * sig)
        knots = (np.asarray(xs), np.asarray(zs)), (np.asarray(xs), np.asarray(zl))
        return (loc, sig, np.maximum(expected, 0.0), calibrated_log1p(mu, knots[0]), calibrated_log1p(mu, knots[1]))
    loc = le - 0.5 * s * s if le is not None else mu
    expected = np.expm1(le) if le is not None else np.expm1(mu + 0.5 * s * s)
    return loc, np.full(mu.shape, s), np.maximum(expected, 0.0), (loc - k.ln_lo) / s, (loc - k.ln_hi) / s


def with_stated(est: Estimate, size, k: Knots) -> Estimate:
    """``est`` with a stated size ``size`` (:class:`~sjf_core.predict._stated.StatedSize` or None)
    taken into account (module docstring)."""
    if size is None:
        return est
    if size.kind == "vague":
        d = CUE_SHIFT.get(size.direction, 0.0)
        return Estimate(est.loc + d, est.sig, est.expected * math.exp(d), est.z_short + d / est.sig,
                        est.z_long + d / est.sig)
    loc = STATED_WEIGHT * math.log1p(size.tokens) + (1.0 - STATED_WEIGHT) * est.loc
    return Estimate(loc, STATED_SIGMA, math.expm1(loc), (loc - k.ln_lo) / STATED_SIGMA,
                    (loc - k.ln_hi) / STATED_SIGMA)


def class_probs(est: Estimate) -> tuple[float, float, float]:
    """(P(Short), P(Medium), P(Long)) of an :class:`Estimate`."""
    p_ge_lo = 0.5 * math.erfc(-est.z_short / _SQRT2)
    p_ge_hi = min(p_ge_lo, 0.5 * math.erfc(-est.z_long / _SQRT2))
    return 1.0 - p_ge_lo, p_ge_lo - p_ge_hi, p_ge_hi


def class_probs_many(z_short: np.ndarray, z_long: np.ndarray) -> np.ndarray:
    """:func:`class_probs` over arrays of z: float64 [N, 3]."""
    out = np.empty((len(z_short), 3))
    for i, (a, b) in enumerate(zip(np.asarray(z_short, float).tolist(), np.asarray(z_long, float).tolist())):
        out[i] = class_probs(Estimate(0.0, 1.0, 0.0, a, b))
    return out
