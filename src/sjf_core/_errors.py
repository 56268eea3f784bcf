"""Errors raised by the admission layer. Messages never contain prompt text."""

from __future__ import annotations


class Superseded(Exception):
    """A newer request with the same supersede key (same backend queue, same tenant)
    replaced this one while it was still queued; it never reached the backend.

    Adapters map it to HTTP 409 (LiteLLM) or ``openai.ConflictError`` (OpenAI wrapper).

    Attributes:
        backend: the backend queue key.
    """

    def __init__(self, backend: str = "default"):
        self.backend = backend
        super().__init__(f"superseded by a newer request with the same key on backend {backend}")


class AdmissionRejected(Exception):
    """Overload control refused a request before it was admitted (seed 003 cost ladder).

    Adapters map it to HTTP 429 with ``Retry-After`` (LiteLLM) or the SDK's
    ``openai.RateLimitError`` (OpenAI wrapper). An admitted request is never rejected.

    Attributes:
        retry_after_s: suggested wait before retrying, in seconds (>= 0).
        reason: short machine-readable reason, e.g. "queue_depth" or "predicted_wait".
        backend: the backend queue key.
    """

    def __init__(self, retry_after_s: float, reason: str, backend: str = "default"):
        self.retry_after_s = max(0.0, float(retry_after_s))
        self.reason = reason
        self.backend = backend
        super().__init__(f"admission rejected on backend {backend}: {reason}; retry after {self.retry_after_s:.1f} s")
