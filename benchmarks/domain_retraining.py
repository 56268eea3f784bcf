"""Domain retraining learning curve (paper §5.1): a user with N logged requests from a source
the base model never saw.

1. Train a base model (``sjf train --preset rank``, v2) on every source except ``--holdout``.
2. For N in {90, 180, 240, 500} and ``--seeds`` draws of N prompts from the held-out source's
   train+val split (by prompt; never its test split):
   * **base + N**: continue boosting the base model on the N rows, as many trees as 5-fold
     cross-validation on those rows supports, possibly none (what ``sjf train --base`` does);
   * **N only**: a model trained from scratch on the N rows;
3. Score the held-out source's test split (row level, paper Eq. 2) and print mean ± std.

    python benchmarks/domain_retraining.py --data conversations/ --holdout lima_train
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
    ap.add_argument("--holdout", default="lima_train", help="source held out from base training")
    ap.add_argument("--sizes", type=int, nargs="+", default=[90, 180, 240, 500])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--nthread", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import xgboost as xgb

    from sjf_core.predict._rank_metrics import ranking_accuracy
    from sjf_lab.train import DOMAIN_PARAMS, PRESETS, TrainConfig, featurize_groups, fit, fit_domain, group_weights
    from sjf_lab.train_data import build_dataset, load_rows

    t0 = time.time()
    rows = load_rows(args.data)
    ds = build_dataset(rows)
    src_of = {k: set(ds.group_sources(k)) for k in ds.groups}
    hold = args.holdout
    if not any(hold in s for s in src_of.values()):
        print(f"no rows of source {hold!r}", file=sys.stderr)
        return 1
    # base training data: every prompt that never occurs in the held-out source
    base_tr = [k for k in ds.keys("train") if hold not in src_of[k]]
    base_va = [k for k in ds.keys("val") if hold not in src_of[k]]
    pool = [k for k in ds.keys("train") + ds.keys("val") if hold in src_of[k]]
    test_rows = [r for r in ds.rows_of("test") if r.source == hold]
    te_keys = sorted({r.key for r in test_rows})
    kidx = {k: i for i, k in enumerate(te_keys)}
    ri = np.array([kidx[r.key] for r in test_rows])
    rt = np.array([r.tokens for r in test_rows], dtype=np.float64)
    n_s, n_l = int((rt < 200).sum()), int((rt >= 800).sum())
    print(f"holdout {hold}: pool {len(pool)} prompts, test {len(te_keys)} prompts / {len(test_rows)} rows "
          f"({n_s} Short, {n_l} Long); base: {len(base_tr)} train prompts", file=sys.stderr)

    def target(keys):
        # the user's logs: the held-out source's own answers only
        return np.array([float(np.median([np.log1p(ds.rows[i].tokens) for i in ds.groups[k]
                                          if ds.rows[i].source == hold])) for k in keys])

    Xte = featurize_groups(ds, te_keys, "v2")
    params = dict(PRESETS["rank"])
    params.pop("kind")
    cfg = TrainConfig(name="base", kind="regressor", layout="v2", params=params, nthread=args.nthread)
    Xb, yb = featurize_groups(ds, base_tr, "v2"), np.array([ds.group_target(k) for k in base_tr])
    Xbv, ybv = featurize_groups(ds, base_va, "v2"), np.array([ds.group_target(k) for k in base_va])
    base, _ = fit(cfg, Xb, yb, Xbv, ybv, progress=False, sample_weight=group_weights(ds, base_tr, "sqrt"))
    booster = base.get_booster()

    def acc(model) -> float:
        return ranking_accuracy(model.predict(Xte)[ri], rt)[0]

    zero = acc(base)
    print(f"base model ready ({time.time() - t0:.0f} s); zero-shot {100 * zero:.1f}%", file=sys.stderr)
    Xpool = featurize_groups(ds, pool, "v2")
    ypool = target(pool)
    results = {"holdout": hold, "zero_shot": zero, "test_short": n_s, "test_long": n_l, "curve": {}}
    dparams = dict(DOMAIN_PARAMS)
    for n in args.sizes:
        if n > len(pool):
            print(f"N={n}: only {len(pool)} prompts in the pool, skipped", file=sys.stderr)
            continue
        cont, scratch, trees = [], [], []
        for seed in range(args.seeds):
            rng = np.random.default_rng(1000 + seed)
            idx = rng.choice(len(pool), size=n, replace=False)
            n_val = max(5, n // 10)
            fit_i, val_i = idx[n_val:], idx[:n_val]
            dcfg = TrainConfig(name="domain", kind="regressor", layout="v2", nthread=args.nthread,
                               params={**dparams, "random_state": seed})
            m, _, added = fit_domain(dcfg, Xpool[idx], ypool[idx], booster)
            cont.append(acc(m))
            trees.append(added)
            scfg = TrainConfig(name="scratch", kind="regressor", layout="v2", nthread=args.nthread,
                               params={**params, "random_state": seed, "n_estimators": 300})
            m2, _ = fit(scfg, Xpool[fit_i], ypool[fit_i], Xpool[val_i], ypool[val_i], progress=False)
            scratch.append(acc(m2))
        results["curve"][n] = {"base_plus_n": [float(v) for v in cont], "n_only": [float(v) for v in scratch],
                               "trees_added": trees}
        print(f"  N={n} done ({time.time() - t0:.0f} s)", file=sys.stderr)

    print(f"Domain retraining on held-out source '{hold}' (test split: {n_s} Short / {n_l} Long rows; "
          f"ranking accuracy %, mean ± std over {args.seeds} draws)")
    print(f"{'N logged prompts':>17}  {'base zero-shot':>15}  {'base + N (--base)':>18}  {'trees added':>12}  "
          f"{'N only (scratch)':>17}")
    for n, r in results["curve"].items():
        c, s = np.array(r["base_plus_n"]), np.array(r["n_only"])
        print(f"{n:>17}  {100 * zero:>15.1f}  {100 * c.mean():>10.1f} ± {100 * c.std():>4.1f}  "
              f"{np.median(r['trees_added']):>12.0f}  {100 * s.mean():>9.1f} ± {100 * s.std():>4.1f}")
    print(f"({time.time() - t0:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
