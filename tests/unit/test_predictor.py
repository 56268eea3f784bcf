"""The ONNX predictor (sjf_core.predict._predictor): default model, Model A, layouts, errors."""

from __future__ import annotations

import math

import os

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from sjf_core.predict._features import extract_v1_many
from sjf_core.predict._prediction import Prediction
from sjf_core.predict._predictor import META_KIND, META_LAYOUT, PredictorError, default_model_path, load_predictor

ROOT = Path(__file__).resolve().parents[2]
MODEL_A = ROOT / "models" / "reference" / "clairvoyant_model_a_sharegpt.onnx"
PROMPTS = ["What is 2+2?", "Write a 3000-word short story about a lighthouse keeper, with dialogue.",
           "Implement a full REST API in Python with Flask, SQL models, tests and docs.", "hi"]


def test_default_model_loads_and_predicts():
    p = load_predictor()
    assert Path(p.path) == default_model_path().resolve()
    pred = p.predict("Explain quantum computing in detail")
    assert isinstance(pred, Prediction)
    assert pred.p_short + pred.p_medium + pred.p_long == pytest.approx(1.0, abs=1e-5)
    assert pred.label in ("short", "medium", "long") and pred.expected_tokens >= 0
    probs = p.predict_many(PROMPTS)
    assert probs.shape == (4, 3) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    scores = p.score_many(PROMPTS)
    assert scores.shape == (4,)
    # predict() and predict_many() agree
    one = p.predict(PROMPTS[1])
    np.testing.assert_allclose([one.p_short, one.p_medium, one.p_long], probs[1], atol=1e-6)


def test_default_model_card_exists_and_matches():
    import json

    card = json.loads(default_model_path().with_suffix(".json").read_text())
    p = load_predictor()
    assert card["feature_layout"]["name"] == p.info.layout
    assert card["kind"] == p.info.kind
    assert card["class_bounds_tokens"]["short_lt"] == 200 and card["class_bounds_tokens"]["long_ge"] == 800
    assert card["metrics"]["sources"]  # held-out ranking accuracy per source
    assert card["data"]["sources"]


def test_default_model_ranks_obvious_cases():
    p = load_predictor()
    s = p.score_many(["What is the capital of France?",
                      "Write a detailed 5000-word essay on the history of Rome, with chapters and sources."])
    assert s[1] > s[0]


def test_model_a_loads_unchanged_as_v1_classifier():
    p = load_predictor(MODEL_A)
    assert p.info.layout == "v1" and p.info.kind == "classifier"
    probs = p.predict_many(PROMPTS)
    # same numbers as running the published file directly with onnxruntime
    import onnxruntime as ort

    sess = ort.InferenceSession(str(MODEL_A), providers=["CPUExecutionProvider"])
    direct = sess.run(["probabilities"], {"float_input": extract_v1_many(PROMPTS)})[0]
    np.testing.assert_allclose(probs, direct, rtol=1e-6)
    np.testing.assert_allclose(p.score_many(PROMPTS), direct[:, 2], rtol=1e-6)


@pytest.mark.parametrize("which", ["default", "model_a"])
def test_predict_single_path_matches_batch(which):
    """predict() (IO-bound preallocated buffers) gives the numbers of predict_many()."""
    p = load_predictor() if which == "default" else load_predictor(MODEL_A)
    probs = p.predict_many(PROMPTS)
    for i, t in enumerate(PROMPTS * 2):  # twice: the bound buffers are reused
        pred = p.predict(t)
        np.testing.assert_allclose([pred.p_short, pred.p_medium, pred.p_long], probs[i % len(PROMPTS)], atol=1e-6)
        assert pred.label == ("short", "medium", "long")[int(np.argmax(probs[i % len(PROMPTS)]))]


def test_predict_is_thread_safe():
    import threading

    p = load_predictor()
    texts = [f"{t} ({i})" for i in range(40) for t in PROMPTS[:2]]
    want = [p.predict(t).expected_tokens for t in texts]
    got: dict[int, list] = {}

    def work(k):
        got[k] = [p.predict(t).expected_tokens for t in texts]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for k in range(4):
        assert got[k] == pytest.approx(want, rel=1e-6)


def test_one_session_per_path():
    assert load_predictor(MODEL_A) is load_predictor(str(MODEL_A))
    sess = load_predictor(MODEL_A)._session
    opts = sess.get_session_options()
    assert opts.intra_op_num_threads == 1 and opts.inter_op_num_threads == 1


