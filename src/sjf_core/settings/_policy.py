"""The policy's settings: its defaults and :class:`PromotionSettings` (the starvation guard).

Plain values: nothing here checks a rule's parameters. The policy room owns those checks
(:func:`sjf_core.policy.promotion.check_settings`, run by ``make_policy``,
``make_promotion`` and the config boundary).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Policy of a queue that names none: ascending expected answer tokens (docs/scheduling.md).
DEFAULT_POLICY = "sjf-tokens"
#: τ (the starvation bound of the time-based rules): 3 × the measured mean Short service time.
DEFAULT_TAU = "3x"
#: Seed of the mean Short service time (s), before any is measured.
DEFAULT_SHORT_SERVICE_S = 2.0
#: Promotion rule (starvation guard) of a policy that names none: "work-bound", due on the
#: served-work clock (:class:`~sjf_core.policy.promotion.WorkBound`), chosen with
#: ``sjf simulate --scenario guard`` (docs/scheduling.md). Policies, pending structures,
#: :func:`~sjf_core.policy.promotion.make_promotion` and plugin policies all take it from here.
DEFAULT_PROMOTION = "work-bound"
#: The rule of the policies whose τ is off by default ("fcfs", "oracle"): the paper's
#: "strict", which never acts with τ off (the simplest rule to run there, Redis included).
TAU_OFF_PROMOTION = "strict"


@dataclass(frozen=True)
class PromotionSettings:
    """The starvation guard of a policy: its rule and every rule's parameters.

    A plain value: the policy room checks it (:func:`sjf_core.policy.promotion.check_settings`:
    every parameter by the rule that owns it, whichever rule is chosen, so a bad ``horizon``
    is an error under "work-bound" too) wherever it enters: ``make_policy``,
    ``make_promotion``, a pending structure, and the config boundary (``SchedulerConfig``).
    """

    #: The rule (:data:`sjf_core.policy.promotion.PROMOTIONS`): "work-bound", "work-aging",
    #: "fcfs-bound", "strict" (paper §3.4), "one-in-k", "aging", "aged-sjf"; None: the
    #: policy's default (:data:`DEFAULT_PROMOTION`, or :data:`TAU_OFF_PROMOTION` for the
    #: policies with τ off).
    rule: str | None = None
    #: "one-in-k": at most one promotion per ``k`` dispatches (int >= 1).
    k: int = 2
    #: "aging": a Long that has waited ``horizon × τ`` ties with a fresh Short (> 0).
    horizon: float = 8.0
    #: "fcfs-bound": slack over the FCFS start and its floor in multiples of the mean backlog (>= 0).
    slack: float = 0.0
    floor: float = 1.0
    #: "work-bound" / "work-aging": ``slowdown`` (> 0) and "work-bound"'s ``work_slack`` (>= 0),
    #: in the served-work clock's units (docs/scheduling.md).
    slowdown: float = 8.0
    work_slack: float = 0.2
    #: Any rule: an absolute wait bound in seconds (> 0), or None.
    max_wait_s: float | None = None

    @classmethod
    def of(cls, value: "PromotionSettings | str | None") -> "PromotionSettings":
        """``value`` as settings: itself, or a rule name (None: the policy's default)."""
        return value if isinstance(value, PromotionSettings) else cls(rule=value)
