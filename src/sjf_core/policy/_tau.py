"""The starvation timeout τ and its online estimate (paper §3.4, §5.6).

τ is either off, a fixed number of seconds, or a multiple of the mean service time
of Short requests, measured online from completed requests and seeded with a
configured value (paper default: τ = 3 × E[S_short], E[S_short] ≈ 2.0 s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sjf_core.policy._entry import SHORT


@dataclass(frozen=True)
class TauConfig:
    """How τ is set.

    Attributes:
        mode: "multiple" (τ = multiple × measured mean Short service time),
            "seconds" (τ = seconds) or "off" (no starvation guard, τ = ∞).
        multiple: the multiplier for mode "multiple" (paper: 3.0).
        seconds: τ in seconds for mode "seconds".
        initial_short_service_s: the seed of the mean Short service time, in
            seconds, used until requests complete (paper Table 1: 2.0 s).
        ewma_alpha: weight of each new Short service time in the running mean.
    """

    mode: str = "multiple"
    multiple: float = 3.0
    seconds: float = 6.0
    initial_short_service_s: float = 2.0
    ewma_alpha: float = 0.1

    def __post_init__(self):
        if self.mode not in ("multiple", "seconds", "off"):
            raise ValueError(f"tau mode must be 'multiple', 'seconds' or 'off', got {self.mode!r}")
        if self.mode == "multiple" and not self.multiple > 0:
            raise ValueError("tau multiple must be > 0")
        if self.mode == "seconds" and not self.seconds > 0:
            raise ValueError("tau seconds must be > 0")

    @classmethod
    def parse(cls, value, initial_short_service_s: float = 2.0) -> "TauConfig":
        """Parse a user setting.

        Accepts a TauConfig, None or "off"/"inf" (off), a number (seconds),
        "6s" (seconds), or "3x" (multiple of mean Short service time).

        Raises:
            ValueError: for any other value.
        """
        if isinstance(value, TauConfig):
            return value
        if value is None or (isinstance(value, str) and value.strip().lower() in ("off", "inf", "none", "")):
            return cls(mode="off", initial_short_service_s=initial_short_service_s)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isinf(value):
                return cls(mode="off", initial_short_service_s=initial_short_service_s)
            return cls(mode="seconds", seconds=float(value), initial_short_service_s=initial_short_service_s)
        if isinstance(value, str):
            v = value.strip().lower()
            try:
                if v.endswith("x"):
                    return cls(mode="multiple", multiple=float(v[:-1]), initial_short_service_s=initial_short_service_s)
                if v.endswith("s"):
                    v = v[:-1]
                return cls(mode="seconds", seconds=float(v), initial_short_service_s=initial_short_service_s)
            except ValueError:
                pass
        raise ValueError(f"cannot parse tau={value!r}: use seconds (6, '6s'), a multiple ('3x') or 'off'")


class TauEstimator:
    """Per-queue τ state: the running mean of Short service times."""

    __slots__ = ("config", "mean_short_service_s", "completed_short")

    def __init__(self, config: TauConfig | None = None):
        self.config = config or TauConfig()
        self.mean_short_service_s = self.config.initial_short_service_s
        self.completed_short = 0

    def observe(self, klass: int, service_s: float) -> None:
        """Record one completed request of class ``klass`` that held its slot ``service_s`` seconds."""
        if klass != SHORT or not (service_s >= 0) or math.isinf(service_s):
            return
        a = self.config.ewma_alpha
        self.mean_short_service_s += a * (service_s - self.mean_short_service_s)
        self.completed_short += 1

    @property
    def tau_s(self) -> float:
        """Current τ in seconds (``math.inf`` when off)."""
        c = self.config
        if c.mode == "off":
            return math.inf
        if c.mode == "seconds":
            return c.seconds
        return c.multiple * self.mean_short_service_s
