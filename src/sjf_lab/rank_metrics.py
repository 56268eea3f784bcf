"""Evaluation metrics of a length predictor (DESIGN.md "Metrics"), beside the runtime's
:func:`~sjf_core.predict._rank_metrics.ranking_accuracy` (paper Eq. 2, re-exported here).

All functions take plain arrays: ``scores`` (higher = predicted longer) and the true
answer ``tokens`` of the same rows.
"""

from __future__ import annotations

import numpy as np

from sjf_core.policy._entry import LONG_MIN_TOKENS, SHORT_MAX_TOKENS
from sjf_core.predict._rank_metrics import ranking_accuracy

__all__ = ["ranking_accuracy", "kendall_tau_b", "class_accuracy", "true_classes"]


def true_classes(tokens, bounds=(SHORT_MAX_TOKENS, LONG_MIN_TOKENS)) -> np.ndarray:
    """Class index per row: 0 Short (< bounds[0]), 1 Medium, 2 Long (>= bounds[1]); int64 [N]."""
    t = np.asarray(tokens, dtype=np.float64)
    return np.where(t < bounds[0], 0, np.where(t < bounds[1], 1, 2)).astype(np.int64)


def kendall_tau_b(scores, tokens) -> float:
    """Kendall τ-b between scores and true tokens (all rows, ties handled); NaN if undefined."""
    from scipy.stats import kendalltau

    s = np.asarray(scores, dtype=np.float64).ravel()
    t = np.asarray(tokens, dtype=np.float64).ravel()
    if len(s) < 2:
        return float("nan")
    res = kendalltau(s, t, variant="b")
    return float(res.statistic if hasattr(res, "statistic") else res[0])


def class_accuracy(probs, tokens, bounds=(SHORT_MAX_TOKENS, LONG_MIN_TOKENS)) -> float:
    """3-class accuracy of argmax(probs) [N, 3] against the true classes; NaN if N == 0."""
    p = np.asarray(probs)
    if len(p) == 0:
        return float("nan")
    return float(np.mean(np.argmax(p, axis=1) == true_classes(tokens, bounds)))
