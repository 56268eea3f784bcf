"""``sjf train``: train a length predictor (XGBoost -> ONNX) from JSONL logs, with its model card.

Examples::

    sjf train --data conversations/ --name paper_v1 --preset paper --layout v1
    sjf train --data conversations/ --name default --preset general \
              --calibration models/default.calibration.json      # the shipped default (docs/predictor.md)
    sjf train --data conversations/ --name default_v2 --preset rank --layout v2
    sjf train --base models/default.onnx --data my_logs.jsonl --name my_domain
"""

from __future__ import annotations

import json
import sys

HELP = "train a length predictor from JSONL logs (split by prompt) and export ONNX + model card"


def _parse_value(v: str):
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


def add_arguments(p) -> None:
    p.add_argument("--data", nargs="+", required=True,
                   help="JSONL files, directories of *.jsonl, or globs ({prompt, response_tokens} rows, "
                        "or production logs {features, layout, completion_tokens})")
    p.add_argument("--name", required=True, help="model name: writes <out-dir>/<name>.onnx, .json (card), .xgb.ubj")
    p.add_argument("--out-dir", default="models", help="output directory (default models/)")
    p.add_argument("--preset", choices=("paper", "rank", "general"), default="rank",
                   help="paper: 3-class classifier, 300 trees, depth 6, lr 0.1, seed 42 (paper §4.3); "
                        "rank: regressor on ln(1 + answer tokens) (default); general: rank on layout v3 with the "
                        "cross-fitted word lexicon, chosen by leave-one-source-out (the shipped default)")
    p.add_argument("--spread", default=None, metavar="JSON",
                   help="spread calibration knots [[mu, median ln(1+tokens), sigma], ...] for the class "
                        "probabilities and stated sizes, as written by benchmarks/stated_sizes_loso.py --write-spread")
    p.add_argument("--calibration", default=None, metavar="JSON",
                   help="calibration knots [[mu, ln(1+E[tokens])], ...] for expected_tokens, as written by "
                        "`sjf eval --loso --write-calibration`")
    p.add_argument("--kind", choices=("classifier", "regressor"), default=None, help="override the preset's kind")
    p.add_argument("--layout", choices=("v1", "v2", "v3", "v2l"), default=None,
                   help="feature layout (default v2, v3 for --preset general; with --base, the base model's layout)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override an XGBoost parameter, e.g. --set max_depth=4 (repeatable)")
    p.add_argument("--nthread", type=int, default=2, help="XGBoost threads (default 2)")
    p.add_argument("--no-balance", action="store_true", help="classifier: do not weight classes equally")
    p.add_argument("--source-weighting", choices=("sqrt", "equal", "none"), default=None,
                   help="weight of a prompt from a source with n training prompts: 1/sqrt(n), 1/n, or 1 "
                        "(default: sqrt for --preset rank, none for --preset paper)")
    p.add_argument("--base", default=None,
                   help="continue boosting from this model (domain retraining, paper §5.1); needs its .xgb.ubj")
    p.add_argument("--exclude-source", action="append", default=[], help="drop rows of this source (repeatable)")
    p.add_argument("--only-source", action="append", default=[], help="keep only rows of this source (repeatable)")
    p.add_argument("--exclude-family", action="append", default=[],
                   help="leave out a LOSO source family (sjf_lab.loso.FAMILIES): every row whose prompt occurs in "
                        "that family's files, in any file (for a benchmark on a family the model never saw)")
    p.add_argument("--compare", action="append", default=[], help="also evaluate this ONNX model in the card")
    p.add_argument("--no-eval", action="store_true", help="skip the held-out evaluation in the card")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def _read_knots(args) -> dict | None:
    """{"calibration": knots, "spread": knots} from the --calibration / --spread JSON files (a list, or
    a dict with "knots"); None after printing the error when a file cannot be read."""
    knots = {}
    for opt in ("calibration", "spread"):
        path = getattr(args, opt)
        if not path:
            continue
        try:
            with open(path) as f:
                k = json.load(f)
            knots[opt] = k.get("knots", k) if isinstance(k, dict) else k
        except (OSError, ValueError) as exc:
            print(f"sjf train: cannot read --{opt} {path}: {exc}", file=sys.stderr)
            return None
    return knots


