"""Promotion rules by name: :func:`make_promotion` builds a fresh strategy for one pending
structure from the policy's options.

Every option passed is validated by the rule that owns it, whichever rule is chosen (a bad
``horizon`` is an error even under "work-bound"), so a typo never passes silently.
"""

from __future__ import annotations

import math

from sjf_core.policy.promotion._aged_sjf import AgedSJF
from sjf_core.policy.promotion._aging import DEFAULT_AGING_HORIZON, Aging
from sjf_core.policy.promotion._base import PromotionRule, check
from sjf_core.policy.promotion._fcfs_bound import DEFAULT_FCFS_FLOOR, DEFAULT_FCFS_SLACK, FCFSBound
from sjf_core.policy.promotion._max_wait import MaxWait
from sjf_core.policy.promotion._threshold import OneInK, Strict
from sjf_core.policy.promotion._work_aging import DEFAULT_SLOWDOWN, WorkAging
from sjf_core.policy.promotion._work_bound import DEFAULT_WORK_SLACK, WorkBound

#: Promotion rules of the starvation guard, by name.
RULES: dict[str, type[PromotionRule]] = {
    "strict": Strict, "one-in-k": OneInK, "aging": Aging, "aged-sjf": AgedSJF,
    "fcfs-bound": FCFSBound, "work-aging": WorkAging, "work-bound": WorkBound,
}
PROMOTIONS = tuple(RULES)


def with_max_wait(rule: PromotionRule, max_wait_s: float | None) -> PromotionRule:
    """``rule`` with the absolute bound ``max_wait_s`` (None / infinity: ``rule`` itself).

    Raises:
        ValueError: ``max_wait_s`` not a positive number of seconds.
    """
    if max_wait_s is None:
        return rule
    check(rule.name, "max_wait_s", max_wait_s, strict=True, finite=False)
    if math.isinf(float(max_wait_s)):
        return rule
    if isinstance(rule, FCFSBound):
        rule.cap_s = float(max_wait_s)
        return rule
    return MaxWait(rule, max_wait_s)


def make_promotion(name: str | None = None, *, k: int = 2, key_span: float = 1.0,
                   horizon: float = DEFAULT_AGING_HORIZON, slack: float = DEFAULT_FCFS_SLACK,
                   floor: float = DEFAULT_FCFS_FLOOR, slowdown: float = DEFAULT_SLOWDOWN,
                   work_slack: float = DEFAULT_WORK_SLACK, max_wait_s: float | None = None) -> PromotionRule:
    """A fresh strategy of rule ``name`` (one of :data:`PROMOTIONS`; None:
    :data:`sjf_core.config.DEFAULT_PROMOTION`), with ``max_wait_s``.

    Args:
        k: "one-in-k" (int >= 1). key_span: "aging" / "work-aging" key units (> 0).
        horizon: "aging" (> 0, multiples of τ). slack, floor: "fcfs-bound" (>= 0).
        slowdown, work_slack: "work-aging" / "work-bound" (> 0, >= 0).
        max_wait_s: absolute wait bound in seconds (> 0) for any rule, or None.

    Raises:
        ValueError: unknown rule, or any option out of its range (named in the message).
    """
    if name is None:
        from sjf_core.config import DEFAULT_PROMOTION  # config imports the policy layer: not at import time

        name = DEFAULT_PROMOTION
    if name not in RULES:
        raise ValueError(f"promotion must be one of {PROMOTIONS}, got {name!r}")
    # every rule is built, so each validates its own options (cheap: empty heaps)
    built = {"strict": Strict(), "one-in-k": OneInK(k), "aging": Aging(key_span, horizon), "aged-sjf": AgedSJF(),
             "fcfs-bound": FCFSBound(slack, floor), "work-aging": WorkAging(key_span, slowdown),
             "work-bound": WorkBound(slowdown, work_slack)}
    return with_max_wait(built[name], max_wait_s)
