"""The "work-aging" rule: no threshold, the key credited with the served work at arrival.

Key ``(-priority, key + scale × W, seq)`` with W the structure's served-work clock when the
entry arrived (answer tokens dispatched before it) and ``scale = key_span / (TOKEN_KEY_SPAN
× slowdown)``: a waiter of expected length s is overtaken only by requests that arrive
before ``slowdown × s`` more tokens are served (exactly for ``sjf-tokens`` keys). Neither
idle time nor backend speed moves the clock. τ off: plain key. ``key_span`` > 0 finite
(policy key units), ``slowdown`` > 0 finite.
"""

from __future__ import annotations

import math
from typing import Any

from sjf_core.settings import PromotionSettings
from sjf_core.policy._entry import Entry
from sjf_core.policy.promotion._base import TOKEN_KEY_SPAN, PromotionRule, check

#: Default ``slowdown`` of the served-work rules (``sjf simulate --scenario guard``).
DEFAULT_SLOWDOWN = PromotionSettings.slowdown


class WorkAging(PromotionRule):
    """Served-work-credited key (module docstring). Raises ValueError: bad key_span or slowdown."""

    name = "work-aging"
    uses_tau = False

    def __init__(self, key_span: float = 1.0, slowdown: float = DEFAULT_SLOWDOWN):
        super().__init__()
        self.key_span = check(self.name, "key_span", key_span, strict=True)
        self.slowdown = check(self.name, "slowdown", slowdown, strict=True)
        self._scale = self.key_span / TOKEN_KEY_SPAN / self.slowdown

    def order_key(self, entry: Entry) -> tuple:
        if math.isinf(self.q.tau.tau_s):
            return entry.sort_key()
        return (-entry.priority, entry.key + self._scale * entry.served_at_arrival, entry.seq)

    def wire(self) -> dict[str, Any]:
        return dict(super().wire(), key_span=self.key_span, slowdown=self.slowdown)
