"""Policies from flat options, as the simulator's scenarios, benchmarks and tests write them.

``policy_of("sjf", tau=2.0, promotion="one-in-k", k=3)`` is
``make_policy("sjf", tau=2.0, promotion=PromotionSettings("one-in-k", k=3))``: ``tau``,
``initial_short_service_s`` and ``weights`` go to the policy, ``promotion`` (the rule's name)
and the rule parameters to :class:`sjf_core.settings.PromotionSettings`. Tooling only: the
runtime takes the typed settings.
"""

from __future__ import annotations

from typing import Any

from sjf_core.config import PromotionSettings
from sjf_core.policy._policies import Policy, make_policy

__all__ = ["policy_of"]

_POLICY_OPTIONS = ("tau", "initial_short_service_s", "weights")


def policy_of(name: Any, **options: Any) -> Policy:
    """The policy ``name`` with flat ``options`` (module docstring). Raises ValueError as
    :func:`~sjf_core.policy._policies.make_policy` and :class:`PromotionSettings` do."""
    own = {k: options.pop(k) for k in _POLICY_OPTIONS if k in options}
    rule = options.pop("promotion", None)
    if isinstance(rule, PromotionSettings):
        if options:
            raise ValueError(f"rule options {sorted(options)} beside PromotionSettings")
        promotion = rule
    else:
        promotion = PromotionSettings(rule=rule, **options) if (rule is not None or options) else None
    return make_policy(name, promotion=promotion, **own)
