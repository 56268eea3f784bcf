"""Train a length predictor with XGBoost and export it to ONNX with its model card.

Two model kinds (issue 3):

* ``classifier``: 3-class softmax on Short/Medium/Long (paper §4.3 preset ``paper``:
  300 trees, depth 6, learning rate 0.1, seed 42), classes balanced by sample weight as in
  the paper's balanced training sets. Ordering key: P(Long).
* ``regressor``: squared error on ln(1 + answer tokens) (the ranking-oriented objective);
  ordering key: expected answer tokens. Its residual std on validation becomes
  ``sjf.log_sigma`` so the predictor can turn μ into class probabilities.

Data handling (split by prompt, cross-file de-duplication, one label per prompt) is in
:mod:`sjf_lab.train_data`. Needs the ``train`` extra (xgboost, onnxmltools, onnx, scipy).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from sjf_core.policy._entry import LONG_MIN_TOKENS, SHORT_MAX_TOKENS, class_of_tokens
from sjf_core.predict._layouts import get_layout
from sjf_core.predict._predictor import META_BOUNDS, META_KIND, META_LAYOUT, META_SIGMA
from sjf_lab.train_data import SPLIT_SEED, TEST_FRACTION, VAL_FRACTION, Dataset, model_offsets, target_of

__all__ = ["PRESETS", "GENERAL_RECIPE", "DOMAIN_PARAMS", "fit_domain", "TrainConfig", "featurize_groups", "group_weights", "fit", "export_onnx", "train_model"]

#: XGBoost hyper-parameter presets. ``paper`` is the paper's §4.3 replication preset.
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"kind": "classifier", "n_estimators": 300, "max_depth": 6, "learning_rate": 0.1, "random_state": 42},
    "rank": {"kind": "regressor", "n_estimators": 600, "max_depth": 6, "learning_rate": 0.05, "random_state": 42,
             "subsample": 0.8, "colsample_bytree": 0.8, "min_child_weight": 2.0, "reg_lambda": 2.0,
             "early_stopping_rounds": 60},
    # chosen by leave-one-source-out (docs/predictor.md): layout v3 with the cross-fitted lexicon
    "general": {"kind": "regressor", "n_estimators": 500, "max_depth": 6, "learning_rate": 0.08, "random_state": 42,
                "subsample": 0.8, "colsample_bytree": 0.8, "min_child_weight": 2.0, "reg_lambda": 2.0,
                "early_stopping_rounds": 40},
}

#: What the ``general`` preset adds to the parameters (see :class:`TrainConfig`).
GENERAL_RECIPE = {"layout": "v2l", "lexicon": True, "lexicon_alpha": 3.0, "target": "median"}


#: Continued boosting for domain retraining (``sjf train --base``, paper §5.1): small trees
#: added on top of the base model; how many (possibly none) is chosen by cross-validation
#: on the user's logs (:func:`fit_domain`).
DOMAIN_PARAMS: dict[str, Any] = {"n_estimators": 300, "max_depth": 4, "learning_rate": 0.05, "subsample": 0.9,
                                 "min_child_weight": 2.0, "reg_lambda": 5.0, "early_stopping_rounds": 20,
                                 "random_state": 42}


@dataclass
class TrainConfig:
    """What to train.

    Attributes:
        name: model name (file ``<out_dir>/<name>.onnx`` and ``<name>.json`` card).
        kind: "classifier" or "regressor".
        layout: feature layout ("v1", "v2").
        params: XGBoost parameters (see :data:`PRESETS`).
        nthread: XGBoost threads (keep 1–2 on a shared machine).
        balance: classifier only: weight classes equally.
        base: path of a base model to continue boosting from (domain retraining), or None.
        source_weighting: "sqrt" (default): a prompt from a source with n training prompts
            weighs ∝ 1/sqrt(n), so small sources (the arena sets) are not drowned by
            ShareGPT; "equal": ∝ 1/n; "none": every prompt weighs 1.
        lexicon: layouts v3 / v2l only: fit the hashed word lexicon (:mod:`sjf_core.predict._lexicon`) on the
            training prompts, cross-fitted (3 folds by prompt hash) for the trees' training
            column, and store it in the model file.
        lexicon_alpha: the lexicon's ridge penalty.
        target: "median" or "demean" (:func:`sjf_lab.train_data.target_of`).
        calibration: knots [[μ, ln(1 + E[tokens])], ...] stored as ``sjf.calibration``
            (:func:`sjf_core.predict._calibration.fit_calibration` on out-of-family predictions), or None.
        spread: knots [[μ, median ln(1 + tokens), σ], ...] stored as ``sjf.calibration_spread``
            (:func:`sjf_lab.calibrate.fit_spread` on out-of-family predictions), or None.
    """

    name: str
    kind: str = "classifier"
    layout: str = "v1"
    params: dict = field(default_factory=dict)
    nthread: int = 2
    balance: bool = True
    base: str | None = None
    source_weighting: str = "sqrt"
    lexicon: bool = False
    lexicon_alpha: float = 1.0
    target: str = "median"
    calibration: list | None = None
    spread: list | None = None


def group_weights(ds: Dataset, keys: Sequence[str], mode: str = "sqrt") -> np.ndarray | None:
    """Training weight per prompt group (see :attr:`TrainConfig.source_weighting`): float64
    [len(keys)], mean 1, or None for ``mode="none"``. A prompt found in several sources
    takes the mean of their weights."""
    if mode == "none":
        return None
    if mode not in ("sqrt", "equal"):
        raise ValueError(f"unknown source weighting {mode!r}; choose sqrt, equal or none")
    srcs = [ds.group_sources(k) for k in keys]
    counts: dict[str, int] = {}
    for ss in srcs:
        for s in ss:
            counts[s] = counts.get(s, 0) + 1
    power = 0.5 if mode == "sqrt" else 1.0
    w = np.array([np.mean([counts[s] ** -power for s in ss]) for ss in srcs], dtype=np.float64)
    return w / w.mean() if len(w) else w


def featurize_groups(ds: Dataset, keys: Sequence[str], layout: str, progress: bool = False) -> np.ndarray:
    """Features of one example per prompt group: float32 [len(keys), F].

    Production-log groups use their logged features (they must be in ``layout``).

    Raises:
        ValueError: a logged row's layout differs from ``layout``.
    """
    lay = get_layout(layout)
    X = np.zeros((len(keys), lay.n_features), dtype=np.float32)
    it = enumerate(keys)
    if progress:
        from tqdm import tqdm

        it = tqdm(it, total=len(keys), desc=f"features {layout}", unit="prompt", leave=False)
    for i, k in it:
        r = ds.group_example(k)
        if r.prompt is not None:
            X[i] = lay.extract(r.prompt)
        else:
            if r.layout != layout or r.features is None or len(r.features) != lay.n_features:
                raise ValueError(f"logged features of layout {r.layout!r} cannot train a {layout} model")
            X[i] = r.features
    return X


def _with_lexicon(cfg: TrainConfig, ds: Dataset, tr_keys, va_keys, X, Xv, y):
    """Fit the lexicon on the training prompts; fill the ``lexicon`` column: cross-fitted
    (3 folds by prompt hash) for the training rows, the full lexicon for validation."""
    from sjf_core.predict._lexicon import buckets_of
    from sjf_lab.lexicon_fit import cross_fit_scores, fit_lexicon

    lay = get_layout(cfg.layout)
    if lay.names[-1] != "lexicon":
        raise ValueError(f"the lexicon needs a layout with a lexicon column (v3, v2l), not {cfg.layout}")
    LEXICON_COL = lay.n_features - 1
    b_tr = [buckets_of(ds.group_example(k).prompt) for k in tr_keys]
    b_va = [buckets_of(ds.group_example(k).prompt) for k in va_keys]
    w = group_weights(ds, tr_keys, cfg.source_weighting)
    fold = np.array([int(k[13:15], 16) % 3 for k in tr_keys])
    X, Xv = X.copy(), Xv.copy()
    X[:, LEXICON_COL] = cross_fit_scores(b_tr, y, fold, w, cfg.lexicon_alpha)
    lexicon = fit_lexicon(b_tr, y, w, cfg.lexicon_alpha)
    Xv[:, LEXICON_COL] = [lexicon.score_buckets(b) for b in b_va]
    return lexicon, X, Xv


def _progress_callback(total: int, desc: str):
    import xgboost as xgb
    from tqdm import tqdm

    class _Bar(xgb.callback.TrainingCallback):
        def before_training(self, model):
            self.bar = tqdm(total=total, desc=desc, unit="tree", leave=False)
            return model

        def after_iteration(self, model, epoch, evals_log):
            self.bar.update(1)
            return False

        def after_training(self, model):
            self.bar.close()
            return model

    return _Bar()


def _class_weights(y_cls: np.ndarray) -> np.ndarray:
    counts = np.bincount(y_cls, minlength=3).astype(np.float64)
    w = np.where(counts > 0, len(y_cls) / (3.0 * np.maximum(counts, 1)), 0.0)
    return w[y_cls]


def fit(cfg: TrainConfig, X: np.ndarray, y_log: np.ndarray, X_val: np.ndarray | None = None,
        y_val_log: np.ndarray | None = None, progress: bool = True, base_model=None,
        sample_weight: np.ndarray | None = None):
    """Fit an XGBoost model on features ``X`` [N, F] and targets ln(1 + tokens) [N].

    Returns:
        (fitted sklearn-API XGBoost model, log_sigma) — log_sigma is the regressor's
        validation residual std of ln(1 + tokens) (1.0 for classifiers).
    """
    import xgboost as xgb

    params = dict(cfg.params)
    params.pop("kind", None)
    es = params.pop("early_stopping_rounds", None)
    n_trees = int(params.get("n_estimators", 100))
    callbacks = [_progress_callback(n_trees, f"train {cfg.name}")] if progress else None
    common = dict(n_jobs=cfg.nthread, tree_method="hist", callbacks=callbacks)
    if es is not None and X_val is not None and len(X_val) > 0:
        common["early_stopping_rounds"] = int(es)
    if cfg.kind == "classifier":
        y = np.array([class_of_tokens(math.expm1(v)) for v in y_log], dtype=np.int64)
        w = _class_weights(y) if cfg.balance else None
        if sample_weight is not None:
            w = sample_weight if w is None else w * sample_weight
        model = xgb.XGBClassifier(objective="multi:softprob", num_class=3, eval_metric="mlogloss", **common, **params)
        eval_set = None
        if X_val is not None and len(X_val) > 0:
            yv = np.array([class_of_tokens(math.expm1(v)) for v in y_val_log], dtype=np.int64)
            eval_set = [(X_val, yv)]
        model.fit(X, y, sample_weight=w, eval_set=eval_set, verbose=False, xgb_model=base_model)
        return model, 1.0
    if cfg.kind != "regressor":
        raise ValueError(f"unknown model kind {cfg.kind!r}")
    model = xgb.XGBRegressor(objective="reg:squarederror", eval_metric="rmse", **common, **params)
    eval_set = [(X_val, y_val_log)] if X_val is not None and len(X_val) > 0 else None
    model.fit(X, y_log, sample_weight=sample_weight, eval_set=eval_set, verbose=False, xgb_model=base_model)
    if X_val is not None and len(X_val) > 1:
        resid = model.predict(X_val) - y_val_log
    else:
        resid = model.predict(X) - y_log
    sigma = float(np.sqrt(np.mean(resid ** 2))) if len(resid) else 1.0
    return model, max(sigma, 0.05)


def fit_domain(cfg: TrainConfig, X: np.ndarray, y_log: np.ndarray, base_booster, nfold: int = 5,
               progress: bool = False, sample_weight: np.ndarray | None = None):
    """Domain retraining (paper §5.1): continue boosting ``base_booster`` on a user's logs.

    The number of added trees is chosen by ``nfold``-fold cross-validation (RMSE of
    ln(1 + tokens)) with the base model's output as the starting margin; when no number of
    trees beats the base model's own cross-validated error, none is added. Regressors only.

    Args:
        X: features [N, F]; y_log: ln(1 + answer tokens) [N] (all of the user's training rows).

    Returns:
        (sklearn-API model containing the base trees plus the added ones, log_sigma, added_trees)
    """
    import xgboost as xgb

    if cfg.kind != "regressor":
        raise ValueError("domain retraining (--base) supports regressor base models")
    params = dict(cfg.params)
    params.pop("kind", None)
    es = int(params.pop("early_stopping_rounds", 20))
    max_rounds = int(params.pop("n_estimators", 300))
    seed = int(params.pop("random_state", 42))
    # A booster saved after early stopping carries best_iteration, which would make predict()
    # and the ONNX export ignore every tree added after it: continue from a clean copy.
    base_booster = base_booster.copy()
    base_booster.set_attr(best_iteration=None, best_score=None, best_ntree_limit=None)
    margin = base_booster.predict(xgb.DMatrix(X), output_margin=True)
    base_rmse = float(np.sqrt(np.mean((margin - y_log) ** 2))) if len(y_log) else 1.0
    rounds, cv_rmse = 0, base_rmse
    nfold = max(2, min(nfold, len(y_log) // 10))
    if len(y_log) >= 20:
        dtrain = xgb.DMatrix(X, label=y_log, base_margin=margin, weight=sample_weight, nthread=cfg.nthread)
        booster_params = {"objective": "reg:squarederror", "eval_metric": "rmse", "nthread": cfg.nthread,
                          "tree_method": "hist", "eta": params.pop("learning_rate", 0.05), "seed": seed, **params}
        cv = xgb.cv(booster_params, dtrain, num_boost_round=max_rounds, nfold=nfold, early_stopping_rounds=es,
                    seed=seed, shuffle=True, as_pandas=False)
        test_rmse = np.asarray(cv["test-rmse-mean"], dtype=np.float64)
        i_best = int(np.argmin(test_rmse))
        if test_rmse[i_best] < base_rmse:
            rounds, cv_rmse = i_best + 1, float(test_rmse[i_best])
    p = dict(cfg.params)
    p.pop("kind", None)
    p.pop("early_stopping_rounds", None)
    p["n_estimators"] = max(rounds, 1)
    callbacks = [_progress_callback(p["n_estimators"], f"domain {cfg.name}")] if progress else None
    model = xgb.XGBRegressor(objective="reg:squarederror", n_jobs=cfg.nthread, tree_method="hist", callbacks=callbacks,
                             **p)
    if rounds == 0:  # keep the base model: add one tree that predicts 0 (learning rate 0)
        model.set_params(learning_rate=0.0)
    model.fit(X, y_log, sample_weight=sample_weight, xgb_model=base_booster, verbose=False)
    return model, max(cv_rmse, 0.05), rounds


def export_onnx(model, kind: str, layout: str, n_features: int, path: str | Path, log_sigma: float = 1.0,
                extra_meta: dict | None = None) -> Path:
    """Convert a fitted XGBoost model to ONNX (onnxmltools) with the ``sjf.*`` metadata.

    The input is ``float_input`` float32 [N, n_features]; a classifier outputs ``label`` and
    ``probabilities`` [N, 3], a regressor ``variable`` [N, 1] = ln(1 + tokens).
    """
    import onnx
    from onnxmltools import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType

    onx = convert_xgboost(model, initial_types=[("float_input", FloatTensorType([None, n_features]))],
                          target_opset=15)
    meta = {META_LAYOUT: layout, META_KIND: kind, META_BOUNDS: f"{SHORT_MAX_TOKENS},{LONG_MIN_TOKENS}"}
    if kind == "regressor":
        meta[META_SIGMA] = f"{log_sigma:.6f}"
    meta.update({k: str(v) for k, v in (extra_meta or {}).items()})
    onnx.helper.set_model_props(onx, meta)
    onx.producer_name = "clairvoyant-sjf"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(onx, str(path))
    return path


def train_model(cfg: TrainConfig, ds: Dataset, out_dir: str | Path, progress: bool = True,
                evaluate_fn=None, data_stats: dict | None = None) -> dict:
    """Train on the train split, early-stop on validation, export, and write the model card.

    Args:
        cfg: :class:`TrainConfig`.
        ds: the :class:`~sjf_lab.train_data.Dataset` (fixed split by prompt).
        out_dir: directory for ``<name>.onnx``, ``<name>.json`` (card) and
            ``<name>.xgb.ubj`` (the booster, for ``--base`` continued training).
        evaluate_fn: callable(model_path) -> metrics dict on the held-out test split.

    Returns:
        The model card (dict), also written to ``<out_dir>/<name>.json``.
    """
    import xgboost as xgb

    t0 = time.time()
    lay = get_layout(cfg.layout)
    tr_keys, va_keys = ds.keys("train"), ds.keys("val")
    X = featurize_groups(ds, tr_keys, cfg.layout, progress)
    Xv = featurize_groups(ds, va_keys, cfg.layout, progress)
    if cfg.target == "median":
        y = np.array([ds.group_target(k) for k in tr_keys])
        yv = np.array([ds.group_target(k) for k in va_keys])
    else:
        off = model_offsets(ds, tr_keys)
        y, yv = target_of(ds, tr_keys, cfg.target, off), target_of(ds, va_keys, cfg.target, off)
    extra_meta = {}
    lexicon = None
    if cfg.base and Path(cfg.base).suffix == ".onnx":  # keep the base model's lexicon and calibration
        from sjf_core.predict._predictor import load_predictor

        bp = load_predictor(cfg.base)
        if bp._lexicon is not None:
            extra_meta.update(bp._lexicon.to_meta())
            col = lay.n_features - 1
            for keys, XX in ((tr_keys, X), (va_keys, Xv)):
                for j, k in enumerate(keys):
                    ex = ds.group_example(k)
                    if ex.prompt is not None:
                        XX[j, col] = bp._lexicon.score(ex.prompt)
        if bp.info.calibration is not None and cfg.calibration is None:
            extra_meta["sjf.calibration"] = bp.info.metadata["sjf.calibration"]
        if bp.info.spread is not None and cfg.spread is None:
            extra_meta["sjf.calibration_spread"] = bp.info.metadata["sjf.calibration_spread"]
    if cfg.lexicon:
        if cfg.base:
            raise ValueError("--base (domain retraining) keeps the base model's lexicon; do not refit it")
        lexicon, X, Xv = _with_lexicon(cfg, ds, tr_keys, va_keys, X, Xv, y)
        extra_meta.update(lexicon.to_meta())
    if cfg.calibration is not None:
        extra_meta["sjf.calibration"] = json.dumps([[round(float(a), 5), round(float(b), 5)]
                                                    for a, b in cfg.calibration])
    if cfg.spread is not None:
        extra_meta["sjf.calibration_spread"] = json.dumps([[round(float(v), 5) for v in k] for k in cfg.spread])
    base_booster = None
    if cfg.base:
        bpath = Path(cfg.base)
        booster_file = bpath.with_suffix(".xgb.ubj") if bpath.suffix == ".onnx" else bpath
        if not booster_file.is_file():
            raise FileNotFoundError(f"--base needs the XGBoost booster saved beside the model: {booster_file} "
                                    "(models trained by `sjf train` have one; published ONNX-only models do not)")
        base_booster = xgb.Booster()
        base_booster.load_model(str(booster_file))
    w = group_weights(ds, tr_keys, cfg.source_weighting)
    added = None
    if base_booster is not None:  # cross-validated on all of the user's train+val prompts
        Xa, ya = np.vstack([X, Xv]), np.concatenate([y, yv])
        wa = group_weights(ds, tr_keys + va_keys, cfg.source_weighting)
        model, sigma, added = fit_domain(cfg, Xa, ya, base_booster, progress=progress, sample_weight=wa)
    else:
        model, sigma = fit(cfg, X, y, Xv, yv, progress=progress, sample_weight=w)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    onnx_path = out_dir / f"{cfg.name}.onnx"
    export_onnx(model, cfg.kind, cfg.layout, lay.n_features, onnx_path, sigma,
                {"sjf.name": cfg.name, "sjf.target": "log1p_tokens" if cfg.kind == "regressor" else "class",
                 **extra_meta})
    best_it = getattr(model, "best_iteration", None)
    booster = model.get_booster()
    if best_it is not None and cfg.kind == "regressor" and best_it + 1 < booster.num_boosted_rounds():
        booster = booster[: best_it + 1]  # the trees the ONNX export keeps (early stopping)
    booster.save_model(str(out_dir / f"{cfg.name}.xgb.ubj"))
    card = {
        "name": cfg.name,
        "file": onnx_path.name,
        "created_by": "sjf train (clairvoyant-sjf)",
        "kind": cfg.kind,
        "objective": "multi:softprob (3 classes)" if cfg.kind == "classifier" else "reg:squarederror on ln(1 + answer tokens)",
        "score": "P(Long)" if cfg.kind == "classifier" else (
            "expected answer tokens (calibration map on out-of-family predictions)" if cfg.calibration is not None
            else "expected answer tokens (log-normal mean)"),
        "feature_layout": {"name": cfg.layout, "n_features": lay.n_features, "names": list(lay.names)},
        "class_bounds_tokens": {"short_lt": SHORT_MAX_TOKENS, "long_ge": LONG_MIN_TOKENS,
                                "tokens": "len(answer) // 4 (paper §3.2)"},
        "params": {k: v for k, v in cfg.params.items()},
        "best_iteration": int(best_it) if best_it is not None else None,
        "log_sigma": sigma if cfg.kind == "regressor" else None,
        "base_model": cfg.base,
        "domain_trees_added": added,
        "split": {"by": "prompt (whitespace-normalised), across files", "seed": SPLIT_SEED,
                  "test_fraction": TEST_FRACTION, "val_fraction": VAL_FRACTION},
        "labels": "one example per distinct prompt; target = median ln(1 + answer tokens) over its answers",
        "source_weighting": cfg.source_weighting,
        "target": cfg.target,
        "lexicon": ({"buckets": lexicon.n_buckets, "alpha": cfg.lexicon_alpha, "cross_fit_folds": 3}
                    if lexicon is not None else None),
        "calibration_knots": cfg.calibration,
        "calibration_spread_knots": cfg.spread,
        "training_examples": {"train_prompts": len(tr_keys), "val_prompts": len(va_keys)},
        "data": {"sources": ds.counts(), "files": {Path(k).name: v for k, v in (data_stats or {}).items()}},
        "train_seconds": round(time.time() - t0, 1),
    }
    if evaluate_fn is not None:
        card["metrics"] = evaluate_fn(str(onnx_path))
    with open(out_dir / f"{cfg.name}.json", "w") as f:
        json.dump(card, f, indent=1, sort_keys=False)
        f.write("\n")
    return card
