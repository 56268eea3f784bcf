"""Spread calibration of a length regressor (issue 23): the conditional **median and spread** of
ln(1 + answer tokens) given the model output μ, fitted on out-of-family (LOSO) predictions, so
``expected_tokens`` and the class probabilities are on the true scale across the whole range.

Contract:

* :func:`fit_spread` (μ [N], tokens [N], weights [N]) -> knots ``[[μ_k, m_k, s_k], ...]``:
  quantile bins of μ; m_k = the weighted median of ln(1 + tokens) in bin k, made increasing by
  pool-adjacent-violators and then strictly increasing (the map never reorders two prompts);
  s_k = half the weighted 16–84 % range of ln(1 + tokens) in the bin (a robust σ), averaged with
  its neighbours and kept in [0.3, 2.0]. Stored in a model as ``sjf.calibration_spread``
  (:mod:`sjf_core.predict._model_file`); the predictor reads ln(1 + tokens) ~ Normal(m(μ), s(μ)).
  Raises ValueError for fewer than 2 × n_bins rows or shapes that differ.
* :func:`decile_report` -> per decile of the prediction: rows, predicted median / mean tokens,
  observed median / mean tokens (weighted).
* :func:`cross_fitted` applies :func:`fit_spread` family by family: each family's rows through
  knots fitted on the other families (an honest out-of-family check).
"""

from __future__ import annotations

import numpy as np

from sjf_core.predict._calibration import pav, quantile_bins

__all__ = ["fit_spread", "decile_report", "cross_fitted", "wquantile"]


def wquantile(v: np.ndarray, w: np.ndarray, q) -> np.ndarray:
    """Weighted quantile(s) ``q`` of ``v`` (midpoint rule on the cumulative weights)."""
    o = np.argsort(v, kind="stable")
    v, w = np.asarray(v, float)[o], np.asarray(w, float)[o]
    c = (np.cumsum(w) - 0.5 * w) / w.sum()
    return np.interp(q, c, v)


def fit_spread(mu, tokens, weights=None, n_bins: int = 20, min_step: float = 1e-3) -> list[list[float]]:
    """Knots [[μ_k, m_k, s_k], ...] (module docstring)."""
    m, t, w, bins = quantile_bins(mu, tokens, weights, n_bins)
    y = np.log1p(t)
    xs, meds, sds, ws = [], [], [], []
    for idx in bins:
        if len(idx) < 2 or w[idx].sum() <= 0:
            continue
        q16, q50, q84 = wquantile(y[idx], w[idx], [0.16, 0.5, 0.84])
        xs.append(float(np.average(m[idx], weights=w[idx])))
        meds.append(float(q50))
        sds.append(float(q84 - q16) / 2)
        ws.append(float(w[idx].sum()))
    meds = pav(np.array(meds), np.array(ws))
    sds = np.convolve(np.pad(sds, 1, mode="edge"), np.ones(3) / 3, mode="valid").clip(0.3, 2.0)
    out = [[xs[0], float(meds[0]), float(sds[0])]]
    for x, md, sd in zip(xs[1:], meds[1:], sds[1:]):
        if x <= out[-1][0] + 1e-9:
            continue
        out.append([x, max(float(md), out[-1][1] + min_step), float(sd)])
    return out


def decile_report(pred_median, pred_mean, tokens, weights=None, n: int = 10) -> list[dict]:
    """Per (weighted) decile of the predicted median: {decile, rows, predicted_median,
    observed_median, predicted_mean, observed_mean} (tokens)."""
    pm = np.asarray(pred_median, dtype=np.float64).ravel()
    pe = np.asarray(pred_mean, dtype=np.float64).ravel()
    t = np.asarray(tokens, dtype=np.float64).ravel()
    w = np.ones_like(pm) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    o = np.argsort(pm, kind="stable")
    pm, pe, t, w = pm[o], pe[o], t[o], w[o]
    edges = np.searchsorted(np.cumsum(w) / w.sum(), np.linspace(0, 1, n + 1)[1:-1])
    out = []
    for d, idx in enumerate(np.split(np.arange(len(pm)), edges)):
        if len(idx) == 0:
            continue
        ww = w[idx]
        out.append({"decile": d + 1, "rows": int(len(idx)),
                    "predicted_median": float(wquantile(pm[idx], ww, 0.5)),
                    "observed_median": float(wquantile(t[idx], ww, 0.5)),
                    "predicted_mean": float(np.average(pe[idx], weights=ww)),
                    "observed_mean": float(np.average(t[idx], weights=ww))})
    return out


def cross_fitted(mu, tokens, weights, family, **kw) -> tuple[np.ndarray, np.ndarray]:
    """(location m, spread s) per row [N], each family's rows through knots fitted without it."""
    from sjf_core.predict._model_file import spread_at

    mu, tokens, weights, family = (np.asarray(a) for a in (mu, tokens, weights, family))
    loc = np.empty(len(mu))
    sig = np.empty(len(mu))
    for f in np.unique(family):
        held = family == f
        k = np.asarray(fit_spread(mu[~held], tokens[~held], weights[~held], **kw))
        loc[held], sig[held] = spread_at(mu[held], (k[:, 0], k[:, 1], k[:, 2]))
    return loc, sig


def add_spread_to_model(model_path, knots: list, note: str = "") -> None:
    """Store spread knots in an existing model file (ONNX ``sjf.calibration_spread``) and its JSON
    card (``calibration_spread_knots``), trees unchanged: what ``sjf train --spread`` writes, for a
    model already trained. Raises ValueError for knots the predictor would refuse."""
    import json
    from pathlib import Path

    import onnx
    from onnx import helper

    from sjf_core.predict._model_file import META_SPREAD, read_model_info

    meta = json.dumps([[round(float(v), 5) for v in k] for k in knots])
    read_model_info(model_path, {META_SPREAD: meta, "sjf.model_kind": "regressor"})  # validates (raises)
    path = Path(model_path)
    m = onnx.load(str(path))
    props = {p.key: p.value for p in m.metadata_props}
    props[META_SPREAD] = meta
    del m.metadata_props[:]
    helper.set_model_props(m, props)
    onnx.save(m, str(path))
    card = path.with_suffix(".json")
    if card.is_file():
        c = json.loads(card.read_text())
        c["calibration_spread_knots"] = json.loads(meta)
        if note:
            c["calibration_spread_note"] = note
        card.write_text(json.dumps(c, indent=1) + "\n")
