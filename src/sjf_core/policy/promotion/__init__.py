"""Promotion strategies: the starvation guards of a pending structure, one class per rule.

The contract (:class:`PromotionStrategy`) is in :mod:`._base`; the rules are "work-bound"
(the default of :class:`~sjf_core.policy._policies.Policy`), "work-aging", "fcfs-bound",
"strict" (paper §3.4), "one-in-k", "aging", "aged-sjf", and the ``max_wait_s`` bound that
combines with any of them. Build one with :func:`make_promotion`; a pending structure
(:mod:`sjf_core.policy._pending`, heap or DRR) takes it.
"""

from sjf_core.policy.promotion._aged_sjf import AgedSJF
from sjf_core.policy.promotion._aging import DEFAULT_AGING_HORIZON, Aging
from sjf_core.policy.promotion._base import (REQUEST_OVERHEAD_TOKENS, TOKEN_KEY_SPAN, WIRE_DEFAULTS, PendingView,
                                             PromotionRule, PromotionStrategy, work_tokens)
from sjf_core.policy.promotion._fcfs_bound import DEFAULT_FCFS_FLOOR, DEFAULT_FCFS_SLACK, FCFSBound
from sjf_core.policy.promotion._max_wait import MaxWait
from sjf_core.policy.promotion._registry import (PROMOTIONS, RULES, build_rule, check_settings, make_promotion,
                                                with_max_wait)
from sjf_core.policy.promotion._threshold import OneInK, Strict
from sjf_core.policy.promotion._work_aging import DEFAULT_SLOWDOWN, WorkAging
from sjf_core.policy.promotion._work_bound import DEFAULT_WORK_SLACK, WorkBound

__all__ = [
    "PromotionStrategy", "PromotionRule", "PendingView", "make_promotion", "build_rule", "check_settings", "with_max_wait", "PROMOTIONS", "RULES",
    "Strict", "OneInK", "Aging", "AgedSJF", "FCFSBound", "WorkAging", "WorkBound", "MaxWait",
    "REQUEST_OVERHEAD_TOKENS", "TOKEN_KEY_SPAN", "WIRE_DEFAULTS", "work_tokens", "DEFAULT_AGING_HORIZON",
    "DEFAULT_FCFS_FLOOR", "DEFAULT_FCFS_SLACK", "DEFAULT_SLOWDOWN", "DEFAULT_WORK_SLACK",
]
