"""Feature-group ablation of the length predictor, in the style of paper Table 5.

Trains the ranking regressor (``sjf train --preset rank``: XGBoost on ln(1 + answer tokens),
sqrt source weighting) on the fixed train split (by prompt), with every v2 feature group in
turn removed, and reports row-level ranking accuracy (paper Eq. 2) on the held-out test
split per source with >= 30 Short and >= 30 Long rows, as the change in percentage points
against the full v2 layout. Also shows v1 (the paper's 19) and each group added to v1 alone.
Each cell is the mean over ``--seeds`` XGBoost seeds.

    python benchmarks/predictor_ablation.py --data conversations/ [--seeds 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", required=True)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--nthread", type=int, default=2)
    ap.add_argument("--add-to-v1", action="store_true", help="also train v1 + each group")
    ap.add_argument("--fast", action="store_true", help="learning rate 0.1, at most 300 trees (about half the time)")
    ap.add_argument("--json", default=None, help="write the raw numbers here")
    ap.add_argument("--drop", action="append", default=[], metavar="G1,G2",
                    help="also train v2 without these groups together (repeatable); skips the drop-one rows "
                         "when given with --only-combined")
    ap.add_argument("--only-combined", action="store_true", help="train only v2 (all) and the --drop variants")
    args = ap.parse_args(argv)

    from sjf_core.predict._features_v2 import FEATURE_NAMES_V2, GROUPS_V2
    from sjf_core.predict._rank_metrics import ranking_accuracy
    from sjf_lab.train import PRESETS, TrainConfig, featurize_groups, fit, group_weights
    from sjf_lab.train_data import build_dataset, load_rows

    t0 = time.time()
    ds = build_dataset(load_rows(args.data))
    keys = {p: ds.keys(p) for p in ("train", "val", "test")}
    X = {p: featurize_groups(ds, keys[p], "v2") for p in keys}
    y = {p: np.array([ds.group_target(k) for k in keys[p]]) for p in keys}
    w = group_weights(ds, keys["train"], "sqrt")
    test_rows = ds.rows_of("test")
    kidx = {k: i for i, k in enumerate(keys["test"])}
    ri = np.array([kidx[r.key] for r in test_rows])
    rs = np.array([r.source for r in test_rows])
    rt = np.array([r.tokens for r in test_rows], dtype=np.float64)
    sources = [s for s in sorted(set(rs.tolist())) if (rt[rs == s] < 200).sum() >= 30 and (rt[rs == s] >= 800).sum() >= 30]
    print(f"data ready in {time.time() - t0:.0f} s: {len(keys['train'])} train / {len(keys['val'])} val / "
          f"{len(keys['test'])} test prompts; sources shown: {', '.join(sources)}", file=sys.stderr)

    params = dict(PRESETS["rank"])
    params.pop("kind")
    if args.fast:
        params.update(learning_rate=0.1, n_estimators=300, early_stopping_rounds=40)

    def run(cols: list[int]) -> dict:
        accs = {s: [] for s in sources}
        for seed in range(args.seeds):
            cfg = TrainConfig(name="ablation", kind="regressor", layout="v2",
                              params={**params, "random_state": 42 + seed}, nthread=args.nthread)
            model, _ = fit(cfg, X["train"][:, cols], y["train"], X["val"][:, cols], y["val"], progress=False,
                           sample_weight=w)
            sc = model.predict(X["test"][:, cols])[ri]
            for s in sources:
                m = rs == s
                accs[s].append(ranking_accuracy(sc[m], rt[m])[0])
        out = {s: float(np.mean(v)) for s, v in accs.items()}
        out["macro"] = float(np.mean([out[s] for s in sources]))
        return out

    all_cols = list(range(len(FEATURE_NAMES_V2)))
    v1_cols = list(range(19))
    results: dict[str, dict] = {}
    results["v2 (all groups)"] = full = run(all_cols)
    if not args.only_combined:
        results["v1 (paper 19)"] = run(v1_cols)
        for g, cols in GROUPS_V2.items():
            drop = set(cols)
            results[f"v2 − {g}"] = run([c for c in all_cols if c not in drop])
            print(f"  {g} done ({time.time() - t0:.0f} s)", file=sys.stderr)
    for spec in args.drop:
        groups = [g.strip() for g in spec.split(",") if g.strip()]
        unknown = [g for g in groups if g not in GROUPS_V2]
        if unknown:
            print(f"unknown groups {unknown}; known: {list(GROUPS_V2)}", file=sys.stderr)
            return 2
        drop = {c for g in groups for c in GROUPS_V2[g]}
        results[f"v2 − {{{', '.join(groups)}}}"] = run([c for c in all_cols if c not in drop])
    if args.add_to_v1:
        for g, cols in GROUPS_V2.items():
            if not g.startswith("v1:"):
                results[f"v1 + {g}"] = run(v1_cols + list(cols))

    cols_ = sources + ["macro"]
    wname = max([28] + [len(k) + 2 for k in results])
    head = f"{'variant':<{wname}}" + "".join(f"{s[:14]:>16}" for s in cols_)
    print("Ranking accuracy (%, row level, held-out test split by prompt); drop-one rows show Δ pp vs v2 (all)")
    print(head)
    print("-" * len(head))
    for name, res in results.items():
        if name.startswith("v2 −"):  # also the combined drops
            cells = "".join(f"{100 * (res[s] - full[s]):>+16.2f}" for s in cols_)
        else:
            cells = "".join(f"{100 * res[s]:>16.1f}" for s in cols_)
        print(f"{name:<{wname}}{cells}")
    print(f"({args.seeds} seed(s) per cell, {'fast settings, ' if args.fast else ''}{time.time() - t0:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"sources": sources, "results": results, "seeds": args.seeds}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
