"""The limits of a backend queue's overload control (:class:`OverloadConfig`), checked when made.

The control itself (the cost ladder, deferral, ``Retry-After``) is the admission room's
:mod:`sjf_core.admission._overload`; this is only its settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class OverloadConfig:
    """Limits of one backend queue.

    Attributes:
        max_queue_depth: most waiting requests (int >= 1), or None (no limit).
        max_predicted_wait_s: most predicted wait in seconds (> 0), or None.
        ladder: fractions of the limits (each in (0, 1]) at which Short, Medium,
            Long requests are refused.
        defer_s: seconds a refused request may wait for room before it is
            rejected (>= 0; 0 rejects at once).
        min_retry_after_s, max_retry_after_s: clamp of the ``Retry-After`` estimate.
    """

    max_queue_depth: int | None = None
    max_predicted_wait_s: float | None = None
    ladder: tuple[float, float, float] = (1.0, 0.8, 0.6)
    defer_s: float = 0.0
    min_retry_after_s: float = 1.0
    max_retry_after_s: float = 600.0

    def __post_init__(self):
        if self.max_queue_depth is not None and int(self.max_queue_depth) < 1:
            raise ValueError("max_queue_depth must be >= 1 or None")
        if self.max_predicted_wait_s is not None and not (float(self.max_predicted_wait_s) > 0):
            raise ValueError("max_predicted_wait_s must be > 0 or None")
        lad = tuple(float(x) for x in self.ladder)
        if len(lad) != 3 or not all(0 < x <= 1 for x in lad):
            raise ValueError("ladder must be three fractions in (0, 1] for Short, Medium, Long")
        object.__setattr__(self, "ladder", lad)
        if not (self.defer_s >= 0) or math.isinf(self.defer_s):
            raise ValueError("defer_s must be a finite number >= 0")
        if not (0 <= self.min_retry_after_s <= self.max_retry_after_s):
            raise ValueError("need 0 <= min_retry_after_s <= max_retry_after_s")

    @property
    def enabled(self) -> bool:
        """True when at least one limit is set."""
        return self.max_queue_depth is not None or self.max_predicted_wait_s is not None

    @classmethod
    def parse(cls, value: Any) -> "OverloadConfig | None":
        """Accept None, an OverloadConfig, or a mapping of its field names.

        Raises:
            ValueError: unknown keys or bad values.
        """
        if value is None or isinstance(value, OverloadConfig):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - set(cls.__dataclass_fields__)
            if unknown:
                raise ValueError(f"unknown overload options: {sorted(unknown)}")
            kw = dict(value)
            if "ladder" in kw:
                kw["ladder"] = tuple(kw["ladder"])
            return cls(**kw)
        raise ValueError(f"overload must be None, a mapping or an OverloadConfig, not {type(value).__name__}")
