"""The ranking accuracy of a length predictor (paper Eq. 2), which the runtime uses too (the
length memory's gate, :mod:`sjf_core.memory._gate`). The evaluation-only metrics (Kendall
τ-b, class accuracy) are in :mod:`sjf_lab.rank_metrics`.

It takes plain arrays: ``scores`` (higher = predicted longer) and the true answer
``tokens`` of the same rows.
"""

from __future__ import annotations

import numpy as np

from sjf_core.predict._classes import LONG_MIN_TOKENS, SHORT_MAX_TOKENS

__all__ = ["ranking_accuracy"]


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
