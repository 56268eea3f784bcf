"""Run the leave-one-source-out protocol (:mod:`sjf_lab.loso`) for training recipes and fixed models.

Contract:

* A :class:`Recipe` says how to train (feature layout and columns, target, objective, XGBoost
  parameters). :func:`run_loso` trains it once per held-out family on every other prompt
  (early stopping on a fixed 10 % of those training prompts, by prompt hash) and scores the
  held-out family's prompts: out-of-fold scores, never seen in training.
* Fixed peers (a shipped ONNX model, the paper's Model A, the prompt-length rule) are scored on
  the same rows; a shipped model trained on the fixed split **has seen** 70 % of every
  family's prompts, which the report says next to its numbers.
* Features of every distinct prompt are computed once per layout and cached under
  ``cache_dir`` (default :func:`default_cache_dir`; never inside the repository).
* Needs the ``train`` extra (xgboost). Returns plain dicts (JSON-serialisable after NaN cleaning).
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from sjf_core.predict._layouts import get_layout
from sjf_lab.loso import FamilyData, bootstrap_macro, family_data, family_of, loso_folds
from sjf_lab.train_data import Dataset, model_key, model_offsets, split_of, target_of

__all__ = ["Recipe", "RECIPES", "FeatureStore", "target_of", "fit_recipe", "run_loso", "default_cache_dir"]


def default_cache_dir() -> Path:
    """``$SJF_CACHE_DIR``, else the user's cache directory for clairvoyant-sjf
    (``platformdirs.user_cache_dir``: ``$XDG_CACHE_HOME/clairvoyant-sjf`` or
    ``~/.cache/clairvoyant-sjf`` on Linux, ``~/Library/Caches/clairvoyant-sjf`` on macOS)."""
    env = os.environ.get("SJF_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("clairvoyant-sjf", appauthor=False))


@dataclass
class Recipe:
    """How to train one candidate model.

    Attributes:
        name: display name.
        layout: feature layout name.
        drop_groups: feature groups (``GROUPS`` of the layout's module) whose columns are zeroed.
        target: "median" (median ln(1 + tokens) over a prompt's answers) or "demean" (median over
            its answers of ln(1 + tokens) minus the answering model's mean: one model's verbosity
            is not noise to the others).
        objective: "reg" (squared error, one example per prompt) or "pairwise" (XGBoost
            rank:pairwise on answer rows grouped by answering model, at most 40 rows per prompt).
        params: XGBoost parameters.
        source_weighting: "sqrt", "equal" or "none" (see :func:`sjf_lab.train.group_weights`).
        lexicon: fill the v3 ``lexicon`` column (cross-fitted in training); lexicon_alpha: its ridge penalty.
        blend: score = (1 − blend) × trees + blend × lexicon score (both ln(1 + tokens) scale).
    """

    name: str
    layout: str = "v2"
    drop_groups: tuple[str, ...] = ()
    target: str = "median"
    objective: str = "reg"
    params: dict = field(default_factory=dict)
    source_weighting: str = "sqrt"
    lexicon: bool = False
    lexicon_alpha: float = 1.0
    blend: float = 0.0


#: Fast LOSO parameters (about 15 s per fold on 2 cores); the shipped model uses the same.
LOSO_PARAMS = {"n_estimators": 500, "max_depth": 6, "learning_rate": 0.08, "subsample": 0.8,
               "colsample_bytree": 0.8, "min_child_weight": 2.0, "reg_lambda": 2.0, "random_state": 42,
               "early_stopping_rounds": 40}

RECIPES: dict[str, Recipe] = {
    "today": Recipe("today (v2, median)", "v2", params=LOSO_PARAMS),
}


class FeatureStore:
    """Features of every prompt group of a dataset in one layout, cached on disk.

    ``X(keys)`` returns float32 [len(keys), F] rows in ``keys`` order.
    """

    def __init__(self, ds: Dataset, layout: str, cache_dir: str | Path | None = None, progress: bool = False):
        lay = get_layout(layout)
        self.layout = lay
        self.keys = sorted(ds.groups)
        self.index = {k: i for i, k in enumerate(self.keys)}
        h = hashlib.sha256()
        h.update(layout.encode() + b"\x00" + "\x00".join(lay.names).encode())
        import importlib

        from sjf_core.predict._layouts import LAYOUTS

        for mod in ("sjf_core.predict._features", LAYOUTS[layout][0], "sjf_core.predict._features_v2"):  # the extractor's code
            src = getattr(importlib.import_module(mod), "__file__", None)
            if src:
                h.update(Path(src).read_bytes())
        for k in self.keys:
            h.update(k.encode())
        cdir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        path = cdir / f"features-{layout}-{h.hexdigest()[:16]}.npy"
        X = None
        if path.is_file():
            try:
                X = np.load(path)
                if X.shape != (len(self.keys), lay.n_features):
                    X = None
            except (OSError, ValueError):
                X = None
        if X is None:
            t0 = time.time()
            texts = [ds.group_example(k).prompt for k in self.keys]
            if any(t is None for t in texts):
                raise ValueError("LOSO needs prompt text for every row (production logs cannot be held out by family)")
            X = lay.extract_many(texts)
            if progress:
                print(f"features {layout}: {len(texts)} prompts in {time.time() - t0:.1f} s -> {path}", file=sys.stderr)
            try:
                cdir.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".tmp{os.getpid()}.npy")
                np.save(tmp, X)
                os.replace(tmp, path)
            except OSError:
                pass
        self._X = X
        self._ds = ds
        self._buckets = None

    def X(self, keys: Sequence[str]) -> np.ndarray:
        return self._X[[self.index[k] for k in keys]]

    def buckets(self, keys: Sequence[str]) -> list:
        """Lexicon bucket ids (:func:`sjf_core.predict._lexicon.buckets_of`) per prompt of ``keys``."""
        if self._buckets is None:
            from sjf_core.predict._lexicon import buckets_of

            self._buckets = [buckets_of(self._ds.group_example(k).prompt) for k in self.keys]
        return [self._buckets[self.index[k]] for k in keys]


def _drop_mask(layout_name: str, groups: Sequence[str], n: int) -> np.ndarray | None:
    if not groups:
        return None
    import importlib

    from sjf_core.predict._layouts import LAYOUTS

    mod = importlib.import_module(LAYOUTS[layout_name][0])
    table = getattr(mod, "GROUPS_" + layout_name.upper())
    keep = np.ones(n, dtype=bool)
    for g in groups:
        if g not in table:
            raise ValueError(f"unknown feature group {g!r} of layout {layout_name}; known: {sorted(table)}")
        keep[table[g]] = False
    return keep


def fit_recipe(recipe: Recipe, ds: Dataset, train_keys: Sequence[str], store: FeatureStore, nthread: int = 2):
    """Train ``recipe`` on ``train_keys`` (early stopping on their fixed 10 % validation part).

    Returns:
        (predict(keys) -> float64 [len(keys)] scores (higher = longer), info dict with
        ``best_iteration``, ``log_sigma`` (validation residual std, regression only), ``model``).
    """
    import xgboost as xgb

    from sjf_lab.train import group_weights

    tr = [k for k in train_keys if split_of(k) != "val"]
    va = [k for k in train_keys if split_of(k) == "val"]
    keep = _drop_mask(recipe.layout, recipe.drop_groups, store.layout.n_features)

    def feats(keys):
        X = store.X(keys)
        if keep is not None:
            X = X.copy()
            X[:, ~keep] = 0.0
        return X

    params = dict(recipe.params)
    es = params.pop("early_stopping_rounds", None)
    offsets = model_offsets(ds, train_keys) if recipe.target == "demean" else None
    lexicon = None
    if recipe.lexicon:  # cross-fitted lexicon column for the training prompts, full lexicon elsewhere
        from sjf_lab.lexicon_fit import cross_fit_scores, fit_lexicon

        if store.layout.names[-1] != "lexicon":
            raise ValueError(f"recipe {recipe.name!r}: layout {recipe.layout} has no lexicon column")
        LEXICON_COL = store.layout.n_features - 1

        b_tr = store.buckets(tr)
        y_lex = target_of(ds, tr, recipe.target, offsets)
        w_lex = group_weights(ds, tr, recipe.source_weighting)
        fold = np.array([int(k[13:15], 16) % 3 for k in tr])
        oof = {} if recipe.objective == "lexicon" else dict(
            zip(tr, cross_fit_scores(b_tr, y_lex, fold, w_lex, recipe.lexicon_alpha)))
        lexicon = fit_lexicon(b_tr, y_lex, w_lex, recipe.lexicon_alpha)
        base_feats = feats

        def feats(keys):  # noqa: F811 - the lexicon column added
            X = base_feats(keys).copy()
            X[:, LEXICON_COL] = [oof[k] if k in oof else lexicon.score_buckets(b)
                                 for k, b in zip(keys, store.buckets(keys))]
            return X
    if recipe.objective == "reg":
        X, Xv = feats(tr), feats(va)
        y = target_of(ds, tr, recipe.target, offsets)
        yv = target_of(ds, va, recipe.target, offsets)
        w = group_weights(ds, tr, recipe.source_weighting)
        model = xgb.XGBRegressor(objective="reg:squarederror", eval_metric="rmse", tree_method="hist", n_jobs=nthread,
                                 early_stopping_rounds=es, **params)
        model.fit(X, y, sample_weight=w, eval_set=[(Xv, yv)], verbose=False)
        sigma = float(np.sqrt(np.mean((model.predict(Xv) - yv) ** 2)))
    elif recipe.objective == "lexicon":  # the lexicon score alone (a linear model over words)
        if lexicon is None:
            raise ValueError("objective 'lexicon' needs lexicon=True")

        def predict(keys):
            return np.array([lexicon.score_buckets(b) for b in store.buckets(list(keys))], dtype=np.float64)

        return predict, {"best_iteration": None, "log_sigma": float("nan"), "model": None, "lexicon": lexicon,
                         "offsets": offsets}
    elif recipe.objective == "pairwise":
        from sjf_lab.loso import cap_rows_per_prompt

        def grouped(keys):
            rows = cap_rows_per_prompt([ds.rows[i] for k in keys for i in ds.groups[k]], 40)
            rows.sort(key=lambda r: model_key(r.source, r.model))
            kidx = {k: i for i, k in enumerate(keys)}
            Xk = feats(keys)
            X = Xk[[kidx[r.key] for r in rows]]
            y = np.array([math.log1p(r.tokens) for r in rows], dtype=np.float32)
            qn = [model_key(r.source, r.model) for r in rows]
            qid = np.unique(qn, return_inverse=True)[1]
            order = np.argsort(qid, kind="stable")
            return X[order], y[order], qid[order]

        X, y, q = grouped(tr)
        Xv, yv, qv = grouped(va)
        model = xgb.XGBRanker(objective="rank:pairwise", eval_metric="ndcg@50", tree_method="hist", n_jobs=nthread,
                              early_stopping_rounds=es, lambdarank_pair_method="mean",
                              lambdarank_num_pair_per_sample=8, **params)
        model.fit(X, y, qid=q, eval_set=[(Xv, yv)], eval_qid=[qv], verbose=False)
        sigma = float("nan")
    else:
        raise ValueError(f"unknown objective {recipe.objective!r}")

    def predict(keys):
        keys = list(keys)
        out = np.asarray(model.predict(feats(keys)), dtype=np.float64)
        if recipe.blend and lexicon is not None:
            lx = np.array([lexicon.score_buckets(b) for b in store.buckets(keys)], dtype=np.float64)
            out = (1.0 - recipe.blend) * out + recipe.blend * lx
        return out

    return predict, {"best_iteration": getattr(model, "best_iteration", None), "log_sigma": sigma, "model": model,
                     "lexicon": lexicon, "offsets": offsets}


def run_loso(ds: Dataset, recipes: Sequence[Recipe] = (), fixed: Sequence[tuple[str, str, Callable]] = (),
             families: Sequence[str] | None = None, cap: int | None = 40, n_boot: int = 200, nthread: int = 2,
             cache_dir=None, progress: bool = True, keep_models: bool = False) -> dict:
    """LOSO for ``recipes`` (trained per fold) and ``fixed`` peers (name, layout, score(X) -> [P]);
    a fixed peer with layout ``"text"`` gets the prompt keys instead of features.

    Returns:
        {"families": [...], "peers": {name: {"point": {fam: metrics}, "macro", "macro_ci",
        "family_ci", "macro_families"}}, "oof": {name: {fam: (FamilyData, row scores)}} (not
        JSON), "fit": {recipe: {fam: {"best_iteration", "log_sigma", "seconds"}}}}.
    """
    folds = loso_folds(ds, families)
    fams = list(folds)
    fdata = {f: family_data(ds, f, cap) for f in fams}
    stores: dict[str, FeatureStore] = {}

    def store(layout):
        if layout not in stores:
            stores[layout] = FeatureStore(ds, layout, cache_dir, progress)
        return stores[layout]

    out = {"families": fams, "peers": {}, "oof": {}, "fit": {}, "models": {}}
    for name, layout, score in fixed:
        per = {}
        for f in fams:
            fd = fdata[f]
            pk = list(dict.fromkeys(fd.keys.tolist()))
            sc = score(pk) if layout == "text" else score(store(layout).X(pk))
            per[f] = (fd, np.asarray(sc, dtype=np.float64)[fd.groups])
        out["oof"][name] = per
    for rec in recipes:
        per, fit_info = {}, {}
        for f in fams:
            t0 = time.time()
            predict, info = fit_recipe(rec, ds, folds[f][0], store(rec.layout), nthread)
            fd = fdata[f]
            pk = list(dict.fromkeys(fd.keys.tolist()))
            per[f] = (fd, predict(pk)[fd.groups])
            fit_info[f] = {"best_iteration": info["best_iteration"], "log_sigma": info["log_sigma"],
                           "seconds": round(time.time() - t0, 1)}
            if keep_models:
                out["models"].setdefault(rec.name, {})[f] = (predict, info)
            if progress:
                print(f"  {rec.name} / {f}: {fit_info[f]['seconds']} s, trees {info['best_iteration']}",
                      file=sys.stderr)
        out["oof"][rec.name] = per
        out["fit"][rec.name] = fit_info
    for name, per in out["oof"].items():
        out["peers"][name] = bootstrap_macro(per, n_boot=n_boot)
    return out


def recipe_from_preset(preset: str, name: str | None = None) -> Recipe:
    """The :class:`Recipe` of an ``sjf train`` preset ("rank": today's v2 regressor; "general")."""
    from sjf_lab.train import GENERAL_RECIPE, PRESETS

    params = {k: v for k, v in PRESETS[preset].items() if k != "kind"}
    if preset == "general":
        g = GENERAL_RECIPE
        return Recipe(name or "general (v2l: v2 + lexicon)", g["layout"], target=g["target"], params=params,
                      lexicon=g["lexicon"], lexicon_alpha=g["lexicon_alpha"])
    if preset == "rank":
        return Recipe(name or "rank (v2)", "v2", params=params)
    raise ValueError(f"LOSO trains regressor presets (rank, general), not {preset!r}")


def oof_calibration(res: dict, name: str, cross_fit: bool = True) -> dict:
    """Calibration of a recipe's out-of-family outputs μ (its LOSO scores, ln(1 + tokens)).

    Families weigh equally (row weights 1 / rows of the family). Returns {"knots": map fitted on
    all families, "raw": decile table of the log-normal-free exp(μ) − 1 (the uncalibrated
    median-like value), "calibrated": decile table of the map, cross-fitted when ``cross_fit``
    (each family's rows through a map fitted on the other families)}.
    """
    from sjf_core.predict._calibration import decile_table, fit_calibration
    from sjf_core.predict._predictor import calibrated_log1p

    per = res["oof"][name]
    mus, toks, ws, fam = [], [], [], []
    for f, (fd, sc) in per.items():
        mus.append(sc)
        toks.append(fd.tokens)
        ws.append(np.full(len(sc), 1.0 / len(sc)))
        fam.append(np.full(len(sc), f, dtype=object))
    mu, tok, w, fam = (np.concatenate(a) for a in (mus, toks, ws, fam))
    knots = fit_calibration(mu, tok, w)
    cal = np.empty_like(mu)
    for f in per:
        m = fam == f
        if cross_fit:
            k = fit_calibration(mu[~m], tok[~m], w[~m])
        else:
            k = knots
        kk = (np.array([a for a, _ in k]), np.array([b for _, b in k]))
        cal[m] = np.expm1(calibrated_log1p(mu[m], kk))
    return {"knots": knots, "raw": decile_table(np.expm1(mu), tok, w), "calibrated": decile_table(cal, tok, w),
            "weights": "families weigh equally"}


def _pct(x) -> str:
    return "—" if x is None or x != x else f"{100 * x:.1f}"


def _tau(x) -> str:
    return "—" if x is None or x != x else f"{x:.3f}"


def format_loso(res: dict) -> str:
    """Plain-text LOSO table: per family and macro (with 95 % bootstrap interval), per peer:
    row-level Eq. 2 (%), within-model Eq. 2 (%), Kendall τ-b."""
    peers = list(res["peers"])
    fams = res["families"]
    lines = []
    for metric, title, fmt in (("row_eq2", "row-level Eq. 2 ranking accuracy (%)", _pct),
                               ("within_eq2", "within-model Eq. 2 ranking accuracy (%), multi-model families",
                                _pct), ("tau_b", "Kendall τ-b, row level", _tau)):
        w = max(14, *(len(p) for p in peers))
        head = f"{'held-out family':<18}{'S':>7}{'L':>7}  " + "  ".join(f"{p[:w]:>{w}}" for p in peers)
        lines += [f"LOSO {title}", head, "-" * len(head)]
        for f in fams:
            p0 = res["peers"][peers[0]]["point"][f]
            key = "row_eq2_any" if metric == "row_eq2" else metric
            cells = []
            for p in peers:
                v = res["peers"][p]["point"][f][key]
                mark = "" if metric != "row_eq2" or p0["row_eq2"] == p0["row_eq2"] else "*"
                cells.append(f"{fmt(v) + mark:>{w}}")
            lines.append(f"{f:<18}{p0['short']:>7.0f}{p0['long']:>7.0f}  " + "  ".join(cells))
        lines.append("-" * len(head))
        cells = []
        for p in peers:
            r = res["peers"][p]
            lo, hi = r["macro_ci"][metric]
            cells.append(f"{fmt(r['macro'][metric]):>{w}}")
        lines.append(f"{'macro':<32}  " + "  ".join(cells))
        cells = []
        for p in peers:
            lo, hi = res["peers"][p]["macro_ci"][metric]
            cells.append(f"{'[' + fmt(lo) + ', ' + fmt(hi) + ']':>{w}}")
        lines.append(f"{'  95% bootstrap':<32}  " + "  ".join(cells))
        if metric == "row_eq2":
            lines.append("  * fewer than 20 Short or Long rows: shown, not in the macro")
        lines.append("")
    return "\n".join(lines)
