"""Training and evaluation pipeline: metrics, split by prompt, sjf train / sjf eval, training log."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from sjf_lab.rank_metrics import class_accuracy, kendall_tau_b, ranking_accuracy
from sjf_lab.train_data import build_dataset, load_rows, prompt_key, split_of
from sjf_lab.training_log import TrainingLogWriter, decode_features, encode_record


# ---- metrics -------------------------------------------------------------------------------
def _brute_ranking(scores, tokens):
    s = [x for x, t in zip(scores, tokens) if t < 200]
    l_ = [x for x, t in zip(scores, tokens) if t >= 800]
    return sum(1 for a in s for b in l_ if b > a) / (len(s) * len(l_))


def test_ranking_accuracy_matches_pairwise_definition_with_ties():
    rng = np.random.default_rng(1)
    for _ in range(20):
        n = int(rng.integers(5, 80))
        scores = rng.integers(0, 6, n).astype(float)  # many ties
        tokens = rng.choice([50, 150, 300, 900, 2000], n)
        if not ((tokens < 200).any() and (tokens >= 800).any()):
            continue
        acc, ns, nl = ranking_accuracy(scores, tokens)
        assert acc == pytest.approx(_brute_ranking(scores, tokens))
        assert ns == (tokens < 200).sum() and nl == (tokens >= 800).sum()


def test_ranking_accuracy_edges():
    assert ranking_accuracy([1, 2], [10, 1000])[0] == 1.0
    assert ranking_accuracy([2, 1], [10, 1000])[0] == 0.0
    assert ranking_accuracy([1, 1], [10, 1000])[0] == 0.0  # ties are not "strictly higher" (Eq. 2)
    assert np.isnan(ranking_accuracy([1, 2], [300, 400])[0])  # no pairs
    with pytest.raises(ValueError):
        ranking_accuracy([1, 2, 3], [1, 2])


def test_kendall_and_class_accuracy():
    assert kendall_tau_b([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert kendall_tau_b([4, 3, 2, 1], [10, 20, 30, 40]) == pytest.approx(-1.0)
    probs = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.8, 0.1, 0.1]])
    assert class_accuracy(probs, [10, 300, 900, 900]) == pytest.approx(0.75)


# ---- data handling -------------------------------------------------------------------------
def test_split_is_by_prompt_and_reproducible():
    k1 = prompt_key("Write  an essay\nabout cats")
    assert k1 == prompt_key("Write an essay about cats ")  # whitespace-normalised
    assert k1 != prompt_key("write an essay about cats")  # case kept
    assert split_of(k1) == split_of(prompt_key("Write an essay about cats"))
    parts = [split_of(prompt_key(f"prompt {i}")) for i in range(4000)]
    frac = {p: parts.count(p) / len(parts) for p in ("train", "val", "test")}
    assert 0.17 < frac["test"] < 0.23 and 0.08 < frac["val"] < 0.12


def test_cross_file_dedup_and_median_label(tmp_path):
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text("\n".join(json.dumps(r) for r in [
        {"prompt": "Same prompt", "response_tokens": 10, "model": "m1"},
        {"prompt": "Same prompt", "response_tokens": 1000, "model": "m2"},
        {"prompt": "Other", "response_tokens": 5},
    ]) + "\nnot json\n[1, 2]\n{\"prompt\": \"x\"}\n")
    b.write_text(json.dumps({"prompt": "Same  prompt", "response_tokens": 100, "source": "bee"}) + "\n")
    stats = {}
    rows = load_rows([tmp_path], stats)
    assert len(rows) == 4
    assert stats[str(a)]["skipped"] == 3
    ds = build_dataset(rows)
    assert len(ds.groups) == 2
    key = prompt_key("Same prompt")
    assert sorted(ds.group_sources(key)) == ["a", "bee"]
    assert ds.group_target(key) == pytest.approx(np.log1p(100))  # median of ln(1+{10, 1000, 100})


# ---- a small synthetic corpus where the answer length follows the instruction ---------------
TOPICS = ["cats", "rivers", "the moon", "bread", "trains", "chess", "music", "volcanoes", "bees", "glass",
          "tea", "maps", "robots", "salt", "clouds", "paper", "ships", "owls", "coffee", "snow"]


def _corpus(n: int, seed: int, explain_tokens: tuple[int, int] = (150, 700)) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        topic = rng.choice(TOPICS)
        kind = rng.random()
        if kind < 0.4:
            p, t = f"What is {topic}? ({i})", rng.randint(10, 150)
        elif kind < 0.7:
            words = rng.choice([1000, 1500, 2000, 3000])
            p, t = f"Write a {words}-word essay about {topic}, in detail. ({i})", int(words * 1.3 * rng.uniform(0.7, 1.1))
        else:
            p, t = f"Explain {topic} to a child. ({i})", rng.randint(*explain_tokens)
        rows.append({"prompt": p, "response_tokens": t, "model": "synthetic"})
    return rows


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    path = d / "synthetic.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _corpus(600, 0)) + "\n")
    return path


def _train(args):
    from sjf_lab.cli import main

    return main(["train", "--no-progress", "--nthread", "1", *args])


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    assert _train(["--data", str(corpus), "--name", "syn_v2", "--out-dir", str(out), "--preset", "rank",
                   "--layout", "v2", "--set", "n_estimators=60", "--set", "early_stopping_rounds=20"]) == 0
    return out


def test_sjf_train_regressor_v2_writes_model_card_and_booster(trained):
    from sjf_core.predict._predictor import load_predictor

    card = json.loads((trained / "syn_v2.json").read_text())
    assert card["kind"] == "regressor" and card["feature_layout"]["name"] == "v2"
    assert card["class_bounds_tokens"] == {"short_lt": 200, "long_ge": 800, "tokens": card["class_bounds_tokens"]["tokens"]}
    src = card["data"]["sources"]["synthetic"]
    assert src["rows"] == 600 and src["train_prompts"] + src["val_prompts"] + src["test_prompts"] == 600
    acc = card["metrics"]["sources"]["synthetic"]["syn_v2"]["ranking_accuracy"]
    assert acc > 0.9  # "essay" prompts are Long, "What is" prompts Short
    assert (trained / "syn_v2.xgb.ubj").is_file()
    p = load_predictor(trained / "syn_v2.onnx")
    assert p.info.layout == "v2" and p.info.kind == "regressor" and p.info.log_sigma > 0
    s = p.score_many(["What is tea? (9999)", "Write a 2000-word essay about tea, in detail. (9999)"])
    assert s[1] > 3 * s[0]
    # the ONNX export computes what the saved XGBoost booster computes
    import xgboost as xgb

    texts = [r["prompt"] for r in _corpus(50, 11)]
    x = p.features_many(texts)
    mu_xgb = xgb.Booster(model_file=str(trained / "syn_v2.xgb.ubj")).predict(xgb.DMatrix(x))
    mu_onnx = np.log1p(p.score_features(x)) - 0.5 * p.info.log_sigma ** 2  # the model alone (no stated sizes)
    np.testing.assert_allclose(mu_onnx, mu_xgb, atol=1e-4)


def test_sjf_train_paper_classifier_v1(corpus, tmp_path):
    from sjf_core.predict._predictor import load_predictor

    assert _train(["--data", str(corpus), "--name", "paper_v1", "--out-dir", str(tmp_path), "--preset", "paper",
                   "--layout", "v1", "--set", "n_estimators=30"]) == 0
    card = json.loads((tmp_path / "paper_v1.json").read_text())
    assert card["kind"] == "classifier" and card["params"]["max_depth"] == 6 and card["params"]["learning_rate"] == 0.1
    p = load_predictor(tmp_path / "paper_v1.onnx")
    assert p.info.layout == "v1" and p.info.kind == "classifier"
    probs = p.predict_many(["Write a 3000-word essay about owls, in detail. (1)", "What is salt? (2)"])
    assert probs[0, 2] > probs[1, 2]


def test_sjf_train_bad_inputs(tmp_path, capsys):
    assert _train(["--data", str(tmp_path / "missing.jsonl"), "--name", "x", "--out-dir", str(tmp_path)]) == 1
    assert "missing.jsonl" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert _train(["--data", str(empty), "--name", "x", "--out-dir", str(tmp_path)]) == 1


def test_sjf_eval_json_with_peers(corpus, trained, capsys):
    from sjf_lab.cli import main

    model_a = Path(__file__).resolve().parents[2] / "models" / "reference" / "clairvoyant_model_a_sharegpt.onnx"
    assert main(["eval", "--data", str(corpus), "--model", str(trained / "syn_v2.onnx"), "--model", str(model_a),
                 "--json", "--all-sources"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["peers"] == ["syn_v2", "clairvoyant_model_a_sharegpt", "prompt-length rule"]
    per = res["sources"]["synthetic"]
    assert per["syn_v2"]["ranking_accuracy"] > 0.9
    assert per["syn_v2"]["short"] == per["prompt-length rule"]["short"] > 0
    assert set(per["syn_v2"]) >= {"ranking_accuracy", "kendall_tau_b", "class_accuracy", "rows"}
    assert "class_accuracy" in per["clairvoyant_model_a_sharegpt"]
    assert main(["eval", "--data", str(corpus), "--model", str(trained / "syn_v2.onnx"), "--all-sources"]) == 0
    out = capsys.readouterr().out
    assert "ranking accuracy (%)" in out and "synthetic" in out


# ---- production training log -----------------------------------------------------------------
def test_training_log_roundtrip_and_train(trained, tmp_path):
    from sjf_core.predict._predictor import load_predictor

    pred = load_predictor(trained / "syn_v2.onnx")
    log_path = tmp_path / "logs" / "prod.jsonl"
    rows = _corpus(300, 7)
    with TrainingLogWriter(log_path) as w:
        for r in rows:
            assert w.write_observation(pred, r["prompt"], r["response_tokens"], model="llama")
        assert w.written == 300
    text = log_path.read_text()
    assert "essay" not in text and "What is" not in text  # never prompt text
    first = json.loads(text.splitlines()[0])
    assert first["layout"] == "v2" and "features_sparse" in first and first["completion_tokens"] >= 0
    np.testing.assert_array_equal(decode_features(first), pred.layout.extract(rows[0]["prompt"]))
    # sjf train accepts it
    assert _train(["--data", str(log_path), "--name", "from_log", "--out-dir", str(tmp_path), "--layout", "v2",
                   "--set", "n_estimators=30"]) == 0
    card = json.loads((tmp_path / "from_log.json").read_text())
    assert card["data"]["sources"]["production"]["rows"] == 300
    assert card["metrics"]["sources"]["production"]["from_log"]["ranking_accuracy"] > 0.85
    # a v1 model cannot be trained from v2 features
    assert _train(["--data", str(log_path), "--name", "bad", "--out-dir", str(tmp_path), "--layout", "v1",
                   "--no-eval"]) == 1


def test_training_log_never_raises_on_bad_input(tmp_path):
    w = TrainingLogWriter(tmp_path / "t.jsonl")
    assert not w.write("some prompt text", "v1", 10)
    assert not w.write([1.0, float("nan")], "v1", 10)
    assert not w.write([1.0, 2.0], "v1", -1)
    assert not w.write([1.0, 2.0], "v1", None)
    assert not w.write([], "v1", 3)
    assert w.errors == 5 and w.written == 0
    assert w.write(np.arange(19, dtype=np.float32), "v1", 5)
    rec = json.loads((tmp_path / "t.jsonl").read_text())
    assert rec["features"] == list(range(19))
    with pytest.raises(ValueError):
        encode_record("text", "v1", 1)


def test_domain_retraining_continues_from_base(corpus, trained, tmp_path):
    from sjf_core.predict._predictor import load_predictor

    domain = tmp_path / "domain.jsonl"
    # the user's backend answers "Explain ..." at essay length: a shift the base has not seen
    domain.write_text("\n".join(json.dumps(r) for r in _corpus(200, 3, explain_tokens=(1500, 3000))) + "\n")
    assert _train(["--base", str(trained / "syn_v2.onnx"), "--data", str(domain), "--name", "dom", "--out-dir",
                   str(tmp_path), "--layout", "v2", "--set", "n_estimators=20", "--no-eval"]) == 0
    card = json.loads((tmp_path / "dom.json").read_text())
    assert card["base_model"].endswith("syn_v2.onnx")
    assert card["domain_trees_added"] > 0  # cross-validation found the shift worth trees
    p = load_predictor(tmp_path / "dom.onnx")
    assert p.info.kind == "regressor" and p.info.layout == "v2"
    import xgboost as xgb

    base = xgb.Booster(model_file=str(trained / "syn_v2.xgb.ubj"))
    dom = xgb.Booster(model_file=str(tmp_path / "dom.xgb.ubj"))
    n_base = base.num_boosted_rounds()
    assert n_base < dom.num_boosted_rounds() <= n_base + 20  # trees were added (early stopping may cut some)
    x = xgb.DMatrix(p.features_many([r["prompt"] for r in _corpus(30, 5)]))
    np.testing.assert_allclose(dom[:n_base].predict(x), base.predict(x), atol=1e-6)  # base trees kept as they were
    # the exported model uses every tree (base + added), not the base's early-stopping cut
    full = dom.predict(x, iteration_range=(0, dom.num_boosted_rounds()))
    texts = [r["prompt"] for r in _corpus(30, 5)]
    mu_onnx = np.log1p(p.score_features(p.features_many(texts))) - 0.5 * p.info.log_sigma ** 2  # the model alone
    np.testing.assert_allclose(mu_onnx, full, atol=1e-4)
    # a published ONNX-only model has no booster to continue from: clear error
    model_a = Path(__file__).resolve().parents[2] / "models" / "reference" / "clairvoyant_model_a_sharegpt.onnx"
    assert _train(["--base", str(model_a), "--data", str(domain), "--name", "x", "--out-dir", str(tmp_path),
                   "--layout", "v1", "--no-eval"]) == 1


# ---- leave-one-source-out evaluation (issue 13) ----------------------------------------------
def _rows(specs):
    """Row objects from (prompt, tokens, source, model) tuples."""
    from sjf_lab.train_data import Row

    return [Row(prompt_key(p), s, t, prompt=p, model=m) for p, t, s, m in specs]


def test_loso_folds_hold_out_a_family_with_its_duplicates_in_other_files():
    from sjf_lab.loso import family_of, loso_folds

    specs = [("shared prompt", 10, "sharegpt", "chatgpt"), ("Shared   prompt".replace("S", "s"), 900, "lima_train", "human"),
             ("only lima", 50, "lima_train", "human"), ("only sharegpt", 60, "sharegpt", "chatgpt"),
             ("arena one", 300, "arena_hard_v0_1", "gpt-4"), ("arena one", 30, "arena_bench_v1", "claude"),
             ("aux", 5, "hh_rlhf_harmless_test", "x")]
    ds = build_dataset(_rows(specs))
    assert family_of("arena_bench_v1") == family_of("arena_hard_v0_1") == "arena"
    assert family_of("lmsys_chat_1m_sample") == "chatbot_arena" and family_of("hh_rlhf_harmless_test") == "auxiliary"
    folds = loso_folds(ds)
    assert sorted(folds) == ["arena", "lima", "sharegpt"]  # auxiliary sources are never held out
    for fam, (train, held) in folds.items():
        assert not set(train) & set(held)
        assert set(train) | set(held) == set(ds.groups)
    # "shared prompt" is in sharegpt and lima (whitespace-normalised duplicate): held out with either
    shared = prompt_key("shared prompt")
    assert shared in folds["lima"][1] and shared not in folds["lima"][0]
    assert shared in folds["sharegpt"][1] and shared not in folds["sharegpt"][0]
    assert prompt_key("aux") in folds["arena"][0]
    assert set(folds["arena"][1]) == {prompt_key("arena one")}


def _brute_within(scores, tokens, models):
    good = pairs = 0
    for i in range(len(scores)):
        for j in range(len(scores)):
            if models[i] is None or models[i] != models[j] or not (tokens[i] < 200 and tokens[j] >= 800):
                continue
            pairs += 1
            good += scores[j] > scores[i]
    return good / pairs if pairs else float("nan"), pairs


def test_within_model_accuracy_compares_only_same_model_pairs():
    from sjf_lab.loso import within_model_accuracy

    # across models the ranking is perfect, within each model it is inverted: within-model sees 0
    scores = np.array([1.0, 2.0, 10.0, 11.0])
    tokens = np.array([900, 100, 900, 100])
    models = np.array(["a", "a", "b", "b"], dtype=object)
    acc, pairs, n_models = within_model_accuracy(scores, tokens, models)
    assert acc == 0.0 and pairs == 2 and n_models == 2
    assert ranking_accuracy(scores, tokens)[0] == 0.25  # the pooled row level counts the cross-model pair
    rng = np.random.default_rng(3)
    for _ in range(15):
        n = int(rng.integers(6, 60))
        s = rng.integers(0, 8, n).astype(float)
        t = rng.choice([20, 150, 400, 900, 3000], n)
        m = rng.choice(np.array(["m1", "m2", "m3", None], dtype=object), n)
        acc, pairs, _ = within_model_accuracy(s, t, m)
        want, want_pairs = _brute_within(s, t, list(m))
        assert pairs == want_pairs
        if want_pairs:
            assert acc == pytest.approx(want)
        else:
            assert np.isnan(acc)


def _brute_tau_b(x, y):
    n = len(x)
    c = d = tx = ty = 0
    for i in range(n):
        for j in range(i + 1, n):
            a, b = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
            if a == 0 and b == 0:
                continue
            if a == 0:
                tx += 1
            elif b == 0:
                ty += 1
            elif a == b:
                c += 1
            else:
                d += 1
    return (c - d) / np.sqrt((c + d + tx) * (c + d + ty))


def test_tau_b_and_weighted_metrics_match_scipy_and_repeated_rows():
    from scipy.stats import kendalltau

    from sjf_lab.loso import family_metrics, weighted_ranking_accuracy

    x = np.array([1, 2, 2, 3, 5, 5, 7], dtype=float)
    y = np.array([10, 300, 20, 900, 900, 40, 1000], dtype=float)
    assert kendall_tau_b(x, y) == pytest.approx(kendalltau(x, y, variant="b").statistic)
    assert kendall_tau_b(x, y) == pytest.approx(_brute_tau_b(x, y))
    # bootstrap weights = multiplicities: the same numbers as repeating the rows
    w = np.array([2, 0, 1, 3, 1, 2, 1], dtype=float)
    xr, yr = np.repeat(x, w.astype(int)), np.repeat(y, w.astype(int))
    assert weighted_ranking_accuracy(x, y, w)[0] == pytest.approx(ranking_accuracy(xr, yr)[0])
    models = np.array(["a"] * 7, dtype=object)
    fm = family_metrics(x, y, models, weights=w)
    assert fm["tau_b"] == pytest.approx(kendalltau(xr, yr, variant="b").statistic)
    assert fm["rows"] == int(w.sum())


def test_cap_rows_per_prompt_is_deterministic_and_bounded():
    from sjf_lab.loso import cap_rows_per_prompt

    rows = _rows([("p1", i * 10, "alpaca_eval", f"m{i}") for i in range(50)] + [("p2", 5, "alpaca_eval", "m0")])
    a, b = cap_rows_per_prompt(rows, 7), cap_rows_per_prompt(list(rows), 7)
    assert [r.model for r in a] == [r.model for r in b]
    assert sum(r.key == prompt_key("p1") for r in a) == 7 and sum(r.key == prompt_key("p2") for r in a) == 1
    assert len(cap_rows_per_prompt(rows, 0)) == len(rows)


def test_bootstrap_macro_interval_brackets_the_point():
    from sjf_lab.loso import FamilyData, bootstrap_macro

    rng = np.random.default_rng(0)
    per = {}
    for f, noise in (("a", 0.5), ("b", 2.0)):
        n = 300
        t = np.exp(rng.uniform(2, 8, n))
        sc = np.log(t) + rng.normal(0, noise, n)
        fd = FamilyData(np.array([f"{f}{i}" for i in range(n)], dtype=object), np.arange(n), t,
                        np.array(["m1", "m2"] * (n // 2), dtype=object), n)
        per[f] = (fd, sc)
    r1 = bootstrap_macro(per, n_boot=40, seed=1)
    r2 = bootstrap_macro(per, n_boot=40, seed=1)
    assert r1["macro_ci"] == r2["macro_ci"]
    for m in ("row_eq2", "within_eq2", "tau_b"):
        lo, hi = r1["macro_ci"][m]
        assert lo <= r1["macro"][m] <= hi and hi - lo < 0.2
    assert r1["point"]["a"]["row_eq2"] > r1["point"]["b"]["row_eq2"]  # less noise ranks better
    assert r1["macro"]["row_eq2"] == pytest.approx((r1["point"]["a"]["row_eq2"] + r1["point"]["b"]["row_eq2"]) / 2)


@pytest.fixture(scope="module")
def family_corpus(tmp_path_factory):
    """Synthetic files named like three held-out families (two multi-model) and one auxiliary."""
    d = tmp_path_factory.mktemp("families")
    for stem, seed, models in (("sharegpt", 1, ["chatgpt"]), ("arena_hard_v0_1", 2, ["big", "small"]),
                               ("lima_train", 3, ["human"]), ("alpaca_cleaned_1k", 4, ["davinci"])):
        rows = []
        for r in _corpus(160, seed):
            for m in models:
                rows.append({**r, "model": m, "response_tokens": r["response_tokens"] // (3 if m == "small" else 1)})
        (d / f"{stem}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return d


def test_sjf_eval_loso_json(family_corpus, trained, tmp_path, capsys):
    from sjf_lab.cli import main

    cal = tmp_path / "cal.json"
    assert main(["eval", "--data", str(family_corpus), "--loso", "--model", str(trained / "syn_v2.onnx"),
                 "--boot", "10", "--nthread", "1", "--cache-dir", str(tmp_path / "cache"),
                 "--write-calibration", str(cal), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["families"] == ["arena", "lima", "sharegpt"]
    assert list(res["peers"]) == ["syn_v2", "prompt-length rule", "LOSO-trained rank", "LOSO-trained general"]
    gen = res["peers"]["LOSO-trained general"]
    assert gen["point"]["arena"]["within_models"] == 2  # two answering models
    assert gen["point"]["lima"]["within_eq2"] is None  # single-model family: no within-model number
    assert gen["macro"]["row_eq2"] > 0.9  # the instruction decides the length in every family
    assert gen["macro_ci"]["row_eq2"][0] <= gen["macro"]["row_eq2"] <= gen["macro_ci"]["row_eq2"][1]
    assert set(res["fit"]["LOSO-trained general"]) == {"arena", "lima", "sharegpt"}
    knots = json.loads(cal.read_text())["knots"]
    assert len(knots) >= 2 and all(b[0] > a[0] and b[1] > a[1] for a, b in zip(knots, knots[1:]))
    assert list((tmp_path / "cache").glob("features-v2l-*.npy"))  # features cached outside the repo


def test_sjf_train_general_lexicon_model_and_domain_retraining_keeps_its_lexicon(corpus, tmp_path):
    from sjf_core.predict._predictor import load_predictor

    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"knots": [[2.0, 3.5], [5.0, 6.0], [7.5, 7.9]]}))
    assert _train(["--data", str(corpus), "--name", "gen", "--out-dir", str(tmp_path), "--preset", "general",
                   "--calibration", str(cal), "--set", "n_estimators=40", "--no-eval"]) == 0
    card = json.loads((tmp_path / "gen.json").read_text())
    assert card["feature_layout"]["name"] == "v2l" and card["lexicon"]["alpha"] == 3.0
    assert card["calibration_knots"] == [[2.0, 3.5], [5.0, 6.0], [7.5, 7.9]]
    p = load_predictor(tmp_path / "gen.onnx")
    assert p._lexicon is not None and p.info.calibration is not None
    s = p.score_many(["What is tea? (9999)", "Write a 2000-word essay about tea, in detail. (9999)"])
    assert s[1] > s[0]
    logs = tmp_path / "more.jsonl"
    logs.write_text("\n".join(json.dumps(r) for r in _corpus(120, 7)) + "\n")
    assert _train(["--base", str(tmp_path / "gen.onnx"), "--data", str(logs), "--name", "gen_dom",
                   "--out-dir", str(tmp_path), "--no-eval"]) == 0
    q = load_predictor(tmp_path / "gen_dom.onnx")
    assert q.info.layout == "v2l" and q._lexicon is not None
    np.testing.assert_array_equal(q._lexicon.weights, p._lexicon.weights)  # the base lexicon, not refitted
    assert q.info.metadata["sjf.calibration"] == p.info.metadata["sjf.calibration"]
