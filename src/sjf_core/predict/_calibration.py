"""Calibration of expected answer tokens (issue 13): the ordering key should be an honest
expectation, so ``max_tokens`` caps and the overload ladder read true seconds.

Contract:

* :func:`fit_calibration` takes out-of-family model outputs μ (float64 [N], the regressor's
  ln(1 + tokens)), the observed answer tokens [N] and row weights [N], and returns knots
  ``[[μ_k, ln(1 + E_k)], ...]``: quantile bins of μ, E_k = the weighted **mean** of the
  observed tokens in bin k (E[tokens], not exp(E[ln tokens]): a log-scale regressor's
  exp(μ) is a median-like value and under-states the mean of a skewed length
  distribution), made increasing by pool-adjacent-violators and then strictly increasing,
  so the map keeps the order of μ (no new ties in the SJF key).
* :func:`decile_table` reports calibration: rows sorted by predicted tokens into deciles
  (weighted), predicted vs observed mean tokens per decile.
* Applied at run time by :func:`sjf_core.predict._model_file.calibrated_log1p` (metadata ``sjf.calibration``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["fit_calibration", "decile_table", "pav", "quantile_bins"]


def pav(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted isotonic (non-decreasing) fit of ``y`` [K] by pool-adjacent-violators."""
    vals, wts, counts = [], [], []
    for v, ww in zip(np.asarray(y, float), np.asarray(w, float)):
        vals.append(v)
        wts.append(ww)
        counts.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            tw = wts[-2] + wts[-1]
            v2 = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / tw if tw > 0 else (vals[-2] + vals[-1]) / 2
            c = counts[-2] + counts[-1]
            del vals[-2:], wts[-2:], counts[-2:]
            vals.append(v2)
            wts.append(tw)
            counts.append(c)
    return np.repeat(vals, counts)


def quantile_bins(mu, tokens, weights=None, n_bins: int = 20):
    """(μ, tokens, weights) sorted by μ (float64 [N] each) and the index arrays of ``n_bins``
    weighted quantile bins of μ.

    Raises:
        ValueError: fewer than 2 * n_bins rows, or shapes differ.
    """
    m = np.asarray(mu, dtype=np.float64).ravel()
    t = np.asarray(tokens, dtype=np.float64).ravel()
    w = np.ones_like(m) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    if not (m.shape == t.shape == w.shape):
        raise ValueError("mu, tokens and weights differ in shape")
    if len(m) < 2 * n_bins:
        raise ValueError(f"need at least {2 * n_bins} rows to calibrate, got {len(m)}")
    order = np.argsort(m, kind="stable")
    m, t, w = m[order], t[order], w[order]
    edges = np.searchsorted(np.cumsum(w) / w.sum(), np.linspace(0, 1, n_bins + 1)[1:-1])
    return m, t, w, np.split(np.arange(len(m)), edges)


def fit_calibration(mu, tokens, weights=None, n_bins: int = 20, min_step: float = 1e-3) -> list[list[float]]:
    """Knots [[μ_k, ln(1 + E_k)], ...] (strictly increasing in both) from out-of-family outputs.

    Raises:
        ValueError: fewer than 2 * n_bins rows, or shapes differ.
    """
    m, t, w, bins = quantile_bins(mu, tokens, weights, n_bins)
    xs, es, ws = [], [], []
    for idx in bins:
        if len(idx) == 0 or w[idx].sum() <= 0:
            continue
        ww = w[idx]
        xs.append(float(np.average(m[idx], weights=ww)))
        es.append(float(np.average(t[idx], weights=ww)))
        ws.append(float(ww.sum()))
    ys = pav(np.log1p(es), np.array(ws))
    out_x, out_y = [xs[0]], [float(ys[0])]
    for x, y in zip(xs[1:], ys[1:]):
        if x <= out_x[-1] + 1e-9:
            continue
        out_x.append(x)
        out_y.append(max(float(y), out_y[-1] + min_step))
    return [[a, b] for a, b in zip(out_x, out_y)]


def decile_table(pred_tokens, tokens, weights=None, n: int = 10) -> list[dict]:
    """Per (weighted) decile of predicted tokens: {decile, rows, predicted_mean, observed_mean,
    observed_median}."""
    p = np.asarray(pred_tokens, dtype=np.float64).ravel()
    t = np.asarray(tokens, dtype=np.float64).ravel()
    w = np.ones_like(p) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    order = np.argsort(p, kind="stable")
    p, t, w = p[order], t[order], w[order]
    cw = np.cumsum(w) / w.sum()
    edges = np.searchsorted(cw, np.linspace(0, 1, n + 1)[1:-1])
    out = []
    for d, idx in enumerate(np.split(np.arange(len(p)), edges)):
        if len(idx) == 0:
            continue
        ww = w[idx]
        out.append({"decile": d + 1, "rows": int(len(idx)), "predicted_mean": float(np.average(p[idx], weights=ww)),
                    "observed_mean": float(np.average(t[idx], weights=ww)),
                    "observed_median": float(np.median(t[idx]))})
    return out
