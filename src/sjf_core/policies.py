"""Scheduling policies: one implementation each, shared by every queue store and the simulator.

A policy turns a :class:`~sjf_core.prediction.Prediction` and the request's
metadata into an ordering key (lower is served sooner) and makes the pending
structure of one backend queue (:meth:`Policy.new_pending`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .entry import MEDIUM
from .pending import HeapPending, PendingQueue
from .prediction import Prediction
from .tau import TauConfig, TauEstimator


@dataclass(frozen=True)
class RequestMeta:
    """Scheduling metadata read from a request (never its text).

    Attributes:
        max_tokens: the request's ``max_tokens`` / ``max_completion_tokens`` cap
            (tokens), or None when absent or not a positive integer.
        priority: caller priority; higher is served first (default 0).
        deadline_s: relative deadline in seconds from arrival, or None.
    """

    max_tokens: int | None = None
    priority: int = 0
    deadline_s: float | None = None


class Policy:
    """Base class. Subclasses define :meth:`key`.

    Args:
        tau: τ setting (see :meth:`TauConfig.parse`): "3x", seconds, or "off".
        promotion: aged-waiter promotion rule of :class:`HeapPending`.
        k: the k of the "one-in-k" promotion rule.
    """

    name = "base"

    def __init__(self, tau="3x", promotion: str = "strict", k: int = 2, initial_short_service_s: float = 2.0):
        self.tau_config = TauConfig.parse(tau, initial_short_service_s)
        self.promotion = promotion
        self.k = k

    # Neutral key for requests that could not be scored (fail-open, invariant 5).
    def fallback_key(self) -> float:
        """Ordering key of an unscored request: the middle of the key range."""
        return 0.5

    def key(self, prediction: Prediction, meta: RequestMeta) -> float:
        raise NotImplementedError

    def new_pending(self) -> PendingQueue:
        """A fresh pending structure (with its own τ estimate) for one backend queue."""
        return HeapPending(TauEstimator(self.tau_config), self.promotion, self.k)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(tau={self.tau_config}, promotion={self.promotion!r}, k={self.k})"


class FCFSPolicy(Policy):
    """First-come, first-served: every key is equal, so arrival order decides."""

    name = "fcfs"

    def __init__(self, **kw):
        kw["tau"] = "off"
        super().__init__(**kw)

    def key(self, prediction, meta) -> float:
        return 0.0

    def fallback_key(self) -> float:
        return 0.0


class SJFPolicy(Policy):
    """Ascending P(Long), as in the paper (§3.3, §3.4)."""

    name = "sjf"

    def key(self, prediction: Prediction, meta: RequestMeta) -> float:
        return float(prediction.p_long)


class SJFTokensPolicy(Policy):
    """Ascending expected answer tokens, capped by the request's ``max_tokens``.

    ``max_tokens`` is an exact upper bound on the answer, which the paper ignores.
    """

    name = "sjf-tokens"

    def fallback_key(self) -> float:
        return 400.0

    def key(self, prediction: Prediction, meta: RequestMeta) -> float:
        tokens = float(prediction.expected_tokens)
        if meta.max_tokens is not None and meta.max_tokens > 0:
            tokens = min(tokens, float(meta.max_tokens))
        return tokens if math.isfinite(tokens) else self.fallback_key()


POLICIES: dict[str, type[Policy]] = {
    FCFSPolicy.name: FCFSPolicy,
    SJFPolicy.name: SJFPolicy,
    SJFTokensPolicy.name: SJFTokensPolicy,
}


def make_policy(spec="sjf", **kw) -> Policy:
    """Build a policy from a name ("fcfs", "sjf", "sjf-tokens", ...) or return a Policy as is.

    Raises:
        ValueError: unknown policy name.
    """
    if isinstance(spec, Policy):
        return spec
    try:
        cls = POLICIES[str(spec).strip().lower()]
    except KeyError:
        raise ValueError(f"unknown policy {spec!r}; choose one of {sorted(POLICIES)}") from None
    return cls(**kw)


__all__ = ["Policy", "FCFSPolicy", "SJFPolicy", "SJFTokensPolicy", "POLICIES", "make_policy", "RequestMeta", "MEDIUM"]
