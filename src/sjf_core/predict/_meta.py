"""Scheduling metadata read from an OpenAI-style request body and headers: :class:`RequestMeta`.

Documented inputs (all optional; bad values are ignored, never an error):

* ``max_tokens`` / ``max_completion_tokens`` / ``max_output_tokens`` (body): the
  answer cap, an exact upper bound used by the ``sjf-tokens`` policy.
* priority: body ``metadata.sjf_priority`` or header ``x-sjf-priority`` (integer,
  higher is served first, clamped to [-100, 100]); else the body's top-level
  ``priority`` as LiteLLM and vLLM define it (lower is served sooner; ours is its
  negation). A priority is a strict band (:mod:`sjf_core.policy._pending`).
* deadline: body ``metadata.sjf_deadline_s`` or header ``x-sjf-deadline-s``
  (seconds from arrival, > 0).
* supersede: body ``metadata.sjf_supersede`` or header ``x-sjf-supersede`` (a string of
  at most 200 characters): a newer request with the same key on the same backend
  queue and tenant removes this one while it is still queued.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Mapping

from sjf_core._faults import note_fault

log = logging.getLogger("sjf_core.predict")

PRIORITY_HEADER = "x-sjf-priority"
DEADLINE_HEADER = "x-sjf-deadline-s"
SUPERSEDE_HEADER = "x-sjf-supersede"
#: every request header of ours starts with this (the wrapper strips them before sending)
HEADER_PREFIX = "x-sjf-"
_MAX_KEYS = ("max_completion_tokens", "max_tokens", "max_output_tokens")


@dataclass(frozen=True)
class RequestMeta:
    """Scheduling metadata read from a request (never its text).

    Attributes:
        max_tokens: the request's ``max_tokens`` / ``max_completion_tokens`` cap
            (tokens), or None when absent or not a positive integer.
        priority: caller priority; higher is served first (default 0).
        deadline_s: relative deadline in seconds from arrival, or None.
        explicit_priority: True when the request sent a priority (defaults apply
            only when it did not, :class:`sjf_core.settings._tenants.IntentDefaults`).
        tenant: tenant id (hashed, :mod:`sjf_core.settings._tenants`), or None (the shared tenant).
        supersede: supersede key (``x-sjf-supersede``), or None: a newer request with
            the same key, backend and tenant replaces this one while it is queued.
    """

    max_tokens: int | None = None
    priority: int = 0
    deadline_s: float | None = None
    explicit_priority: bool = False
    tenant: str | None = None
    supersede: str | None = None


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


def _as_key(v: Any) -> str | None:
    """A supersede key: a non-empty string (or integer) of at most 200 characters."""
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        return None
    s = str(v).strip()
    return s if 0 < len(s) <= 200 else None


def request_meta(body: Any, headers: Mapping[str, str] | None = None) -> RequestMeta:
    """Read :class:`RequestMeta` from a request ``body`` (dict) and ``headers``.

    Never raises: anything unreadable gives the defaults.
    """
    max_tokens = priority = deadline = supersede = None
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
            supersede = _as_key(md.get("sjf_supersede"))
        if priority is None:
            lp = _as_int(body.get("priority"))  # LiteLLM / vLLM: lower is sooner
            priority = None if lp is None else -lp
    if headers:
        try:
            lower = {str(k).lower(): v for k, v in headers.items()}
        except Exception:
            note_fault(log, "request headers unreadable; scheduling headers ignored")
            lower = {}
        if priority is None:
            priority = _as_int(lower.get(PRIORITY_HEADER))
        if deadline is None:
            deadline = _as_pos_float(lower.get(DEADLINE_HEADER))
        if supersede is None:
            supersede = _as_key(lower.get(SUPERSEDE_HEADER))
    explicit = priority is not None
    if priority is not None:
        priority = max(-100, min(100, priority))
    return RequestMeta(max_tokens=max_tokens, priority=priority or 0, deadline_s=deadline,
                       explicit_priority=explicit, supersede=supersede)
