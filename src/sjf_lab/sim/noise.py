"""Simulated length predictors: what the scheduler believes about each job.

Kinds:

* ``"class"``: a classifier with a target **ranking accuracy** A (paper Eq. 2). A
  latent score s = μ_c + σ·ε with μ = (0, ½, 1) for Short/Medium/Long and
  ε ~ N(0, 1), so that P(s_Long > s_Short) = Φ(1/(σ√2)) = A. The probabilities
  are the exact Bayes posterior of the class given s (equal-variance Gaussians,
  priors = class mix), so P(Long) is monotone in s and the label is its argmax.
  A = 1 gives one-hot class probabilities (perfect classes, no order inside a
  class); A = 0.5 is a random ranking (σ = 50).
* ``"tokens"``: a regressor with **multiplicative error** e: predicted tokens =
  true × U(1 − e, 1 + e) (seed 003 sweeps e up to 60%); probabilities are the
  one-hot class of the predicted tokens.
* ``"oracle"``: true tokens and true class (for the ``oracle`` policy).
* ``"none"``: no prediction (every request unscored: FCFS order, fail-open).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from sjf_core.policy._entry import class_of_tokens
from sjf_core.predict._prediction import TYPICAL_TOKENS, Prediction
from sjf_lab.sim.workload import Workload

_MU = np.array([0.0, 0.5, 1.0])
_CLASS_TOKENS = np.array([0.0, 500.0, 1000.0])  # tokens that map to each class (for Eq. 2)


def sigma_for_accuracy(accuracy: float) -> float:
    """Noise σ of the latent score giving ranking accuracy ``accuracy`` (0.5 → 50, 1 → 0)."""
    if accuracy >= 1:
        return 0.0
    if accuracy <= 0.5:
        return 50.0
    return 1.0 / (math.sqrt(2.0) * norm.ppf(accuracy))


@dataclass(frozen=True)
class PredictorModel:
    """A simulated predictor (see module docstring).

    Attributes:
        kind: "class", "tokens", "oracle" or "none".
        accuracy: target ranking accuracy for "class", in [0.5, 1].
        mult_error: multiplicative error e for "tokens", in [0, 1).
    """

    kind: str = "class"
    accuracy: float = 1.0
    mult_error: float = 0.0

    def __post_init__(self):
        if self.kind not in ("class", "tokens", "oracle", "none"):
            raise ValueError(f"unknown predictor kind {self.kind!r}")
        if not (0.5 <= self.accuracy <= 1):
            raise ValueError("accuracy must be in [0.5, 1]")
        if not (0 <= self.mult_error < 1):
            raise ValueError("mult_error must be in [0, 1)")

    def label(self) -> str:
        """Short human-readable name, e.g. "acc=0.85" or "mult=0.40"."""
        if self.kind == "class":
            return f"acc={self.accuracy:.2f}"
        if self.kind == "tokens":
            return f"mult={self.mult_error:.2f}"
        return self.kind

    def predict(self, wl: Workload, rng: np.random.Generator, mix=None) -> tuple[list[Prediction | None], np.ndarray]:
        """Predictions for every job of ``wl`` and their P(Long)-like scores.

        Returns:
            (list of Prediction or None per job, float64 [n] scores, higher = longer).
        """
        n = len(wl)
        if self.kind == "none":
            return [None] * n, np.zeros(n)
        if self.kind == "oracle":
            probs = np.eye(3)[wl.klass]
            return [Prediction.from_probs(p, t) for p, t in zip(probs, wl.tokens)], wl.tokens.astype(float)
        if self.kind == "tokens":
            pred = wl.tokens * rng.uniform(1 - self.mult_error, 1 + self.mult_error, size=n)
            out = []
            for t in pred:
                p = [0.0, 0.0, 0.0]
                p[class_of_tokens(t)] = 1.0
                out.append(Prediction.from_probs(p, float(t)))
            return out, pred
        sigma = sigma_for_accuracy(self.accuracy)
        if sigma == 0:
            probs = np.eye(3)[wl.klass]
            score = _MU[wl.klass]
        else:
            score = _MU[wl.klass] + sigma * rng.standard_normal(n)
            prior = np.full(3, 1 / 3) if mix is None else np.asarray(mix, dtype=float)
            logp = np.log(np.maximum(prior, 1e-12))[None, :] - (score[:, None] - _MU[None, :]) ** 2 / (2 * sigma * sigma)
            logp -= logp.max(axis=1, keepdims=True)
            probs = np.exp(logp)
            probs /= probs.sum(axis=1, keepdims=True)
        typical = np.asarray(TYPICAL_TOKENS)
        expected = probs @ typical
        return [Prediction.from_probs(p, e) for p, e in zip(probs, expected)], score


def measured_ranking_accuracy(scores: np.ndarray, klass: np.ndarray) -> float:
    """Paper Eq. 2 on simulated jobs: fraction of (Short, Long) pairs ordered correctly."""
    from sjf_core.predict._rank_metrics import ranking_accuracy

    return ranking_accuracy(scores, _CLASS_TOKENS[klass])[0]
