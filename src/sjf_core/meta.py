"""Scheduling metadata read from an OpenAI-style request body and headers.

Documented inputs (all optional; bad values are ignored, never an error):

* ``max_tokens`` / ``max_completion_tokens`` / ``max_output_tokens`` (body): the
  answer cap, an exact upper bound used by the ``sjf-tokens`` policy.
* priority: body ``metadata.sjf_priority`` or header ``x-sjf-priority`` (integer,
  higher is served first, clamped to [-100, 100]).
* deadline: body ``metadata.sjf_deadline_s`` or header ``x-sjf-deadline-s``
  (seconds from arrival, > 0).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from .policies import RequestMeta

PRIORITY_HEADER = "x-sjf-priority"
DEADLINE_HEADER = "x-sjf-deadline-s"
_MAX_KEYS = ("max_completion_tokens", "max_tokens", "max_output_tokens")


def _finite(v: Any) -> float | None:
    """``v`` as a finite float, or None (booleans, non-numbers, NaN and ±inf are refused)."""
    if isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


def _as_int(v: Any) -> int | None:
    f = _finite(v)
    return None if f is None else int(f)


def _as_pos_float(v: Any) -> float | None:
    f = _finite(v)
    return f if f is not None and f > 0 else None


def request_meta(body: Any, headers: Mapping[str, str] | None = None) -> RequestMeta:
    """Read :class:`RequestMeta` from a request ``body`` (dict) and ``headers``.

    Never raises: anything unreadable gives the defaults.
    """
    max_tokens = priority = deadline = None
    if isinstance(body, Mapping):
        for k in _MAX_KEYS:
            v = _as_int(body.get(k))
            if v is not None and v > 0:
                max_tokens = v
                break
        md = body.get("metadata")
        if isinstance(md, Mapping):
            priority = _as_int(md.get("sjf_priority"))
            deadline = _as_pos_float(md.get("sjf_deadline_s"))
    if headers:
        try:
            lower = {str(k).lower(): v for k, v in headers.items()}
        except Exception:
            lower = {}
        if priority is None:
            priority = _as_int(lower.get(PRIORITY_HEADER))
        if deadline is None:
            deadline = _as_pos_float(lower.get(DEADLINE_HEADER))
    if priority is not None:
        priority = max(-100, min(100, priority))
    return RequestMeta(max_tokens=max_tokens, priority=priority or 0, deadline_s=deadline)
