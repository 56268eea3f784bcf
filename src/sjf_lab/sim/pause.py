"""Pause rules for a serial backend: when to pause a running answer for a waiting request,
and when to resume it (issue 30 study; docs/preemption.md).

Contract. A rule sees, for each request, only what the live plugin sees: the prediction
(:class:`~sjf_core.predict._prediction.Prediction`, from the prompt), the request's
``max_tokens`` (a hard cap, when sent) and, once the answer runs, its **age** (answer
tokens streamed so far). From the prediction it builds a belief about the answer length
(:class:`LengthBelief`): ln(1 + tokens) ~ N(ℓ, σ²), with ℓ and σ solved from the predicted
P(Short) and P(Long) (the shipped regressor's class probabilities are exactly such a
log-normal's, :mod:`sjf_core.predict._estimate`), truncated at ``max_tokens``. Each rule gives a
**score** in tokens (lower = serve sooner) of a waiting request (age 0) and of a running or
paused answer (its age); the running answer R is paused for the best waiting request C when

    margin × score(C) + resume_cost_tokens(R) < score(R, age)

and the guard allows it (:class:`PauseGuard`: at most ``max_pauses`` pauses per answer, no
pause before ``min_run_tokens`` answer tokens, and once an answer has been paused
``max_paused_s`` seconds in all it goes before every waiter at the next free slot). A paused
answer resumes at a free slot unless the best waiting request would pause it by the same
test. Rules (``PauseRule.name``):

* ``remaining`` (the issue's first simulation): score = predicted tokens − age, and past
  the prediction "as long again" (= age);
* ``overdue``: pauses only an answer past ``overdue`` × its predicted tokens; score = the
  belief's mean residual length E[X − a | X > a] (the evidence of the age: a heavy-tailed
  answer that ran long is expected to run longer);
* ``gittins``: the Gittins index of the belief (Aalto, Ayesta, Righter 2009; Scully et al.
  2021) as a rank: inf over Δ of E[min(X − a, Δ) | X > a] / P(X − a ≤ Δ | X > a);
* ``srpt`` (reference, needs true lengths): score = true remaining tokens.

Study code: the simulator (:mod:`sjf_lab.sim.preempt`) is its only user; the waiting order
stays the live policy's (the same :class:`~sjf_core.policy._policies.Policy` objects).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

from sjf_core.policy._entry import LONG_MIN_TOKENS, SHORT_MAX_TOKENS
from sjf_core.predict._prediction import Prediction

__all__ = ["LengthBelief", "PauseGuard", "PauseRule", "RULES", "belief_of"]

_LN_LO = math.log1p(SHORT_MAX_TOKENS)
_LN_HI = math.log1p(LONG_MIN_TOKENS)
#: Horizon offsets Δ (tokens) over which the Gittins rank and the residual mean are taken.
_DELTAS = np.concatenate(([0.0], np.geomspace(1.0, 65536.0, 96)))
#: Cap of a belief when the request sent no max_tokens (tokens).
DEFAULT_CAP = 16384


@dataclass(frozen=True)
class LengthBelief:
    """ln(1 + answer tokens) ~ N(loc, sig²), capped at ``cap`` tokens; ``expected`` = the
    prediction's expected tokens (capped)."""

    loc: float
    sig: float
    expected: float
    cap: float = DEFAULT_CAP

    def survival(self, x: np.ndarray) -> np.ndarray:
        """P(X > x) for tokens ``x`` (0 at and past the cap)."""
        s = ndtr((self.loc - np.log1p(np.maximum(x, 0.0))) / self.sig)
        return np.where(x >= self.cap, 0.0, s)

    def _tail(self, age: float):
        xs = np.minimum(age + _DELTAS, self.cap)
        s = self.survival(xs)
        s[0] = max(float(s[0]), 1e-300)
        integ = np.concatenate(([0.0], np.cumsum((s[1:] + s[:-1]) * 0.5 * np.diff(xs))))
        return s, integ

    def residual(self, age: float) -> float:
        """E[X − age | X > age] (tokens; 0 at the cap)."""
        if age >= self.cap:
            return 0.0
        s, integ = self._tail(age)
        return float(integ[-1] / s[0])

    def gittins(self, age: float) -> float:
        """The Gittins rank at ``age`` (tokens; lower = serve sooner)."""
        if age >= self.cap:
            return 0.0
        s, integ = self._tail(age)
        done = s[0] - s[1:]
        ok = done > 1e-12 * s[0]
        if not ok.any():
            return float(integ[-1] / s[0])
        return float(np.min(integ[1:][ok] / done[ok]))


