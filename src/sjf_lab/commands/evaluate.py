"""``sjf eval``: ranking accuracy (paper Eq. 2), 3-class accuracy and Kendall τ-b of length
predictors on the fixed held-out split (by prompt), per source, with peers in the same run.

Examples::

    sjf eval --data conversations/                      # default vs Model A vs length rule
    sjf eval --data conversations/ --model models/x.onnx --json
    sjf eval --data conversations/ --cross-source        # paper Table 7 style matrix
    sjf eval --data conversations/ --loso                # leave-one-source-out (model selection)
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

HELP = "evaluate length predictors on held-out-by-prompt data: ranking accuracy, class accuracy, Kendall τ-b"


def add_arguments(p) -> None:
    p.add_argument("--data", nargs="+", required=True,
                   help="JSONL files, directories or globs of {prompt, response_tokens, model} lines (as for "
                        "sjf train; the format and its public sources: docs/data.md)")
    p.add_argument("--model", action="append", default=[],
                   help="ONNX model to evaluate (repeatable); 'default' = the shipped model. "
                        "Default: the shipped model and the paper's Model A (models/reference/)")
    p.add_argument("--no-length-rule", action="store_true", help="leave out the prompt-length rule peer")
    p.add_argument("--split", choices=("test", "val", "train", "all"), default="test",
                   help="which part of the fixed split to score (default test)")
    p.add_argument("--all-sources", action="store_true",
                   help="show every source, not only those with >= 30 Short and >= 30 Long rows")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--json-out", default=None, metavar="PATH", help="also write the JSON result to PATH")
    p.add_argument("--cross-source", action="store_true",
                   help="also train one model per source on its train split and score it on every source's "
                        "test split (paper Table 7 style)")
    p.add_argument("--matrix-preset", choices=("paper", "rank"), default="rank", help="preset of the matrix models")
    p.add_argument("--matrix-layout", choices=("v1", "v2"), default="v2", help="layout of the matrix models")
    p.add_argument("--matrix-min-prompts", type=int, default=150,
                   help="train a matrix model only for sources with at least this many train prompts (default 150)")
    p.add_argument("--nthread", type=int, default=2, help="XGBoost threads for --cross-source / --loso (default 2)")
    p.add_argument("--loso", action="store_true",
                   help="leave-one-source-out over source families (sjf_lab.loso.FAMILIES): train each --loso-preset "
                        "without the family, score its rows; the --model files and the length rule are scored on the "
                        "same rows. Row-level and within-model Eq. 2, Kendall τ-b, macro with bootstrap intervals")
    p.add_argument("--loso-preset", action="append", default=[], choices=("rank", "general"),
                   help="training recipe(s) to run through LOSO (default: rank and general)")
    p.add_argument("--family", action="append", default=[], help="hold out only these families (repeatable)")
    p.add_argument("--cap", type=int, default=40,
                   help="LOSO: at most this many answer rows per prompt (multi-model files; default 40, 0 = all)")
    p.add_argument("--boot", type=int, default=200, help="LOSO: bootstrap resamples of prompts (default 200)")
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="LOSO feature cache (default: $SJF_CACHE_DIR, else the user cache directory "
                        "$XDG_CACHE_HOME/clairvoyant-sjf, i.e. ~/.cache/clairvoyant-sjf on Linux; docs/data.md)")
    p.add_argument("--calibration-report", action="store_true",
                   help="LOSO: calibration of expected tokens per decile on the out-of-family predictions")
    p.add_argument("--write-calibration", default=None, metavar="JSON",
                   help="LOSO: write the calibration knots of the general recipe's out-of-family outputs here "
                        "(for sjf train --calibration)")


def _default_models() -> list[tuple[str, str]]:
    from sjf_core.predict._predictor import default_model_path

    out = [("default", str(default_model_path()))]
    model_a = Path(default_model_path()).parent / "reference" / "clairvoyant_model_a_sharegpt.onnx"
    if not model_a.is_file():
        model_a = Path(__file__).resolve().parents[3] / "models" / "reference" / "clairvoyant_model_a_sharegpt.onnx"
    if model_a.is_file():
        out.append(("Model A (paper)", str(model_a)))
    return out


def _clean(o):
    if isinstance(o, float) and math.isnan(o):
        return None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_clean(v) for v in o]
    return o


def cross_source_matrix(ds, preset: str, layout: str, min_prompts: int, nthread: int, progress: bool = True) -> dict:
    """Train one model per source (its train-split prompts only) and score every source's test rows.

    Returns {"train_sources": [...], "test_sources": [...], "accuracy": {train: {test: acc}}}.
    """
    import numpy as np

    from sjf_core.predict._rank_metrics import ranking_accuracy
    from sjf_lab.train import PRESETS, TrainConfig, featurize_groups, fit
    from sjf_lab.evaluate import MIN_PER_CLASS

    params = dict(PRESETS[preset])
    kind = params.pop("kind")
    tr_keys = ds.keys("train")
    va_keys = ds.keys("val")
    te_keys = ds.keys("test")
    src_of = {k: set(ds.group_sources(k)) for k in ds.groups}
    train_sources = sorted({s for k in tr_keys for s in src_of[k]})
    train_sources = [s for s in train_sources if sum(1 for k in tr_keys if s in src_of[k]) >= min_prompts]
    test_rows = ds.rows_of("test")
    rs = np.array([r.source for r in test_rows])
    rt = np.array([r.tokens for r in test_rows], dtype=np.float64)
    test_sources = [s for s in sorted(set(rs.tolist()))
                    if (rt[rs == s] < 200).sum() >= MIN_PER_CLASS and (rt[rs == s] >= 800).sum() >= MIN_PER_CLASS]
    Xte = featurize_groups(ds, te_keys, layout)
    kidx = {k: i for i, k in enumerate(te_keys)}
    ri = np.array([kidx[r.key] for r in test_rows])
    acc: dict[str, dict] = {}
    it = train_sources
    if progress:
        from tqdm import tqdm

        it = tqdm(train_sources, desc="cross-source models", unit="model", leave=False, file=sys.stderr)
    for src in it:
        ktr = [k for k in tr_keys if src in src_of[k]]
        kva = [k for k in va_keys if src in src_of[k]]
        X = featurize_groups(ds, ktr, layout)
        y = np.array([ds.group_target(k) for k in ktr])
        Xv = featurize_groups(ds, kva, layout) if kva else None
        yv = np.array([ds.group_target(k) for k in kva]) if kva else None
        cfg = TrainConfig(name=f"matrix-{src}", kind=kind, layout=layout, params=params, nthread=nthread)
        model, _ = fit(cfg, X, y, Xv, yv, progress=False)
        if kind == "regressor":
            sc = model.predict(Xte)
        else:
            sc = model.predict_proba(Xte)[:, 2]
        sc = np.asarray(sc, dtype=np.float64)[ri]
        acc[src] = {t: ranking_accuracy(sc[rs == t], rt[rs == t])[0] for t in test_sources}
    return {"train_sources": train_sources, "test_sources": test_sources, "accuracy": acc,
            "preset": preset, "layout": layout}


def format_matrix(m: dict) -> str:
    tests = m["test_sources"]
    w = 14
    head = f"{'train ↓ / test →':<30}" + "".join(f"{t[:w - 1]:>{w}}" for t in tests)
    lines = [f"Cross-source ranking accuracy (%), preset {m['preset']}, layout {m['layout']}; "
             "diagonal = in-distribution (held-out prompts)", head, "-" * len(head)]
    for s in m["train_sources"]:
        cells = ""
        for t in tests:
            v = m["accuracy"][s][t]
            mark = "*" if s == t else " "
            cells += f"{('—' if v != v else f'{100 * v:.1f}') + mark:>{w}}"
        lines.append(f"{s:<30}{cells}")
    return "\n".join(lines)


def _run_loso(args, ds, models) -> int:
    from sjf_lab.loso_run import format_loso, oof_calibration, recipe_from_preset, run_loso
    from sjf_core.predict._predictor import PredictorError, load_predictor

    fixed = []
    try:
        for name, path in models:
            pred = load_predictor(path)
            if pred._lexicon is not None:  # the lexicon column is filled from text, not cached features
                texts_of = {k: ds.group_example(k).prompt for k in ds.groups}
                fixed.append((name, "text", lambda keys, p=pred: p.score_many([texts_of[k] for k in keys])))
            else:
                fixed.append((name, pred.info.layout, pred.score_features))
    except PredictorError as exc:
        print(f"sjf eval: {exc}", file=sys.stderr)
        return 1
    if not args.no_length_rule:
        fixed.append(("prompt-length rule", "v1", lambda X: X[:, 0].astype(float)))
    presets = args.loso_preset or ["rank", "general"]
    recipes = [recipe_from_preset(p, f"LOSO-trained {p}") for p in presets]
    res = run_loso(ds, recipes, fixed, families=args.family or None, cap=args.cap, n_boot=args.boot,
                   nthread=args.nthread, cache_dir=args.cache_dir, progress=not args.json)
    out = {"families": res["families"], "peers": res["peers"], "fit": res["fit"], "models": dict(models),
           "note": "fixed models trained on the fixed split saw ~70% of every family's prompts"}
    gen = next((r.name for r in recipes if "general" in r.name), None)
    if (args.calibration_report or args.write_calibration) and gen is not None:
        cal = oof_calibration(res, gen)
        out["calibration"] = cal
        if args.write_calibration:
            with open(args.write_calibration, "w") as f:
                json.dump({"knots": cal["knots"], "recipe": gen, "weights": cal["weights"]}, f, indent=1)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(_clean(out), f, indent=1)
    if args.json:
        print(json.dumps(_clean(out), indent=1))
        return 0
    print(f"leave-one-source-out: {len(res['families'])} families, at most {args.cap or 'all'} rows per prompt, "
          f"{args.boot} bootstrap resamples of prompts; fixed models: " + ", ".join(f"{n} = {p}" for n, p in models))
    print("(a fixed model trained on the fixed split has seen ~70% of every family's prompts; "
          "LOSO-trained rows have not seen the family at all)\n")
    print(format_loso(res))
    if "calibration" in out:
        for which in ("raw", "calibrated"):
            print(f"calibration of {gen}, {which} (out-of-family; families weigh equally), tokens per decile")
            print(f"{'decile':>6} {'predicted':>10} {'observed mean':>14} {'observed median':>16}")
            for d in out["calibration"][which]:
                print(f"{d['decile']:>6} {d['predicted_mean']:>10.0f} {d['observed_mean']:>14.0f} "
                      f"{d['observed_median']:>16.0f}")
            print()
    return 0


def run(args) -> int:
    from sjf_lab.evaluate import evaluate, format_table, length_peer, model_peer
    from sjf_core.predict._predictor import PredictorError, default_model_path
    from sjf_lab.train_data import build_dataset, load_rows

    try:
        rows = load_rows(args.data)
    except FileNotFoundError as exc:
        print(f"sjf eval: {exc}", file=sys.stderr)
        return 1
    if not rows:
        print("sjf eval: no usable rows", file=sys.stderr)
        return 1
    ds = build_dataset(rows)
    eval_rows = rows if args.split == "all" else ds.rows_of(args.split)
    models = [("default", str(default_model_path())) if m == "default" else (Path(m).stem, m) for m in args.model]
    models = models or _default_models()
    if args.loso:
        return _run_loso(args, ds, models)
    peers = []
    try:
        for name, path in models:
            peers.append(model_peer(path, name))
    except PredictorError as exc:
        print(f"sjf eval: {exc}", file=sys.stderr)
        return 1
    if not args.no_length_rule:
        peers.append(length_peer())
    res = evaluate(eval_rows, peers)
    res["split"] = args.split
    res["models"] = dict(models)
    if args.cross_source:
        res["cross_source"] = cross_source_matrix(ds, args.matrix_preset, args.matrix_layout,
                                                  args.matrix_min_prompts, args.nthread)
    if args.json:
        print(json.dumps(_clean(res), indent=1))
        return 0
    print(f"split: {args.split} (fixed, by prompt hash); models: " + ", ".join(f"{n} = {p}" for n, p in models))
    print()
    print(format_table(res, "ranking_accuracy", show_all=args.all_sources))
    print()
    print(format_table(res, "kendall_tau_b", show_all=args.all_sources).replace("(%)", "(×100)"))
    if any("class_accuracy" in v for v in res["overall"].values()):
        print()
        print(format_table(res, "class_accuracy", show_all=args.all_sources))
    if args.cross_source:
        print()
        print(format_matrix(res["cross_source"]))
    return 0
