"""Scheduling policies: one implementation each, shared by every queue store and the simulator.

A policy turns a :class:`~sjf_core.predict._prediction.Prediction` and the request's
metadata into an ordering key (lower is served sooner) and makes the pending
structure of one backend queue (:meth:`Policy.new_pending`). The live asyncio
queue, the Redis store (score = :meth:`Policy.key`) and ``sjf simulate`` all use
these objects; none keeps its own copy of a policy.

Policies (``make_policy(name, **options)``):

* ``fcfs``: arrival order (τ off).
* ``sjf``: ascending P(Long), as in the paper (§3.3–3.4).
* ``sjf-tokens``: ascending expected answer tokens Σ p_c × typical tokens of c,
  capped by the request's ``max_tokens`` / ``max_completion_tokens``.
* ``fair``: adaptive deficit round robin across predicted Short/Medium/Long,
  quanta from observed service times (seed 003); P(Long) order within a class.
* ``oracle``: ascending *true* answer tokens (``prediction.expected_tokens`` must
  be the real length: simulator and benchmarks with a trace only); τ off.

Options common to all: ``tau`` ("3x" × measured mean Short service time, seconds,
or "off": no guard), ``promotion`` (default :data:`sjf_core.config.DEFAULT_PROMOTION`; "work-bound",
"work-aging", "fcfs-bound", "strict" = the paper's rule, "one-in-k", "aging", "aged-sjf"), ``slowdown``/``work_slack`` (the served-work rules),
``max_wait_s`` (an absolute wait bound, any rule),
``k`` (one-in-k), ``horizon`` (aging horizon in multiples of τ).

Request metadata (:mod:`sjf_core.predict._meta`) acts on every policy the same way:

* **priority** (``metadata.sjf_priority`` / ``x-sjf-priority``, integer; LiteLLM's own
  ``priority`` field through the proxy plugin): higher is served first, as a strict
  band: every waiter of a higher band is dispatched before any waiter of a lower one,
  whatever its age, deadline or served-work bound; the starvation guard, deadlines,
  SJF order and fairness all act inside the top non-empty band (:mod:`sjf_core.policy._pending`).
* **deadline** (``metadata.sjf_deadline_s`` / ``x-sjf-deadline-s``, seconds from
  arrival): once the request's latest start time (deadline − its expected service
  time, observed per class) has come, it goes before everything else of its band,
  earliest latest-start first (EDF). A request is never dropped for missing its deadline.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from sjf_core._faults import note_fault
from sjf_core.policy._entry import LONG, MEDIUM, SHORT, Entry
from sjf_core.policy._pending import DRRPending, HeapPending, PendingQueue
from sjf_core.policy.promotion import (DEFAULT_AGING_HORIZON, DEFAULT_FCFS_FLOOR, DEFAULT_FCFS_SLACK, DEFAULT_SLOWDOWN,
                                       DEFAULT_WORK_SLACK, PromotionStrategy, make_promotion)
from sjf_core.predict._prediction import TYPICAL_TOKENS, Prediction
from sjf_core.policy._tau import TauConfig, TauEstimator

log = logging.getLogger("sjf_core.policy")

@dataclass(frozen=True)
class RequestMeta:
    """Scheduling metadata read from a request (never its text).

    Attributes:
        max_tokens: the request's ``max_tokens`` / ``max_completion_tokens`` cap
            (tokens), or None when absent or not a positive integer.
        priority: caller priority; higher is served first (default 0).
        deadline_s: relative deadline in seconds from arrival, or None.
        explicit_priority: True when the request sent a priority (defaults apply
            only when it did not, :class:`sjf_core.policy._tenants.IntentDefaults`).
        tenant: tenant id (hashed, :mod:`sjf_core.policy._tenants`), or None (the shared tenant).
        supersede: supersede key (``x-sjf-supersede``), or None: a newer request with
            the same key, backend and tenant replaces this one while it is queued.
    """

    max_tokens: int | None = None
    priority: int = 0
    deadline_s: float | None = None
    explicit_priority: bool = False
    tenant: str | None = None
    supersede: str | None = None


#: The metadata of a request that sent none (read-only; shared by make_entry).
_NO_META = RequestMeta()


class Policy:
    """Base class. Subclasses define :meth:`key`.

    Args:
        tau: τ setting (see :meth:`TauConfig.parse`): "3x", seconds, or "off".
        promotion: the starvation guard of the pending structure (None: the default,
            :data:`sjf_core.config.DEFAULT_PROMOTION`): "work-bound", "work-aging",
            "fcfs-bound", "strict" (paper §3.4, DESIGN.md invariant 4), "one-in-k", "aging",
            "aged-sjf" (one class each in :mod:`sjf_core.policy.promotion`, docs/scheduling.md).
        k: the k of the "one-in-k" promotion rule.
        initial_short_service_s: seed of the mean Short service time (seconds).
        horizon: "aging" horizon in multiples of τ (a Long that has waited
            ``horizon × τ`` ties with a fresh Short).
        slack, floor: "fcfs-bound" parameters.
        slowdown, work_slack: "work-bound" / "work-aging" parameters (> 0, >= 0).
        max_wait_s: absolute wait bound in seconds (any rule), or None.

    Raises:
        ValueError: bad τ, unknown promotion, or any rule option out of range (k,
            horizon, slack, floor, slowdown, work_slack, max_wait_s; each checked by the
            rule that owns it, whichever rule is chosen).
    """

    name = "base"
    #: Key distance between a typical Short and a typical Long (aging scale).
    key_span = 1.0

    def __init__(self, tau="3x", promotion: str | None = None, k: int = 2,
                 initial_short_service_s: float = 2.0, horizon: float = DEFAULT_AGING_HORIZON,
                 slack: float = DEFAULT_FCFS_SLACK, floor: float = DEFAULT_FCFS_FLOOR,
                 slowdown: float = DEFAULT_SLOWDOWN, work_slack: float = DEFAULT_WORK_SLACK,
                 max_wait_s: float | None = None):
        self.tau_config = TauConfig.parse(tau, initial_short_service_s)
        if promotion is None:
            from sjf_core.config import DEFAULT_PROMOTION  # config imports this module: not at import time

            promotion = DEFAULT_PROMOTION
        self.promotion = promotion
        self.k = k
        self.horizon = float(horizon)
        self.slack = float(slack)
        self.floor = float(floor)
        self.slowdown = float(slowdown)
        self.work_slack = float(work_slack)
        self.max_wait_s = None if max_wait_s is None else float(max_wait_s)
        self.new_pending()  # validate the options now

    # Neutral key for requests that could not be scored (fail-open, invariant 5).
    def fallback_key(self) -> float:
        """Ordering key of an unscored request: the middle of the key range."""
        return 0.5

    def key(self, prediction: Prediction, meta: RequestMeta) -> float:
        raise NotImplementedError

    def new_promotion(self) -> PromotionStrategy:
        """A fresh promotion strategy (:mod:`sjf_core.policy.promotion`) of this policy's
        rule and options, for one pending structure.

        Raises:
            ValueError: unknown rule or an option out of range (named in the message).
        """
        return make_promotion(self.promotion, k=self.k, key_span=self.key_span, horizon=self.horizon,
                              slack=self.slack, floor=self.floor, slowdown=self.slowdown,
                              work_slack=self.work_slack, max_wait_s=self.max_wait_s)

    def new_pending(self, tau: TauEstimator | None = None, service=None) -> PendingQueue:
        """A fresh pending structure for one backend queue (a heap in this policy's order,
        with :meth:`new_promotion`), with its own τ estimate and service statistics unless
        ``tau`` / ``service`` are given (shared: the per-tenant sub-queues of
        :class:`~sjf_core.policy._fair_share.TenantPending`)."""
        return HeapPending(tau or TauEstimator(self.tau_config), self.new_promotion(), service=service)

    def make_entry(self, seq: int, arrival: float, prediction: Prediction | None,
                   meta: RequestMeta | None = None) -> Entry:
        """The :class:`Entry` of one request (used by every queue store and the simulator).

        Never raises: a missing prediction, a policy error or a NaN key gives an
        unscored entry at :meth:`fallback_key` with ``fallback=True`` (fail-open,
        DESIGN.md invariant 5).

        Args:
            seq: arrival sequence number (final FCFS tie-break).
            arrival: arrival time in seconds on the queue's clock.
            prediction: the predicted length, or None (unscored).
            meta: request metadata (max_tokens, priority, deadline_s).
        """
        entry = Entry(seq, float(arrival))
        if meta is None:  # no metadata: priority 0, no deadline, tenant or supersede key (the defaults)
            meta = _NO_META
        else:
            try:
                entry.priority = int(meta.priority or 0)
            except (TypeError, ValueError):
                entry.priority = 0
            try:
                if meta.deadline_s is not None and float(meta.deadline_s) > 0:
                    entry.deadline = entry.arrival + float(meta.deadline_s)
            except (TypeError, ValueError):
                entry.deadline = None
            entry.tenant = meta.tenant if isinstance(meta.tenant, str) else None
            entry.supersede = meta.supersede if isinstance(meta.supersede, str) else None
        if prediction is not None:
            try:
                key = float(self.key(prediction, meta))
                if key == key:  # not NaN
                    entry.key = key
                    entry.klass = prediction.klass
                    entry.expected_tokens = float(prediction.expected_tokens)
                    return entry
            except Exception:
                note_fault(log, f"policy {self.name!r} could not key a request; it is unscored (FCFS key)")
        entry.key = self.fallback_key()
        entry.fallback = True
        return entry

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(tau={self.tau_config}, promotion={self.promotion!r}, "
                f"k={self.k}, horizon={self.horizon})")


class FCFSPolicy(Policy):
    """First-come, first-served: every key is equal, so arrival order decides."""

    name = "fcfs"

    def __init__(self, **kw):
        from sjf_core.config import TAU_OFF_PROMOTION

        kw["tau"] = "off"
        kw.setdefault("promotion", TAU_OFF_PROMOTION)  # irrelevant with τ off; the simplest rule
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
    key_span = TYPICAL_TOKENS[LONG] - TYPICAL_TOKENS[SHORT]

    def fallback_key(self) -> float:
        return 400.0

    def key(self, prediction: Prediction, meta: RequestMeta) -> float:
        tokens = float(prediction.expected_tokens)
        if meta.max_tokens is not None and meta.max_tokens > 0:
            tokens = min(tokens, float(meta.max_tokens))
        return tokens if math.isfinite(tokens) else self.fallback_key()


class FairPolicy(SJFPolicy):
    """Adaptive DRR across predicted Short/Medium/Long (seed 003), P(Long) order within a class.

    Args:
        weights: time-share weights of Short, Medium, Long (default equal: each
            backlogged class gets the same share of backend time).
        others: as :class:`Policy`.
    """

    name = "fair"

    def __init__(self, weights=(1.0, 1.0, 1.0), **kw):
        self.weights = tuple(float(w) for w in weights)
        super().__init__(**kw)

    def new_pending(self, tau: TauEstimator | None = None, service=None) -> PendingQueue:
        return DRRPending(tau or TauEstimator(self.tau_config), self.new_promotion(), weights=self.weights,
                          service=service)


class OraclePolicy(Policy):
    """Oracle SJF: ascending *true* answer tokens; τ off by default.

    The ceiling for non-preemptive admission (DESIGN.md). It needs a prediction
    whose ``expected_tokens`` is the real answer length, which only the simulator
    and trace-driven benchmarks have.
    """

    name = "oracle"
    key_span = TYPICAL_TOKENS[LONG] - TYPICAL_TOKENS[SHORT]

    def __init__(self, **kw):
        from sjf_core.config import TAU_OFF_PROMOTION

        kw.setdefault("tau", "off")
        kw.setdefault("promotion", TAU_OFF_PROMOTION)  # irrelevant with τ off
        super().__init__(**kw)

    def fallback_key(self) -> float:
        return TYPICAL_TOKENS[MEDIUM]

    def key(self, prediction: Prediction, meta: RequestMeta) -> float:
        t = float(prediction.expected_tokens)
        return t if math.isfinite(t) else self.fallback_key()


POLICIES: dict[str, type[Policy]] = {
    FCFSPolicy.name: FCFSPolicy,
    SJFPolicy.name: SJFPolicy,
    SJFTokensPolicy.name: SJFTokensPolicy,
    FairPolicy.name: FairPolicy,
    OraclePolicy.name: OraclePolicy,
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


__all__ = ["Policy", "FCFSPolicy", "SJFPolicy", "SJFTokensPolicy", "FairPolicy", "OraclePolicy", "POLICIES",
           "make_policy", "RequestMeta", "MEDIUM"]
