"""Fitting the hashed word lexicon of :mod:`sjf_core.predict._lexicon` (training only).

* :func:`fit_lexicon` fits ridge regression of a target (ln(1 + answer tokens), possibly
  de-meaned per model) on the L2-normalised binary bucket vectors
  (:func:`~sjf_core.predict._lexicon.buckets_of`): weights float32 [n_buckets] and an
  intercept, as a :class:`~sjf_core.predict._lexicon.Lexicon`. Solved with
  ``scipy.sparse.linalg.lsqr`` (train extra).
* :func:`cross_fit_scores`: out-of-fold scores, so the trees do not over-trust the column.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from sjf_core.predict._lexicon import LEX_BUCKETS, Lexicon

__all__ = ["fit_lexicon", "cross_fit_scores"]


def _matrix(bucket_lists: Sequence[np.ndarray], n_buckets: int):
    from scipy.sparse import csr_matrix

    lens = np.array([len(b) for b in bucket_lists], dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum(lens)])
    indices = np.concatenate(bucket_lists) if len(bucket_lists) else np.zeros(0, np.int64)
    data = np.repeat(1.0 / np.sqrt(np.maximum(lens, 1)), lens)
    return csr_matrix((data, indices, indptr), shape=(len(bucket_lists), n_buckets))


def fit_lexicon(bucket_lists: Sequence[np.ndarray], y: np.ndarray, weights: np.ndarray | None = None,
                alpha: float = 1.0, n_buckets: int = LEX_BUCKETS) -> Lexicon:
    """Ridge regression of ``y`` [N] on the normalised bucket vectors (``alpha`` = L2 penalty)."""
    from scipy.sparse import diags
    from scipy.sparse.linalg import lsqr

    y = np.asarray(y, dtype=np.float64)
    X = _matrix(bucket_lists, n_buckets)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=np.float64)
    mu = float(np.average(y, weights=w))
    sw = np.sqrt(w)
    Xw = diags(sw) @ X
    sol = lsqr(Xw, (y - mu) * sw, damp=float(np.sqrt(alpha)), atol=1e-4, btol=1e-4, iter_lim=150)[0]
    return Lexicon(sol.astype(np.float32), mu)


def cross_fit_scores(bucket_lists: Sequence[np.ndarray], y: np.ndarray, fold_of: np.ndarray,
                     weights: np.ndarray | None = None, alpha: float = 1.0, n_buckets: int = LEX_BUCKETS) -> np.ndarray:
    """Out-of-fold lexicon scores float64 [N]: row i scored by a lexicon fitted without fold ``fold_of[i]``."""
    out = np.zeros(len(y))
    for f in np.unique(fold_of):
        tr = np.flatnonzero(fold_of != f)
        te = np.flatnonzero(fold_of == f)
        lex = fit_lexicon([bucket_lists[i] for i in tr], y[tr], None if weights is None else weights[tr], alpha,
                          n_buckets)
        out[te] = [lex.score_buckets(bucket_lists[i]) for i in te]
    return out
