"""The wrapper's own settings, validated once where they enter (``wrap``): :class:`WrapOptions`.

The scheduling settings (policy, τ, predictor, fairness, intent defaults) are the core's
(:class:`sjf_core.SchedulerConfig`); these are what the transport does with a request
around its admission. Defaults come from :mod:`sjf_core.config`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sjf_core.config import DEFAULT_PROBE_TIMEOUT_S, check_slots

__all__ = ["WrapOptions", "ON_CLOSE"]

#: Values of ``on_close`` (the first is the default).
ON_CLOSE = ("probe", "release", "drain")


@dataclass(frozen=True)
class WrapOptions:
    """What a wrapped client's transport does around admission (checked once, here).

    Raises:
        ValueError: a bad value, the message naming the option.
    """

    #: Let the SDK retry an overload rejection (429) after its ``Retry-After``; False:
    #: ``openai.RateLimitError`` at once.
    retry_rejected: bool = False
    #: A streamed (SSE) body closed or abandoned before its end: "probe" (close the
    #: connection, keep the slot until a 1-token probe of the backend returns: right whether
    #: the backend stops on disconnect or not), "release" (close and free at once: backends
    #: known to stop at once) or "drain" (read the rest in the background, free at its end).
    #: A non-streamed call cancelled or timed out after it was sent always probes.
    on_close: str = ON_CLOSE[0]
    #: Seconds an idle probe may take (> 0); then, or after an error answer, the slot is
    #: released at the orphan's estimated end (docs/openai_sjf.md "Orphaned calls").
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S
    #: Concurrent requests the backend gets (an integer >= 1), set when this wrap creates the
    #: backend's queue; None: the configured slots (default 1, a serial backend).
    slots: int | None = None

    def __post_init__(self):
        if self.on_close not in ON_CLOSE:
            raise ValueError(f"on_close must be one of {ON_CLOSE}, got {self.on_close!r}")
        t = self.probe_timeout_s
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not t > 0:
            raise ValueError(f"probe_timeout_s must be a number > 0, got {t!r}")
        object.__setattr__(self, "probe_timeout_s", float(t))
        if self.slots is not None:
            if not isinstance(self.slots, int):  # no "2" or 2.5 from Python callers
                raise ValueError(f"slots must be an integer >= 1, got {self.slots!r}")
            check_slots(self.slots)
        object.__setattr__(self, "retry_rejected", bool(self.retry_rejected))
