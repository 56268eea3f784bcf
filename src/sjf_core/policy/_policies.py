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
or "off": no guard), ``promotion`` (default :data:`sjf_core.settings.DEFAULT_PROMOTION`; "work-bound",
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
from typing import Any, Sequence

from sjf_core._faults import note_fault
from sjf_core.settings import (DEFAULT_POLICY, DEFAULT_PROMOTION, DEFAULT_SHORT_SERVICE_S, DEFAULT_TAU, TAU_OFF_PROMOTION,
                             PromotionSettings)
from sjf_core.policy._drr import class_weights
from sjf_core.policy._entry import LONG, MEDIUM, SHORT, Entry
from sjf_core.policy._pending import DRRPending, HeapPending, PendingQueue
from sjf_core.policy._tau import TauConfig, TauEstimator
from sjf_core.policy.promotion import PromotionStrategy, build_rule, check_settings
from sjf_core.predict._meta import RequestMeta
from sjf_core.predict._prediction import TYPICAL_TOKENS, Prediction

log = logging.getLogger("sjf_core.policy")


#: The metadata of a request that sent none (read-only; shared by make_entry).
_NO_META = RequestMeta()


class Policy:
    """Base class. Subclasses define :meth:`key`.

    Args:
        tau: τ setting (see :meth:`TauConfig.parse`): "3x", seconds, or "off"; None: the
            policy's default (:data:`sjf_core.settings.DEFAULT_TAU`; "off" for "oracle"; "fcfs"
            always runs with τ off).
        promotion: the starvation guard: :class:`~sjf_core.settings.PromotionSettings` (its
            rule and the rules' parameters, checked when made), or a rule name, or None:
            the policy's default rule (:data:`sjf_core.settings.DEFAULT_PROMOTION`; "strict"
            for the policies with τ off). One class per rule in :mod:`sjf_core.policy.promotion`.
        initial_short_service_s: seed of the mean Short service time (s); None: the default.

    Raises:
        ValueError: a bad τ, or an unknown rule / a rule option out of range.
    """

    name = "base"
    #: Key distance between a typical Short and a typical Long (aging scale).
    key_span = 1.0
    #: τ when none is given (None: :data:`sjf_core.settings.DEFAULT_TAU`).
    default_tau: Any = None
    #: τ this policy always runs with, whatever is given (None: the given one).
    fixed_tau: Any = None
    #: Promotion rule when the settings name none (None: :data:`sjf_core.settings.DEFAULT_PROMOTION`).
    default_rule: str | None = None
    #: True for a yardstick that needs each request's true answer length (only the simulator
    #: and the trace benchmarks have it): a live queue refuses it (:func:`check_live_policy`).
    needs_true_lengths = False

    def __init__(self, tau: Any = None, promotion: "PromotionSettings | str | None" = None,
                 initial_short_service_s: float | None = None):
        tau = self.fixed_tau if self.fixed_tau is not None else tau if tau is not None else self.default_tau
        self.tau_config = TauConfig.parse(DEFAULT_TAU if tau is None else tau,
                                          DEFAULT_SHORT_SERVICE_S if initial_short_service_s is None
                                          else initial_short_service_s)
        #: the starvation guard's settings (checked here; nothing is built until a queue asks)
        self.promotion_settings = PromotionSettings.of(promotion)
        check_settings(self.promotion_settings)
        #: the rule's name
        self.promotion: str = self.promotion_settings.rule or self.default_rule or DEFAULT_PROMOTION

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
        return build_rule(self.promotion, self.promotion_settings, self.key_span)

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
        return f"{type(self).__name__}(tau={self.tau_config}, promotion={self.promotion!r}, {self.promotion_settings})"


class FCFSPolicy(Policy):
    """First-come, first-served: every key is equal, so arrival order decides."""

    name = "fcfs"
    fixed_tau = "off"
    default_rule = TAU_OFF_PROMOTION  # irrelevant with τ off; the simplest rule

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
        tau, promotion, initial_short_service_s: as :class:`Policy`.
        weights: time-share weights of Short, Medium, Long (each > 0; None: equal, each
            backlogged class gets the same share of backend time).
    """

    name = "fair"

    def __init__(self, tau: Any = None, promotion: "PromotionSettings | str | None" = None,
                 initial_short_service_s: float | None = None, weights: Sequence[float] | None = None):
        super().__init__(tau, promotion, initial_short_service_s)
        self.weights = class_weights((1.0, 1.0, 1.0) if weights is None else weights)

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
    default_tau = "off"
    default_rule = TAU_OFF_PROMOTION  # irrelevant with τ off
    needs_true_lengths = True

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


#: The policies a live queue (a proxy, a wrapped client) can run: all but the yardsticks.
LIVE_POLICIES = tuple(sorted(n for n, c in POLICIES.items() if not c.needs_true_lengths))


def check_live_policy(spec: Any) -> None:
    """Raises ValueError unless ``spec`` is a Policy object or the name of a policy a live
    queue can run (:data:`LIVE_POLICIES`, the only choices the message offers). The config
    boundary's check (:mod:`sjf_core.config._build`): "oracle" would order live requests by
    the prediction with the starvation guard off, not by their true lengths."""
    if isinstance(spec, Policy):
        return
    cls = POLICIES.get(str(spec).strip().lower())
    choose = f"choose one of {list(LIVE_POLICIES)}"
    if cls is None:
        raise ValueError(f"unknown policy {spec!r}; {choose}")
    if cls.needs_true_lengths:
        raise ValueError(f"{cls.name!r} orders by each request's true answer length, which only the simulator and "
                         f"the trace benchmarks know (sjf_lab.bench.oracle); live, it would order by the prediction "
                         f"with no starvation guard; {choose}")


def make_policy(spec: Any = DEFAULT_POLICY, *, tau: Any = None, promotion: "PromotionSettings | str | None" = None,
                initial_short_service_s: float | None = None, weights: Sequence[float] | None = None) -> Policy:
    """Build a policy from a name ("fcfs", "sjf", "sjf-tokens", "fair", "oracle"; default
    :data:`sjf_core.settings.DEFAULT_POLICY`) with the :class:`Policy` settings (None: its
    defaults; ``weights``: "fair" only), or return a Policy object as is.

    Raises:
        ValueError: unknown policy name, a bad setting, or ``weights`` for another policy.
    """
    if isinstance(spec, Policy):
        return spec
    try:
        cls = POLICIES[str(spec).strip().lower()]
    except KeyError:
        raise ValueError(f"unknown policy {spec!r}; choose one of {sorted(POLICIES)}") from None
    if cls is FairPolicy:
        return cls(tau, promotion, initial_short_service_s, weights)
    if weights is not None:
        raise ValueError(f"weights are a setting of the 'fair' policy, not of {cls.name!r}")
    return cls(tau, promotion, initial_short_service_s)


__all__ = ["Policy", "FCFSPolicy", "SJFPolicy", "SJFTokensPolicy", "FairPolicy", "OraclePolicy", "POLICIES",
           "LIVE_POLICIES", "check_live_policy", "make_policy", "RequestMeta", "MEDIUM"]