def test_missing_model_names_path(tmp_path):
    missing = tmp_path / "nope.onnx"
    with pytest.raises(PredictorError, match="nope.onnx"):
        load_predictor(missing)


def test_corrupt_model_names_path(tmp_path):
    bad = tmp_path / "corrupt.onnx"
    bad.write_bytes(b"\x08\x07 this is not an onnx model" * 10)
    with pytest.raises(PredictorError, match="corrupt.onnx"):
        load_predictor(bad)


def _with_meta(src: Path, dst: Path, **meta) -> Path:
    m = onnx.load(str(src))
    helper.set_model_props(m, meta)
    onnx.save(m, str(dst))
    return dst


def test_unknown_layout_or_kind_is_a_clear_error(tmp_path):
    with pytest.raises(PredictorError, match="v9"):
        load_predictor(_with_meta(MODEL_A, tmp_path / "v9.onnx", **{META_LAYOUT: "v9"}))
    with pytest.raises(PredictorError, match="ranker"):
        load_predictor(_with_meta(MODEL_A, tmp_path / "k.onnx", **{META_KIND: "ranker"}))


def test_layout_width_mismatch_is_rejected(tmp_path):
    with pytest.raises(PredictorError, match="input width"):
        load_predictor(_with_meta(MODEL_A, tmp_path / "w.onnx", **{META_LAYOUT: "v2"}))


