"""Issue 23 under the leave-one-source-out protocol: does reading stated sizes and the spread
calibration keep (or raise) ranking accuracy out of family, and is ``expected_tokens`` calibrated?

Trains the shipped recipe (``general``) once per held-out family (``sjf_lab.loso_run.run_loso``,
the protocol of docs/predictor.md), or loads the out-of-family outputs saved by an earlier run
(``--oof``: a pickle of keys, tokens, models and scores per family, no text; kept outside the
repository). Then, on the same rows:

* **before**: the model's score (today's ordering key: a monotone map of μ);
* **after**: the estimate of :mod:`sjf_core.predict._estimate` — μ through calibration maps
  fitted on the *other* families (cross-fitted), and the prompt's stated size
  (:mod:`sjf_core.predict._stated`) combined with it.

Also the prompts of the data that state a size, against their real answers (within 2x, τ-b).

Prints the LOSO macro table (row-level Eq. 2, within-model Eq. 2, τ-b; 200 bootstrap resamples),
the decile calibration (predicted vs observed median and mean tokens) for ShareGPT, arena and
all families, before and after, and writes the spread knots fitted on all families
(``--write-spread``, for ``sjf_lab.calibrate`` / the shipped model)::

    python benchmarks/stated_sizes_loso.py --data conversations/ \\
        --oof oof_general.pkl --write-spread models/default.spread.json
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys

import numpy as np


def _oof(args, ds):
    if args.oof and os.path.exists(args.oof):
        return pickle.load(open(args.oof, "rb"))
    from sjf_lab.loso_run import recipe_from_preset, run_loso

    rec = recipe_from_preset("general", "LOSO-trained general")
    res = run_loso(ds, [rec], [], cap=40, n_boot=0, nthread=2)
    out = {f: {"keys": fd.keys, "groups": fd.groups, "tokens": fd.tokens, "models": fd.models, "scores": sc}
           for f, (fd, sc) in res["oof"][rec.name].items()}
    if args.oof:
        pickle.dump({"oof": out}, open(args.oof, "wb"))
    return {"oof": out}


class _Bounds:  # what with_stated reads of a model's Knots: the class bounds in ln(1 + tokens)
    ln_lo, ln_hi = np.log1p(200.0), np.log1p(800.0)


_KNOTS = _Bounds()


def _after(per, ds, weights_fn, read: bool):
    """Row scores after: cross-fitted calibration maps + stated sizes. Returns {fam: (loc, sig, exp)}."""
    from sjf_core.predict._calibration import fit_calibration
    from sjf_core.predict._estimate import Estimate, with_stated
    from sjf_core.predict._model_file import calibrated_log1p, spread_at
    from sjf_core.predict._stated import read_size
    from sjf_lab.calibrate import fit_spread

    out = {}
    for f, o in per.items():
        rest = [g for g in per if g != f]
        mu = np.concatenate([per[g]["scores"] for g in rest])
        tok = np.concatenate([per[g]["tokens"] for g in rest])
        w = np.concatenate([weights_fn(per[g]) for g in rest])
        cal = np.asarray(fit_calibration(mu, tok, w))
        spr = np.asarray(fit_spread(mu, tok, w))
        m = o["scores"]
        loc, sig = spread_at(m, (spr[:, 0], spr[:, 1], spr[:, 2]))
        exp = np.maximum(np.expm1(calibrated_log1p(m, (cal[:, 0], cal[:, 1]))), 0.0)
        if read:
            sizes = {}
            for i, k in enumerate(o["keys"]):
                if k not in sizes:
                    sizes[k] = read_size(ds.group_example(k).prompt)
                if sizes[k] is not None:
                    est = with_stated(Estimate(loc[i], sig[i], exp[i], 0.0, 0.0), sizes[k], _KNOTS)
                    loc[i], sig[i], exp[i] = est.loc, est.sig, est.expected
        out[f] = (loc, sig, exp)
    return out


def _found(per, ds, before, after) -> dict:
    """Prompts of the data that state a size, against their real answers (median over a prompt's
    rows): share of predictions within 2x and Kendall tau-b, out-of-family, before vs after."""
    from sjf_lab.rank_metrics import kendall_tau_b
    from sjf_core.predict._stated import read_size

    rows: dict[str, list] = {"count": [], "closed": [], "vague": []}
    for f, o in per.items():
        first: dict[str, list] = {}
        for i, k in enumerate(o["keys"]):
            first.setdefault(k, []).append(i)
        for k, idx in first.items():
            s = read_size(ds.group_example(k).prompt)
            if s is not None:
                rows[s.kind].append((before[f][2][idx[0]], after[f][2][idx[0]], float(np.median(o["tokens"][idx]))))
    out = {}
    for kind, r in rows.items():
        a = np.array(r)
        obs = np.maximum(a[:, 2], 1.0)
        for j, when in ((0, "before"), (1, "after")):
            ratio = np.maximum(a[:, j], 1.0) / obs
            out[f"{kind} {when}"] = {"prompts": len(a), "within_2x": float(np.mean((ratio >= 0.5) & (ratio <= 2))),
                                     "tau_b": float(kendall_tau_b(a[:, j], a[:, 2])),
                                     "median_ratio": float(np.median(ratio))}
            print(f"found {kind:<7}{when:<7} prompts {len(a):>4}  within 2x of the real answer "
                  f"{100 * out[f'{kind} {when}']['within_2x']:5.1f}%  tau-b {out[f'{kind} {when}']['tau_b']:.3f}  "
                  f"median predicted/real {out[f'{kind} {when}']['median_ratio']:.2f}")
    return out


def _macro(per, scores):
    from sjf_lab.loso import FamilyData, bootstrap_macro

    pf = {f: (FamilyData(o["keys"], o["groups"], o["tokens"], o["models"], int(o["groups"].max()) + 1), scores[f])
          for f, o in per.items()}
    return bootstrap_macro(pf, n_boot=200)


def _deciles(per, name, pick):
    from sjf_lab.calibrate import decile_report

    fams = [f for f in per if pick(f)]
    med = np.concatenate([name[f][0] for f in fams])
    mean = np.concatenate([name[f][1] for f in fams])
    tok = np.concatenate([per[f]["tokens"] for f in fams])
    w = np.concatenate([np.full(len(per[f]["tokens"]), 1.0 / len(per[f]["tokens"])) for f in fams])
    return decile_report(med, mean, tok, w)


def _test_split(ds, before_model: str) -> dict:
    """Deciles on the fixed split's test prompts of ShareGPT and arena: the model file
    ``before_model`` without stated sizes vs the shipped model with them."""
    from sjf_core.predict._estimate import Estimate, Knots, base_many, with_stated
    from sjf_core.predict._predictor import Predictor, load_predictor
    from sjf_core.predict._stated import read_size
    from sjf_lab.calibrate import decile_report
    from sjf_lab.loso import family_of

    out = {}
    for fam in ("sharegpt", "arena"):
        rows = [r for r in ds.rows_of("test") if family_of(r.source) == fam]
        texts = sorted({r.key: r.prompt for r in rows}.items())
        idx = {k: i for i, (k, _) in enumerate(texts)}
        tok = np.array([r.tokens for r in rows], dtype=float)
        w = np.ones(len(rows))
        res = {}
        for when, path, sizes in (("before", before_model, False), ("after", None, True)):
            p: Predictor = load_predictor(path)
            p.read_sizes = sizes
            x = p.features_many([t for _, t in texts])
            mu = p._run(x)
            kn = Knots(p.info)
            loc, sig, mean, _, _ = base_many(mu, p.info, kn)
            if sizes:
                for i, (_, t) in enumerate(texts):
                    est = with_stated(Estimate(loc[i], sig[i], mean[i], 0.0, 0.0), read_size(t), kn)
                    loc[i], mean[i] = est.loc, est.expected
            med = np.expm1(loc)
            ri = np.array([idx[r.key] for r in rows])
            res[when] = decile_report(med[ri], mean[ri], tok, w)
            p.read_sizes = True
        out[fam] = res
        for when in ("before", "after"):
            print(f"test split {fam:<9}{when:<7} median pred/obs: "
                  + " ".join(f"{x['predicted_median']:.0f}/{x['observed_median']:.0f}" for x in res[when])
                  + "\n" + " " * 24 + "mean pred/obs:   "
                  + " ".join(f"{x['predicted_mean']:.0f}/{x['observed_mean']:.0f}" for x in res[when]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.environ.get("SJF_DATA_DIR", "conversations"), help="folder of the conversation data (docs/data.md; default $SJF_DATA_DIR or ./conversations)")
    ap.add_argument("--oof", default=None, help="pickle of out-of-family outputs (read if present, else written)")
    ap.add_argument("--write-spread", default=None, metavar="JSON")
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--before-model", default=None, metavar="ONNX",
                    help="also the fixed test split of ShareGPT and arena: this model without stated sizes "
                         "(before) vs the shipped model with them (after), deciles of predicted median/mean")
    args = ap.parse_args()
    from sjf_core.predict._calibration import fit_calibration
    from sjf_core.predict._model_file import calibrated_log1p
    from sjf_lab.calibrate import fit_spread
    from sjf_lab.train_data import build_dataset, load_rows

    ds = build_dataset(load_rows([args.data]))
    per = _oof(args, ds)["oof"]
    fam_w = lambda o: np.full(len(o["scores"]), 1.0 / len(o["scores"]))  # noqa: E731  families weigh equally
    sig0 = 1.0872297855976527  # the shipped model's sjf.log_sigma
    before, after_cal, after = {}, _after(per, ds, fam_w, False), _after(per, ds, fam_w, True)
    for f, o in per.items():  # before: today's mean map (cross-fitted), median = map − σ²/2
        rest = [g for g in per if g != f]
        cal = np.asarray(fit_calibration(np.concatenate([per[g]["scores"] for g in rest]),
                                         np.concatenate([per[g]["tokens"] for g in rest]),
                                         np.concatenate([fam_w(per[g]) for g in rest])))
        le = calibrated_log1p(o["scores"], (cal[:, 0], cal[:, 1]))
        before[f] = (np.expm1(le - 0.5 * sig0 ** 2), np.expm1(le))
    res = {"macro": {"before (model score)": _macro(per, {f: o["scores"] for f, o in per.items()}),
                     "after: calibration only": _macro(per, {f: v[2] for f, v in after_cal.items()}),
                     "after: calibration + stated sizes": _macro(per, {f: v[2] for f, v in after.items()})}}
    res["found"] = _found(per, ds, after_cal, after)
    aft = {f: (np.expm1(v[0]), v[2]) for f, v in after.items()}
    res["deciles"] = {grp: {"before": _deciles(per, before, pick), "after": _deciles(per, aft, pick)}
                      for grp, pick in (("sharegpt", lambda f: f == "sharegpt"), ("arena", lambda f: f == "arena"),
                                        ("all families", lambda f: True))}
    for name, r in res["macro"].items():
        m = r["macro"]
        print(f"{name:<40} row Eq.2 {100 * m['row_eq2']:.1f}  within-model {100 * m['within_eq2']:.1f}  "
              f"tau-b {m['tau_b']:.3f}  sharegpt tau-b {r['point']['sharegpt']['tau_b']:.3f}  "
              f"sharegpt Eq.2 {100 * r['point']['sharegpt']['row_eq2_any']:.1f}")
    for grp, d in res["deciles"].items():
        for when in ("before", "after"):
            cells = " ".join(f"{x['predicted_median']:.0f}/{x['observed_median']:.0f}" for x in d[when])
            means = " ".join(f"{x['predicted_mean']:.0f}/{x['observed_mean']:.0f}" for x in d[when])
            print(f"{grp:<14}{when:<7} median pred/obs: {cells}\n{'':<21} mean pred/obs:   {means}")
    if args.before_model:
        res["test_split"] = _test_split(ds, args.before_model)
    if args.write_spread:
        mu = np.concatenate([o["scores"] for o in per.values()])
        tok = np.concatenate([o["tokens"] for o in per.values()])
        w = np.concatenate([fam_w(o) for o in per.values()])
        json.dump({"knots": [[round(a, 5), round(b, 5), round(c, 5)] for a, b, c in fit_spread(mu, tok, w)],
                   "recipe": "general, LOSO out-of-family outputs", "weights": "families weigh equally"},
                  open(args.write_spread, "w"), indent=1)
    if args.json_out:
        json.dump(res, open(args.json_out, "w"), indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
