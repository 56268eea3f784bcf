"""Ranking metrics of a length predictor (DESIGN.md "Metrics"; paper Eq. 2).

All functions take plain arrays: ``scores`` (higher = predicted longer) and the true
answer ``tokens`` of the same rows.
"""

from __future__ import annotations

import numpy as np

from sjf_core.policy._entry import LONG_MIN_TOKENS, SHORT_MAX_TOKENS

__all__ = ["ranking_accuracy", "kendall_tau_b", "class_accuracy", "true_classes"]


def true_classes(tokens, bounds=(SHORT_MAX_TOKENS, LONG_MIN_TOKENS)) -> np.ndarray:
    """Class index per row: 0 Short (< bounds[0]), 1 Medium, 2 Long (>= bounds[1]); int64 [N]."""
    t = np.asarray(tokens, dtype=np.float64)
    return np.where(t < bounds[0], 0, np.where(t < bounds[1], 1, 2)).astype(np.int64)


def ranking_accuracy(scores, tokens, bounds=(SHORT_MAX_TOKENS, LONG_MIN_TOKENS)) -> tuple[float, int, int]:
    """Paper Eq. 2: the fraction of (Short, Long) pairs where the Long row scores strictly higher.

    Medium rows are excluded; ties count as wrong (strict ">", as in the paper). Pairs are
    counted by sorting (O((S + L) log S)), not with an O(S·L) loop.

    Args:
        scores: float [N], higher = predicted longer.
        tokens: true answer tokens [N].
        bounds: (Short max, Long min) tokens.

    Returns:
        (accuracy in [0, 1] or NaN when there are no pairs, n_short, n_long).
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    t = np.asarray(tokens, dtype=np.float64).ravel()
    if s.shape != t.shape:
        raise ValueError(f"scores and tokens differ in length: {s.shape} vs {t.shape}")
    short = np.sort(s[t < bounds[0]])
    long_ = s[t >= bounds[1]]
    if len(short) == 0 or len(long_) == 0:
        return float("nan"), len(short), len(long_)
    below = np.searchsorted(short, long_, side="left")  # Short scores strictly below each Long score
    return float(below.sum()) / (len(short) * len(long_)), len(short), len(long_)


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
