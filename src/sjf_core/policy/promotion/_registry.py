"""Promotion rules by name: :func:`make_promotion` / :func:`build_rule` build one fresh
strategy for one pending structure from :class:`~sjf_core.settings.PromotionSettings`.

The rules own the check of those settings (:func:`check_settings`): every option by the rule
that owns it, whichever rule is chosen (a bad ``horizon`` is an error even under
"work-bound"), so a typo never passes silently. It runs wherever settings enter the policy
room (:func:`make_promotion`, ``Policy``) and at the config boundary, once per distinct value.
"""

from __future__ import annotations

import functools
import math

from sjf_core.settings import DEFAULT_PROMOTION, PromotionSettings
from sjf_core.policy.promotion._aged_sjf import AgedSJF
from sjf_core.policy.promotion._aging import Aging
from sjf_core.policy.promotion._base import PromotionRule, check
from sjf_core.policy.promotion._fcfs_bound import FCFSBound
from sjf_core.policy.promotion._max_wait import MaxWait
from sjf_core.policy.promotion._threshold import OneInK, Strict
from sjf_core.policy.promotion._work_aging import WorkAging
from sjf_core.policy.promotion._work_bound import WorkBound

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


@functools.lru_cache(maxsize=256)
def check_settings(s: PromotionSettings) -> None:
    """Check every parameter of ``s`` by the rule that owns it, whichever rule is chosen (the
    policy room's check of :class:`~sjf_core.settings.PromotionSettings`; once per distinct value).

    Raises:
        ValueError: an unknown rule or a parameter out of its range (named in the message).
    """
    if s.rule is not None and s.rule not in RULES:
        raise ValueError(f"promotion must be one of {PROMOTIONS}, got {s.rule!r}")
    for name in RULES:  # each rule checks its own parameters (cheap: empty structures)
        _rule(name, s, 1.0)
    if s.max_wait_s is not None:
        check(s.rule or DEFAULT_PROMOTION, "max_wait_s", s.max_wait_s, strict=True, finite=False)


def make_promotion(name: "str | PromotionSettings | None" = None, *, key_span: float = 1.0,
                   k: int | None = None, horizon: float | None = None, slack: float | None = None,
                   floor: float | None = None, slowdown: float | None = None, work_slack: float | None = None,
                   max_wait_s: float | None = None) -> PromotionRule:
    """A fresh strategy for one pending structure.

    Args:
        name: a rule name (one of :data:`PROMOTIONS`; None:
            :data:`sjf_core.settings.DEFAULT_PROMOTION`) with the rule parameters given here
            (None: the defaults of :class:`~sjf_core.settings.PromotionSettings`), or
            :class:`~sjf_core.settings.PromotionSettings` (then nothing else is given); either
            way checked by :func:`check_settings`.
        key_span: "aging" / "work-aging" key units of the policy (> 0).

    Raises:
        ValueError: unknown rule, or any option out of its range (named in the message).
    """
    given = {k_: v for k_, v in (("k", k), ("horizon", horizon), ("slack", slack), ("floor", floor),
                                 ("slowdown", slowdown), ("work_slack", work_slack), ("max_wait_s", max_wait_s))
             if v is not None}
    if isinstance(name, PromotionSettings):
        if given:
            raise ValueError(f"rule options {sorted(given)} go into the PromotionSettings, not beside them")
        settings = name
    else:
        settings = PromotionSettings(rule=name, **given)
    check_settings(settings)
    check("aging", "key_span", key_span, strict=True)  # the key-based rules' own unit, checked whichever is chosen
    return build_rule(settings.rule or DEFAULT_PROMOTION, settings, key_span)


def build_rule(rule: str, s: PromotionSettings, key_span: float = 1.0) -> PromotionRule:
    """The strategy of ``rule`` with the parameters of ``s`` (checked already) and its
    ``max_wait_s``: one object, built once for one pending structure."""
    return with_max_wait(_rule(rule, s, key_span), s.max_wait_s)


def _rule(name: str, s: PromotionSettings, key_span: float) -> PromotionRule:
    if name == "one-in-k":
        return OneInK(s.k)
    if name == "aging":
        return Aging(key_span, s.horizon)
    if name == "fcfs-bound":
        return FCFSBound(s.slack, s.floor)
    if name == "work-aging":
        return WorkAging(key_span, s.slowdown)
    if name == "work-bound":
        return WorkBound(s.slowdown, s.work_slack)
    return RULES[name]()  # "strict", "aged-sjf": no parameters