def test_zipmap_sequence_of_maps_output(tmp_path):
    """A classifier whose probabilities come as seq(map(int64, float)) (onnxmltools ZipMap)."""
    m = onnx.load(str(MODEL_A))
    g = m.graph
    zip_node = helper.make_node("ZipMap", ["probabilities"], ["output_probability"], domain="ai.onnx.ml",
                                classlabels_int64s=[0, 1, 2])
    g.node.append(zip_node)
    seq_type = helper.make_sequence_type_proto(helper.make_map_type_proto(TensorProto.INT64,
                                                                          helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
    outs = [o for o in g.output if o.name == "label"]
    del g.output[:]
    g.output.extend(outs + [helper.make_value_info("output_probability", seq_type)])
    path = tmp_path / "zipmap.onnx"
    onnx.save(m, str(path))
    p = load_predictor(path)
    want = load_predictor(MODEL_A).predict_many(PROMPTS)
    np.testing.assert_allclose(p.predict_many(PROMPTS), want, rtol=1e-6)
    one = p.predict(PROMPTS[2])  # a sequence output cannot be IO-bound: the plain run() path
    np.testing.assert_allclose([one.p_short, one.p_medium, one.p_long], want[2], rtol=1e-6)


def test_regressor_model(tmp_path):
    """A regressor on ln(1+tokens) gives class probabilities from its residual σ and
    expected tokens as the ordering key."""
    import xgboost as xgb

    from sjf_lab.train import export_onnx

    rng = np.random.default_rng(0)
    X = rng.random((200, 19)).astype(np.float32) * 100
    y = np.log1p(X[:, 0] * 10)  # longer prompt -> longer answer
    model = xgb.XGBRegressor(n_estimators=20, max_depth=3, n_jobs=1).fit(X, y)
    path = export_onnx(model, "regressor", "v1", 19, tmp_path / "reg.onnx", log_sigma=0.5)
    p = load_predictor(path)
    assert p.info.kind == "regressor" and p.info.log_sigma == pytest.approx(0.5)
    texts = ["short", "x" * 400]
    probs = p.predict_many(texts)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    scores = p.score_many(texts)
    mu = model.predict(extract_v1_many(texts))
    np.testing.assert_allclose(scores, np.expm1(mu + 0.5 * 0.25), rtol=1e-4)
    assert scores[1] > scores[0] and probs[1, 2] > probs[0, 2]
    for i, t in enumerate(texts):  # the scalar path of predict() gives the batch numbers
        pred = p.predict(t)
        assert pred.expected_tokens == pytest.approx(scores[i], rel=1e-4)
        np.testing.assert_allclose([pred.p_short, pred.p_medium, pred.p_long], probs[i], atol=1e-6)


def test_predict_rejects_non_text():
    with pytest.raises(TypeError):
        load_predictor().predict(None)


def test_cli_predict_prints_probabilities(capsys):
    from sjf_lab.cli import main

    assert main(["predict", "Write a long story about dragons"]) == 0
    out = capsys.readouterr().out
    assert "P(Short)=" in out and "P(Medium)=" in out and "P(Long)=" in out and "expected_tokens=" in out
    assert main(["predict", "--model", str(MODEL_A), "--json", "What is 2+2?"]) == 0
    import json

    d = json.loads(capsys.readouterr().out)
    assert set(d) >= {"p_short", "p_medium", "p_long", "label", "expected_tokens"}


def test_cli_predict_missing_model_fails_cleanly(tmp_path, capsys):
    from sjf_lab.cli import main

    assert main(["predict", "--model", str(tmp_path / "gone.onnx"), "hello"]) == 1
    assert "gone.onnx" in capsys.readouterr().err


# ---- layout v3: lexicon column and calibration map (issue 13) ----------------------------------
def _v3_regressor(tmp_path, lexicon=None, calibration=None, name="v3.onnx"):
    import xgboost as xgb

    from sjf_core.predict._features_lexicon import LEXICON_COL, N_FEATURES_V3, extract_v3_many
    from sjf_lab.train import export_onnx

    texts = [f"Write a {n}-word essay about topic {i}" if i % 2 else f"What is topic {i}?"
             for i, n in enumerate(range(100, 3100, 15))]
    X = extract_v3_many(texts)
    if lexicon is not None:
        X[:, LEXICON_COL] = lexicon.score_many(texts)
    y = np.log1p(np.where(np.arange(len(texts)) % 2 == 1, 1500.0, 40.0))
    model = xgb.XGBRegressor(n_estimators=20, max_depth=3, n_jobs=1).fit(X, y)
    meta = dict(lexicon.to_meta()) if lexicon is not None else {}
    if calibration is not None:
        import json

        meta["sjf.calibration"] = json.dumps(calibration)
    return export_onnx(model, "regressor", "v3", N_FEATURES_V3, tmp_path / name, log_sigma=0.6, extra_meta=meta), model


def test_v3_model_fills_the_lexicon_column_and_applies_the_calibration_map(tmp_path):
    from sjf_core.predict._features_lexicon import LEXICON_COL, extract_v3
    from sjf_core.predict._lexicon import Lexicon, buckets_of
    from sjf_lab.lexicon_fit import fit_lexicon
    from sjf_core.predict._predictor import calibrated_log1p

    texts = ["What is tea?", "Write a 2000-word essay about tea", "What is salt?", "Write a long story about owls"]
    lex = fit_lexicon([buckets_of(t) for t in texts], np.log1p([30.0, 2000.0, 30.0, 1500.0]), alpha=0.1)
    assert lex.score("Write an essay") > lex.score("What is it?")
    back = Lexicon.from_meta(lex.to_meta())  # float16 round trip
    np.testing.assert_allclose(back.weights, lex.weights, atol=2e-3 * np.abs(lex.weights).max() + 1e-6)
    knots = [[2.0, 3.0], [5.0, 6.5], [7.0, 8.0]]
    path, model = _v3_regressor(tmp_path, back, knots)
    p = load_predictor(path)
    x = p.features_many(texts)
    assert extract_v3(texts[1])[LEXICON_COL] == 0.0  # the extractor leaves it to the predictor
    np.testing.assert_allclose(x[:, LEXICON_COL], back.score_many(texts), rtol=1e-6)
    mu = model.predict(x)
    want = np.expm1(calibrated_log1p(mu, (np.array([2.0, 5.0, 7.0]), np.array([3.0, 6.5, 8.0]))))
    np.testing.assert_allclose(p.score_features(x), want, rtol=1e-4)  # the model's estimate alone
    got = p.score_many(texts)  # from text: the stated size of texts[1] and the cue of texts[3] count
    np.testing.assert_allclose(got[[0, 2]], want[[0, 2]], rtol=1e-4)
    assert got[1] > 1500 and got[3] == pytest.approx(want[3] * math.exp(0.11), rel=1e-4)
    for i, t in enumerate(texts):  # the single-prompt path fills the lexicon column too
        assert p.predict(t).expected_tokens == pytest.approx(got[i], rel=1e-4)
    # the map is strictly increasing and extends past the end knots
    m = np.array([0.0, 2.0, 3.5, 7.0, 9.0])
    c = calibrated_log1p(m, (np.array([2.0, 5.0, 7.0]), np.array([3.0, 6.5, 8.0])))
    assert (np.diff(c) > 0).all() and c[0] < 3.0 and c[-1] > 8.0


def _add_meta(src: Path, dst: Path, **meta) -> Path:
    m = onnx.load(str(src))
    props = {p.key: p.value for p in m.metadata_props}
    helper.set_model_props(m, {**props, **meta})
    onnx.save(m, str(dst))
    return dst


def test_bad_lexicon_or_calibration_metadata_is_a_clear_error(tmp_path):
    from sjf_core.predict._predictor import META_CALIBRATION

    path, _ = _v3_regressor(tmp_path)
    _with_meta = _add_meta  # keep the model's layout and kind, add or replace one entry
    with pytest.raises(PredictorError, match="calibration"):
        load_predictor(_with_meta(path, tmp_path / "c1.onnx", **{META_CALIBRATION: "[[1, 2], [0, 3]]"}))
    with pytest.raises(PredictorError, match="calibration"):
        load_predictor(_with_meta(path, tmp_path / "c2.onnx", **{META_CALIBRATION: "not json"}))
    with pytest.raises(PredictorError, match="lexicon"):
        load_predictor(_with_meta(path, tmp_path / "l1.onnx", **{"sjf.lexicon": "!!"}))
    with pytest.raises(PredictorError, match="lexicon"):  # a lexicon on a layout without its column
        load_predictor(_with_meta(MODEL_A, tmp_path / "l2.onnx", **{"sjf.lexicon": "eJwDAAAAAAE=",
                                                                      "sjf.lexicon_buckets": "0"}))


def test_lexicon_c_accelerator_matches_python():
    from sjf_core.predict import _lexicon as lexicon
    from sjf_core.predict._lexicon import Lexicon, buckets_of

    if lexicon._C is None:
        # CI installs the package, which builds the accelerator: there a missing build is a failure
        if os.environ.get("CI"):
            pytest.fail("sjf_core.predict._lex was not built by the install (CI must build it)")
        pytest.skip("sjf_core.predict._lex not built (pip install builds it); the Python path is the reference")
    rng = np.random.default_rng(5)
    lex = Lexicon(rng.normal(size=1 << 12).astype(np.float32), 0.25)
    texts = ["", "   ", "a", "Hello, World! hello world", "ÄÖÜ ß 中文测试 Привет мир", "snake_case 123 x1",
             "x" * 50_000 + " tail words here", "lone \ud800 surrogate", "\n\n".join(PROMPTS)]
    texts += ["".join(chr(int(c)) for c in rng.integers(32, 0x2FFF, int(n))) for n in rng.integers(1, 400, 30)]
    for t in texts:
        assert lex.score(t) == pytest.approx(lex.score_py(t), rel=1e-12, abs=1e-12)
    assert len(buckets_of("one two one two")) == 4  # unigrams one, two + bigrams "one two", "two one"


def test_v3_length_targets_and_v2l_layout():
    from sjf_core.predict._features_v2 import extract_v2
    from sjf_core.predict._features_lexicon import FEATURE_NAMES_V3, extract_v3, length_targets
    from sjf_core.predict._layouts import get_layout

    t = length_targets("write a 2,000-word essay, then list 10 ideas in three sentences each")
    assert t["word"] == 2000 and t["item"] == 10 and t["sentence"] == 3 and t["tokens"] == pytest.approx(2700)
    assert length_targets("what is the capital of france?")["tokens"] == 0
    x = extract_v3("Answer yes or no: is it raining?")
    names = dict(zip(FEATURE_NAMES_V3, x))
    assert names["one_unit_answer"] >= 1 and names["req_tokens_est"] == 0 and names["lexicon"] == 0
    text = "Summarize the following text:\n\n" + "Lorem ipsum dolor sit amet. " * 40 + "\n\nKeep it short."
    n3 = dict(zip(FEATURE_NAMES_V3, extract_v3(text)))
    assert n3["first_line_colon"] == 1 and n3["material_ref"] >= 1 and n3["short_last_par"] == 1
    v2l = get_layout("v2l")
    assert v2l.names[-1] == "lexicon" and v2l.n_features == len(extract_v2(text)) + 1
    np.testing.assert_array_equal(v2l.extract(text)[:-1], extract_v2(text))
    np.testing.assert_array_equal(v2l.extract_many([text, "hi"])[0], v2l.extract(text))


def test_shipped_default_is_a_calibrated_lexicon_model():
    p = load_predictor()
    assert p.info.layout in ("v2l", "v3") and p._lexicon is not None and p.info.calibration is not None
    x = p.features_many(PROMPTS)
    assert np.all(x[:, -1] != 0.0)  # the lexicon column is filled
    # the calibration map keeps the order of the model output (no new ties or swaps)
    mu = np.linspace(0, 9, 200)
    from sjf_core.predict._predictor import calibrated_log1p

    assert (np.diff(calibrated_log1p(mu, p.info.calibration)) > 0).all()