def run(args) -> int:
    try:
        from sjf_lab.train import PRESETS, TrainConfig, train_model
        from sjf_lab.train_data import build_dataset, load_rows
    except ImportError as exc:
        print(f"sjf train needs the 'train' extra (pip install 'clairvoyant-sjf[train]'): {exc}", file=sys.stderr)
        return 1
    params = dict(PRESETS[args.preset])
    kind = args.kind or params.pop("kind")
    params.pop("kind", None)
    recipe = {}
    if args.preset == "general":
        from sjf_lab.train import GENERAL_RECIPE

        recipe = dict(GENERAL_RECIPE)
    layout = args.layout or recipe.get("layout", "v2")
    if args.base:  # domain retraining: continue the base model's boosting with its kind and layout
        from sjf_core.predict._predictor import PredictorError, load_predictor
        from sjf_lab.train import DOMAIN_PARAMS

        try:
            info = load_predictor(args.base).info
        except PredictorError as exc:
            print(f"sjf train: {exc}", file=sys.stderr)
            return 1
        if args.layout and args.layout != info.layout:
            print(f"sjf train: --layout {args.layout} differs from the base model's layout {info.layout}",
                  file=sys.stderr)
            return 2
        layout, kind = info.layout, info.kind
        params = dict(DOMAIN_PARAMS)
    for kv in args.set:
        if "=" not in kv:
            print(f"sjf train: --set wants KEY=VALUE, got {kv!r}", file=sys.stderr)
            return 2
        k, v = kv.split("=", 1)
        params[k.strip()] = _parse_value(v.strip())
    stats: dict = {}
    try:
        rows = load_rows(args.data, stats)
    except FileNotFoundError as exc:
        print(f"sjf train: {exc}", file=sys.stderr)
        return 1
    if args.only_source:
        rows = [r for r in rows if r.source in set(args.only_source)]
    if args.exclude_source:
        rows = [r for r in rows if r.source not in set(args.exclude_source)]
    if args.exclude_family:
        from sjf_lab.loso import family_of

        held = {r.key for r in rows if family_of(r.source) in set(args.exclude_family)}
        rows = [r for r in rows if r.key not in held]
    if not rows:
        print("sjf train: no usable rows", file=sys.stderr)
        return 1
    ds = build_dataset(rows)
    knots = _read_knots(args)
    if knots is None:
        return 1
    cfg = TrainConfig(name=args.name, kind=kind, layout=layout, params=params, nthread=args.nthread,
                      balance=not args.no_balance, base=args.base,
                      source_weighting=args.source_weighting or ("none" if args.preset == "paper" else "sqrt"),
                      lexicon=bool(recipe.get("lexicon")) and layout in ("v3", "v2l") and not args.base,
                      lexicon_alpha=float(recipe.get("lexicon_alpha", 1.0)), target=recipe.get("target", "median"),
                      calibration=knots.get("calibration"), spread=knots.get("spread"))
    evaluate_fn = None
    if not args.no_eval:
        from sjf_lab.evaluate import evaluate, format_table, length_peer, model_peer

        test_rows = ds.rows_of("test")

        def evaluate_fn(path):
            peers = [model_peer(path, args.name)] + [model_peer(c) for c in args.compare] + [length_peer()]
            res = evaluate(test_rows, peers)
            print(format_table(res))
            return {"split": "test (held out by prompt)", **res}

    try:
        card = train_model(cfg, ds, args.out_dir, progress=not args.no_progress, evaluate_fn=evaluate_fn,
                           data_stats=stats)
    except (ValueError, FileNotFoundError) as exc:
        print(f"sjf train: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out_dir}/{args.name}.onnx and {args.name}.json "
          f"({card['training_examples']['train_prompts']} train prompts, {card['train_seconds']} s)")
    return 0
