"""Label values and histogram bounds of the ``sjf_*`` metrics (no prometheus-client needed).

Every label value is a backend key or a class name, never prompt text; each function
here never raises.
"""

from __future__ import annotations

import math
import re
from typing import Any

from sjf_core.policy._entry import CLASS_NAMES, Entry, class_of_tokens
from sjf_core.settings import backend_label  # noqa: F401  (the label of a queue key: re-exported)

__all__ = ["backend_label", "reason_label", "predicted_class", "true_class", "QUEUE_WAIT_BUCKETS_S",
           "PREDICTOR_LATENCY_BUCKETS_S"]

#: Histogram buckets of queue wait and service time, seconds (10 ms … 10 min).
QUEUE_WAIT_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
#: Histogram buckets of predictor latency, seconds (50 µs … 1 s).
PREDICTOR_LATENCY_BUCKETS_S = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

_REASON_RE = re.compile(r"[^a-z0-9_]+")


def reason_label(reason: Any) -> str:
    """A bounded, machine-readable reason label (lowercase [a-z0-9_], ≤ 40 chars)."""
    r = _REASON_RE.sub("_", str(reason or "unknown").lower()).strip("_")
    return (r or "unknown")[:40]


def predicted_class(entry: Entry) -> str:
    if entry.fallback:
        return "unscored"
    if not getattr(entry, "scored", True):
        return "idle"
    try:
        return CLASS_NAMES[int(entry.klass)]
    except (IndexError, TypeError, ValueError):
        return "unscored"


def true_class(answer_tokens: Any) -> str:
    if answer_tokens is None or isinstance(answer_tokens, bool):
        return "unknown"
    try:
        t = float(answer_tokens)
    except (TypeError, ValueError):
        return "unknown"
    if not math.isfinite(t) or t < 0:
        return "unknown"
    return CLASS_NAMES[class_of_tokens(t)]