def belief_of(pred: Prediction | None, max_tokens: int | None = None, sig_floor: float = 0.3,
              sig_ceil: float = 3.0) -> LengthBelief:
    """The :class:`LengthBelief` of a prediction (module docstring); None: a wide belief
    around 400 tokens (an unscored request)."""
    cap = float(max_tokens) if max_tokens else float(DEFAULT_CAP)
    if pred is None:
        return LengthBelief(math.log1p(400.0), 1.5, min(400.0, cap), cap)
    eps = 1e-6
    z_s = float(ndtri(min(max(1.0 - pred.p_short, eps), 1 - eps)))
    z_l = float(ndtri(min(max(pred.p_long, eps), 1 - eps)))
    gap = z_s - z_l
    sig = (_LN_HI - _LN_LO) / gap if gap > 1e-6 else sig_ceil
    sig = min(max(sig, sig_floor), sig_ceil)
    loc = _LN_LO + sig * z_s if gap > 1e-6 else math.log1p(max(pred.expected_tokens, 0.0))
    return LengthBelief(loc, sig, min(max(float(pred.expected_tokens), 0.0), cap), cap)


@dataclass(frozen=True)
class PauseGuard:
    """Bounds on pausing one answer: ``max_pauses`` pauses at most, none before it streamed
    ``min_run_tokens`` tokens since it (re)started, and after ``max_paused_s`` seconds paused
    in all it resumes before every waiter at the next free slot."""

    max_pauses: int = 1
    max_paused_s: float = 60.0
    min_run_tokens: int = 16


@dataclass(frozen=True)
class PauseRule:
    """One pause rule (module docstring). ``name``: "remaining", "overdue", "gittins", "srpt"
    or "off"; ``margin`` ≥ 1; ``overdue``: the factor of "overdue"."""

    name: str = "off"
    margin: float = 2.0
    overdue: float = 1.0
    guard: PauseGuard = PauseGuard()

    def __post_init__(self):
        if self.name not in RULES:
            raise ValueError(f"unknown pause rule {self.name!r}; choose one of {sorted(RULES)}")
        if not self.margin >= 1.0:
            raise ValueError("margin must be >= 1")

    @property
    def enabled(self) -> bool:
        return self.name != "off"

    def score(self, belief: LengthBelief, age: float, true_tokens: float | None = None) -> float:
        """Score in tokens at ``age`` (lower = sooner)."""
        if self.name == "srpt":
            return max(float(true_tokens) - age, 0.0)
        if self.name == "gittins":
            return belief.gittins(age)
        if self.name == "overdue":
            return belief.residual(age) if age > 0 else belief.expected
        left = belief.expected - age
        return left if left > 0 else float(age)  # "remaining": past the prediction, as long again

    def may_pause(self, belief: LengthBelief, age: float) -> bool:
        """True when the rule lets an answer of ``age`` tokens be paused at all."""
        if self.name == "overdue":
            return age >= self.overdue * max(belief.expected, 1.0)
        return True

    def beats(self, waiting_score: float, running_score: float, resume_cost_tokens: float) -> bool:
        """True when a waiter of ``waiting_score`` should go before an answer of ``running_score``."""
        return self.margin * waiting_score + resume_cost_tokens < running_score


RULES = ("off", "remaining", "overdue", "gittins", "srpt")
