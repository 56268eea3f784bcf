"""Optional maximum dispatch rate per backend (for remote APIs with RPM quotas).

Uses ``asyncio-throttle``: at most ``count`` dispatches in any ``period_s``-second
window. The admission queue applies it after a request has been granted its slot
in policy order, so the rate limit never reorders requests; apart from the rate
limit, dispatch stays work-conserving.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

_UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
          "h": 3600.0, "hr": 3600.0, "hour": 3600.0}


@dataclass(frozen=True)
class RateLimit:
    """At most ``count`` dispatches per ``period_s`` seconds (both > 0)."""

    count: int
    period_s: float = 1.0

    def __post_init__(self):
        if int(self.count) < 1 or not (self.period_s > 0) or math.isinf(self.period_s):
            raise ValueError("rate limit needs count >= 1 and a finite period > 0")

    @classmethod
    def parse(cls, value: Any) -> "RateLimit | None":
        """Parse None, a RateLimit, a number (dispatches per second, may be < 1),
        or a string "N/s", "N/min", "N/h" (e.g. "60/min").

        Raises:
            ValueError: anything else.
        """
        if value is None or isinstance(value, RateLimit):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            r = float(value)
            if not (r > 0) or math.isinf(r):
                raise ValueError(f"rate limit must be > 0 per second, got {value!r}")
            # an integer rate allows that many per second; a fractional one spaces them evenly
            return cls(int(r), 1.0) if r >= 1 and r == int(r) else cls(1, 1.0 / r)
        if isinstance(value, str) and "/" in value:
            n, _, unit = value.partition("/")
            unit = unit.strip().lower()
            unit = unit[:-1] if unit.endswith("s") and len(unit) > 1 else unit
            if unit not in _UNITS:
                raise ValueError(f"unknown rate unit in {value!r}; use /s, /min or /h")
            try:
                return cls(int(n.strip()), _UNITS[unit])
            except ValueError:
                pass
        raise ValueError(f"cannot parse rate limit {value!r}: use a number per second or 'N/s', 'N/min', 'N/h'")

    def throttler(self):
        """A fresh ``asyncio_throttle.Throttler`` for this limit.

        Raises:
            RuntimeError: asyncio-throttle is not installed (it comes with the ``litellm`` and
                ``openai`` extras, or ``adapter``).
        """
        try:
            from asyncio_throttle import Throttler
        except ImportError as exc:
            raise RuntimeError("a rate limit (SJF_RATE_LIMIT) needs asyncio-throttle: "
                               "pip install 'clairvoyant-sjf[adapter]'") from exc

        return Throttler(rate_limit=int(self.count), period=float(self.period_s), retry_interval=0.005)
