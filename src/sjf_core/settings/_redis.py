"""The shared Redis store's settings (:class:`RedisSettings`) and the length memory's Redis timings."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

#: What the Redis store does when Redis is unreachable (the first is the default).
FAIL_MODES = ("open", "closed")
#: The length memory's Redis calls: socket timeout (s; short, scoring waits for them) and how
#: long it leaves Redis alone after an error (s). Its own, not the admission store's
#: :class:`RedisSettings`, whose key ``prefix`` it shares.
MEMORY_REDIS_OP_TIMEOUT_S = 0.05
MEMORY_REDIS_RETRY_S = 5.0


@dataclass(frozen=True)
class RedisSettings:
    """The shared Redis store's options (:class:`~sjf_core.admission._redis.RedisAdmissionQueue`),
    checked when made (each is a plain value: its shape is its own check).

    Raises:
        ValueError: a bad value, the message naming the option.
    """

    #: "open": while Redis is unreachable, requests go through a per-process queue;
    #: "closed": they are refused (HTTP 429).
    fail_mode: str = FAIL_MODES[0]
    #: Lease time-to-live in Redis (s, > 0): a crashed holder's slot returns at most this long
    #: after its last renewal (renewed every third of it).
    redis_lease_ttl_s: float = 10.0
    #: Liveness time-to-live of a queued ticket (s, > 0): a dead waiter leaves within it.
    waiter_ttl_s: float = 10.0
    #: First part of every key.
    prefix: str = "sjf"
    #: Socket timeout of non-blocking Redis calls (s, > 0).
    op_timeout_s: float = 2.0
    #: While Redis is marked down, new tickets skip it this long (s, >= 0).
    retry_s: float = 1.0

    def __post_init__(self):
        if self.fail_mode not in FAIL_MODES:
            raise ValueError(f"fail_mode must be one of {FAIL_MODES}, got {self.fail_mode!r}")
        for name in ("redis_lease_ttl_s", "waiter_ttl_s", "op_timeout_s", "retry_s"):
            v, low = getattr(self, name), "> 0" if name != "retry_s" else ">= 0"
            x = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan
            if not math.isfinite(x) or x < 0 or (x == 0 and name != "retry_s"):
                raise ValueError(f"{name} must be a number {low}, got {v!r}")
            object.__setattr__(self, name, x)
        if not isinstance(self.prefix, str) or not self.prefix:
            raise ValueError(f"prefix must be a non-empty string, got {self.prefix!r}")

    @classmethod
    def of(cls, options: "RedisSettings | Mapping[str, Any] | None") -> "RedisSettings":
        """``options`` as settings: itself, or a mapping of its field names (the ``redis``
        file key, ``SJF_REDIS_*``). Raises ValueError for an unknown name."""
        if isinstance(options, RedisSettings):
            return options
        opts = dict(options or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(opts) - known
        if unknown:
            raise ValueError(f"unknown Redis options {sorted(unknown)}; known: {sorted(known)}")
        return cls(**opts)
