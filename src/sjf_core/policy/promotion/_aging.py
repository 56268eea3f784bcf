"""The "aging" rule: no threshold, an age-weighted policy key.

Key ``(-priority, key + key_span × (arrival - origin) / (horizon × τ), seq)``: waiting
``horizon × τ`` seconds is worth one key span (a Long's lead over a Short), so a request is
overtaken only by requests that arrive within ``horizon × τ × Δkey / key_span`` seconds after
it, and a burst keeps pure policy order. The frame (origin, rate) is re-anchored when the
queue is empty and rebuilt, O(n log n), when τ drifts by more than 10 %. τ off: plain key.
``key_span`` > 0 finite (policy key units), ``horizon`` > 0 (multiples of τ).
"""

from __future__ import annotations

import math
from typing import Any

from sjf_core.settings import PromotionSettings
from sjf_core.policy._entry import Entry
from sjf_core.policy.promotion._base import PromotionRule, check

#: Default aging horizon, in multiples of τ: a Long that has waited ``horizon × τ`` ties with a fresh Short.
DEFAULT_AGING_HORIZON = PromotionSettings.horizon


class Aging(PromotionRule):
    """Age-weighted key (module docstring). Raises ValueError: bad key_span or horizon."""

    name = "aging"

    def __init__(self, key_span: float = 1.0, horizon: float = DEFAULT_AGING_HORIZON):
        super().__init__()
        self.key_span = check(self.name, "key_span", key_span, strict=True)
        self.horizon = check(self.name, "horizon", horizon, strict=True, finite=False)
        self._origin = 0.0
        self._aging_s = math.inf

    def on_push(self, entry: Entry) -> None:
        target = self.horizon * self.q.tau.tau_s
        if len(self.q) == 0:
            self._origin = entry.arrival
            self._aging_s = target
            return
        if math.isinf(target) != math.isinf(self._aging_s):
            drift = math.inf
        elif math.isinf(target):
            drift = 0.0
        else:
            drift = abs(target - self._aging_s) / self._aging_s
        if drift > 0.10:  # τ moved by >10%: rebuild with the new rate, rare
            live = self.q.live_entries()
            self._origin = min([e.arrival for e in live] + [entry.arrival])
            self._aging_s = target
            self.q.rebuild(live)

    def order_key(self, entry: Entry) -> tuple:
        if math.isinf(self._aging_s):
            return entry.sort_key()
        credit = (entry.arrival - self._origin) / self._aging_s
        return (-entry.priority, entry.key + self.key_span * credit, entry.seq)

    def wire(self) -> dict[str, Any]:
        return dict(super().wire(), key_span=self.key_span, horizon=self.horizon)
