"""Prompt-only answer-length predictor: features -> ONNX model -> :class:`Prediction`.

A model file is an ONNX graph with one float32 input ``[N, F]`` and either

* **classifier** outputs: class probabilities ``[N, 3]`` = [P(Short), P(Medium), P(Long)]
  (a plain tensor, or the ``seq(map(int64, float))`` that onnxmltools' ZipMap gives),
  usually beside a ``label`` output that is ignored; or
* **regressor** output: ``[N, 1]`` (or ``[N]``) predicted ``ln(1 + answer_tokens)``.

The file records how to read it in ONNX ``metadata_props`` (keys below). A file
without them (such as the paper's published Model A) is read as a ``v1``
classifier with bounds 200/800 (paper §4.1).

====================  =======================================================
key                   value
====================  =======================================================
``sjf.feature_layout``  ``v1`` (paper, 19 features) or ``v2`` (ours)
``sjf.model_kind``      ``classifier`` or ``regressor``
``sjf.class_bounds``    ``"200,800"``: Short < 200 <= Medium < 800 <= Long tokens
``sjf.log_sigma``       regressor only: residual std of ln(1+tokens) on validation
``sjf.calibration``     optional (regressor): JSON ``[[μ, ln(1+E[tokens])], ...]``,
                        strictly increasing knots fitted on out-of-family predictions
``sjf.lexicon``         optional (layout v3): the hashed word lexicon whose score fills
                        the ``lexicon`` column (:mod:`sjf_core.predict._lexicon`)
====================  =======================================================

For a regressor with prediction μ and residual σ, the class probabilities come
from ln(1+tokens) ~ Normal(μ, σ), and ``expected_tokens`` is the log-normal mean
``exp(μ + σ²/2) − 1``. With ``sjf.calibration``, ``expected_tokens`` is instead
the calibration map (piecewise linear in (μ, ln(1 + E)), extended linearly past the
end knots, strictly increasing so the order of μ is kept), and the class
probabilities use the location ``ln(1 + E) − σ²/2``.

Runtime: onnxruntime, one :class:`onnxruntime.InferenceSession` per process per
model path (cached), ``intra_op_num_threads=1``, ``inter_op_num_threads=1``.
"""

from __future__ import annotations

import bisect
import math
import os
import threading
from dataclasses import dataclass
import importlib.util
from pathlib import Path
from typing import Sequence

import numpy as np

from sjf_core.policy._entry import LONG_MIN_TOKENS, SHORT_MAX_TOKENS
from sjf_core.predict._layouts import Layout, get_layout
from sjf_core.predict._prediction import TYPICAL_TOKENS, Prediction

__all__ = [
    "Predictor", "PredictorError", "ModelInfo", "load_predictor", "default_model_path", "read_model_info",
    "META_LAYOUT", "META_KIND", "META_BOUNDS", "META_SIGMA", "META_CALIBRATION", "DEFAULT_MODEL_FILE",
    "calibrated_log1p",
]

META_LAYOUT = "sjf.feature_layout"
META_KIND = "sjf.model_kind"
META_BOUNDS = "sjf.class_bounds"
META_SIGMA = "sjf.log_sigma"
META_CALIBRATION = "sjf.calibration"

#: File name of the shipped default model inside ``models/`` (package ``sjf_core._models``).
DEFAULT_MODEL_FILE = "default.onnx"

_TYPICAL = np.asarray(TYPICAL_TOKENS, dtype=np.float64)
_SQRT2 = math.sqrt(2.0)
_TYPICAL_T = tuple(float(t) for t in TYPICAL_TOKENS)
_NAMES = ("short", "medium", "long")


def _make_prediction(ps: float, pm: float, pl: float, expected: float) -> Prediction:
    """:class:`Prediction` from class probabilities (label = argmax, first on ties)."""
    label = _NAMES[0] if ps >= pm and ps >= pl else (_NAMES[1] if pm >= pl else _NAMES[2])
    return Prediction(ps, pm, pl, label, expected)


class PredictorError(Exception):
    """A model file is missing, unreadable, corrupt, or of an unknown layout.

    The message names the model path; it never contains prompt text.
    """


@dataclass(frozen=True)
class ModelInfo:
    """How to read one model file.

    Attributes:
        path: absolute model path.
        layout: feature layout name ("v1", "v2").
        kind: "classifier" or "regressor".
        bounds: (Short max, Long min) answer tokens, default (200, 800).
        log_sigma: regressor residual std of ln(1+tokens) (> 0); unused for classifiers.
        metadata: all ONNX metadata_props.
        calibration: (μ knots, ln(1 + E[tokens]) knots) float64 arrays, or None.
    """

    path: str
    layout: str
    kind: str
    bounds: tuple[float, float]
    log_sigma: float
    metadata: dict
    calibration: tuple | None = None


def _models_dir() -> Path:
    """Where the shipped models live: the ``sjf_core._models`` package (wheel
    install) or the repository's top-level ``models/`` (source checkout)."""
    try:
        spec = importlib.util.find_spec("sjf_core._models")
    except (ImportError, ValueError):
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(loc) / DEFAULT_MODEL_FILE).is_file():
            return Path(loc)
    return Path(__file__).resolve().parents[3] / "models"


def default_model_path() -> Path:
    """Path of the shipped default model (``models/default.onnx``)."""
    return _models_dir() / DEFAULT_MODEL_FILE


def read_model_info(path, metadata: dict) -> ModelInfo:
    """Interpret a model's metadata_props (missing keys: a v1 classifier, bounds 200/800)."""
    layout = metadata.get(META_LAYOUT, "v1")
    kind = metadata.get(META_KIND, "classifier")
    if kind not in ("classifier", "regressor"):
        raise PredictorError(f"model {path}: unknown {META_KIND} {kind!r}")
    try:
        lo, hi = (float(x) for x in metadata.get(META_BOUNDS, f"{SHORT_MAX_TOKENS},{LONG_MIN_TOKENS}").split(","))
        sigma = float(metadata.get(META_SIGMA, "1.0"))
    except ValueError as exc:
        raise PredictorError(f"model {path}: bad metadata ({exc})") from None
    if not (0 < lo < hi) or not (sigma > 0 and math.isfinite(sigma)):
        raise PredictorError(f"model {path}: bad class bounds or log_sigma in metadata")
    cal = None
    if META_CALIBRATION in metadata:
        import json

        try:
            knots = np.asarray(json.loads(metadata[META_CALIBRATION]), dtype=np.float64)
            ok = knots.ndim == 2 and knots.shape[1] == 2 and len(knots) >= 2 and np.isfinite(knots).all() \
                and (np.diff(knots[:, 0]) > 0).all() and (np.diff(knots[:, 1]) > 0).all()
        except (ValueError, TypeError):
            ok = False
        if not ok:
            raise PredictorError(f"model {path}: bad {META_CALIBRATION} (want strictly increasing [[mu, log1p_e], ...])")
        cal = (knots[:, 0].copy(), knots[:, 1].copy())
    return ModelInfo(str(path), layout, kind, (lo, hi), sigma, dict(metadata), cal)


def calibrated_log1p(mu, knots: tuple) -> np.ndarray:
    """The calibration map at ``mu`` (array): ln(1 + E[tokens]), piecewise linear through the
    knots, extended with the end segments' slopes (strictly increasing)."""
    xs, ys = knots
    m = np.asarray(mu, dtype=np.float64)
    out = np.interp(m, xs, ys)
    lo_slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
    hi_slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    out = np.where(m < xs[0], ys[0] + (m - xs[0]) * lo_slope, out)
    return np.where(m > xs[-1], ys[-1] + (m - xs[-1]) * hi_slope, out)


def _norm_sf(z: np.ndarray) -> np.ndarray:
    """Standard normal survival function 1 − Φ(z), accurate in the far tail."""
    from math import erfc, sqrt

    return np.fromiter((0.5 * erfc(v / sqrt(2.0)) for v in z.ravel()), dtype=np.float64, count=z.size).reshape(z.shape)


class Predictor:
    """A loaded length model. Thread-safe; use :func:`load_predictor` to get one.

    Attributes:
        info: :class:`ModelInfo` of the model file.
        layout: the :class:`~sjf_core.predict._layouts.Layout` its inputs follow.
    """

    def __init__(self, path, session, info: ModelInfo, layout: Layout, lexicon=None):
        self.path = str(path)
        self.info = info
        self.layout = layout
        self._session = session
        self._input = session.get_inputs()[0].name
        outs = session.get_outputs()
        if info.kind == "classifier":
            names = [o.name for o in outs]
            pick = "probabilities" if "probabilities" in names else None
            if pick is None:
                for o in outs:
                    if "float" in str(o.type) and o.name != "label":
                        pick = o.name
                        break
            if pick is None:
                raise PredictorError(f"model {path}: no probability output among {names}")
            self._output = pick
        else:
            self._output = outs[0].name
        self._outputs = [self._output]
        self._log_lo = math.log1p(info.bounds[0])
        self._log_hi = math.log1p(info.bounds[1])
        self._half_s2 = 0.5 * info.log_sigma ** 2
        self._fill = layout.fill
        self._tls = threading.local()
        self._bind_ok = True
        self._lexicon = lexicon
        self._lex_col = layout.n_features - 1 if lexicon is not None else None
        self._cal = info.calibration
        if self._cal is not None:  # plain-float copies for the single-prompt path
            self._cal_x = [float(v) for v in self._cal[0]]
            self._cal_y = [float(v) for v in self._cal[1]]

    # ---- raw model outputs -----------------------------------------------------------
    def _run(self, x: np.ndarray) -> np.ndarray:
        """Run the model on features ``x`` [N, F] float32; classifier -> [N, 3], regressor -> [N]."""
        y = self._session.run(self._outputs, {self._input: x})[0]
        if self.info.kind == "regressor":
            return np.asarray(y, dtype=np.float64).reshape(len(x))
        if isinstance(y, list):  # ZipMap: a list of {class: prob} dicts
            y = np.array([[float(d[k]) for k in sorted(d)] for d in y], dtype=np.float32)
        y = np.asarray(y, dtype=np.float32)
        if y.ndim != 2 or y.shape[1] != 3:
            raise PredictorError(f"model {self.path}: probability output has shape {y.shape}, expected [N, 3]")
        return y

    def features_many(self, texts: Sequence[str]) -> np.ndarray:
        """Features of ``texts`` in this model's layout: float32 [N, F] (with the model's
        lexicon score in the ``lexicon`` column when it has one)."""
        x = self.layout.extract_many(texts)
        if self._lexicon is not None and len(x):
            x[:, self._lex_col] = self._lexicon.score_many(list(texts))
        return x

    def _probs_from_log(self, mu: np.ndarray) -> np.ndarray:
        lo, hi = self.info.bounds
        s = self.info.log_sigma
        if self._cal is not None:
            mu = calibrated_log1p(mu, self._cal) - 0.5 * s * s
        p_ge_lo = _norm_sf((math.log1p(lo) - mu) / s)
        p_ge_hi = _norm_sf((math.log1p(hi) - mu) / s)
        return np.stack([1.0 - p_ge_lo, p_ge_lo - p_ge_hi, p_ge_hi], axis=1)

    def _expected_from_log(self, mu: np.ndarray) -> np.ndarray:
        if self._cal is not None:
            return np.maximum(np.expm1(calibrated_log1p(mu, self._cal)), 0.0)
        return np.expm1(mu + 0.5 * self.info.log_sigma ** 2)

    # ---- public API ------------------------------------------------------------------
    def predict_features(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Probabilities [N, 3] float32 and expected tokens [N] float64 from features [N, F]."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.layout.n_features:
            raise ValueError(f"features must have shape [N, {self.layout.n_features}], got {x.shape}")
        if len(x) == 0:
            return np.zeros((0, 3), np.float32), np.zeros(0)
        y = self._run(x)
        if self.info.kind == "regressor":
            return self._probs_from_log(y).astype(np.float32), self._expected_from_log(y)
        return y, y.astype(np.float64) @ _TYPICAL

    def predict(self, text: str) -> Prediction:
        """Predicted answer length of one prompt.

        Args:
            text: the scored prompt text (str).

        Returns:
            :class:`Prediction` with p_short, p_medium, p_long, label and
            expected_tokens (answer tokens, float >= 0).

        Raises:
            TypeError: ``text`` is not a str.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        b = getattr(self._tls, "bind", None) if self._bind_ok else None
        if b is None and self._bind_ok:
            b = self._new_binding()
        if b is not None:  # preallocated input/output buffers bound to the session (IO binding)
            xin, yout, io = b
            xin.fill(0.0)
            self._fill(text, xin[0])
            if self._lex_col is not None:
                xin[0, self._lex_col] = self._lexicon.score(text)
            self._session.run_with_iobinding(io)
            y = yout[0]
        else:
            x = self.layout.extract(text).reshape(1, -1)
            if self._lex_col is not None:
                x[0, self._lex_col] = self._lexicon.score(text)
            if self.info.kind == "classifier":
                y = self._run(x)[0]  # handles ZipMap outputs
            else:
                y = self._session.run(self._outputs, {self._input: x})[0].reshape(-1)
        if self.info.kind == "regressor":  # scalar path (same numbers as predict_features)
            mu = float(y[0])
            s = self.info.log_sigma
            if self._cal is not None:
                le = self._cal_one(mu)
                expected = max(0.0, math.expm1(le))
                mu = le - self._half_s2
            else:
                expected = max(0.0, math.expm1(mu + self._half_s2))
            p_ge_lo = 0.5 * math.erfc((self._log_lo - mu) / s / _SQRT2)
            p_ge_hi = 0.5 * math.erfc((self._log_hi - mu) / s / _SQRT2)
            return _make_prediction(1.0 - p_ge_lo, p_ge_lo - p_ge_hi, p_ge_hi, expected)
        ps, pm, pl = float(y[0]), float(y[1]), float(y[2])
        return _make_prediction(ps, pm, pl, ps * _TYPICAL_T[0] + pm * _TYPICAL_T[1] + pl * _TYPICAL_T[2])

    def _cal_one(self, mu: float) -> float:
        """:func:`calibrated_log1p` of one float, without numpy (the single-prompt path)."""
        xs, ys = self._cal_x, self._cal_y
        if mu <= xs[0]:
            return ys[0] + (mu - xs[0]) * (ys[1] - ys[0]) / (xs[1] - xs[0])
        if mu >= xs[-1]:
            return ys[-1] + (mu - xs[-1]) * (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        i = bisect.bisect_right(xs, mu)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (mu - x0) * (y1 - y0) / (x1 - x0)

    def _new_binding(self):
        """Per-thread IO binding: a zeroed [1, F] input and a [1, k] output buffer, both bound
        to the session once, so a single prediction allocates nothing in onnxruntime's API."""
        try:
            import onnxruntime as ort

            xin = np.zeros((1, self.layout.n_features), dtype=np.float32)
            yout = np.zeros((1, 3 if self.info.kind == "classifier" else 1), dtype=np.float32)
            io = self._session.io_binding()
            io.bind_ortvalue_input(self._input, ort.OrtValue.ortvalue_from_numpy(xin))
            io.bind_ortvalue_output(self._output, ort.OrtValue.ortvalue_from_numpy(yout))
            self._session.run_with_iobinding(io)
            b = (xin, yout, io)
        except Exception:  # e.g. a ZipMap (sequence) output cannot be bound: plain run()
            self._bind_ok = False
            return None
        self._tls.bind = b
        return b

    def predict_many(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities of many prompts: float32 [N, 3] = [P(Short), P(Medium), P(Long)]."""
        return self.predict_features(self.features_many(texts))[0]

    def score_many(self, texts: Sequence[str]) -> np.ndarray:
        """The ordering key of many prompts, higher = longer: float64 [N].

        For a regressor: expected answer tokens (seed 003 "magnitude prior").
        For a classifier: P(Long) (paper §3.3), the key of the ``sjf`` policy.
        """
        return self.score_features(self.features_many(texts))

    def score_features(self, x: np.ndarray) -> np.ndarray:
        """:meth:`score_many` from precomputed features [N, F]: float64 [N]."""
        probs, expected = self.predict_features(x)
        if self.info.kind == "regressor":
            return expected
        return probs[:, 2].astype(np.float64)

    def __repr__(self) -> str:
        return f"Predictor({self.path!r}, layout={self.info.layout}, kind={self.info.kind})"


_cache: dict[str, Predictor] = {}
_lock = threading.Lock()


def _open(path: Path) -> Predictor:
    try:
        import onnxruntime as ort
    except ImportError as exc:  # pragma: no cover - a hard dependency
        raise PredictorError(f"onnxruntime is not installed; cannot load {path}") from exc
    if not path.is_file():
        raise PredictorError(f"model file not found: {path}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise PredictorError(f"model file {path} could not be loaded by onnxruntime: {type(exc).__name__}: "
                             f"{str(exc)[:300]}") from None
    meta = dict(session.get_modelmeta().custom_metadata_map or {})
    info = read_model_info(path, meta)
    try:
        layout = get_layout(info.layout)
    except ValueError as exc:
        raise PredictorError(f"model {path}: {exc}") from None
    inputs = session.get_inputs()
    if len(inputs) != 1:
        raise PredictorError(f"model {path}: expected one input, found {len(inputs)}")
    width = inputs[0].shape[-1] if inputs[0].shape else None
    if isinstance(width, int) and width != layout.n_features:
        raise PredictorError(f"model {path}: input width {width} does not match layout "
                             f"{info.layout} ({layout.n_features} features)")
    from sjf_core.predict._lexicon import Lexicon

    try:
        lexicon = Lexicon.from_meta(meta)
    except ValueError as exc:
        raise PredictorError(f"model {path}: {exc}") from None
    if lexicon is not None and "lexicon" not in layout.names[-1:]:
        raise PredictorError(f"model {path}: a lexicon needs a layout with a lexicon column (v3), not {info.layout}")
    return Predictor(path, session, info, layout, lexicon)


def load_predictor(path: str | os.PathLike | None = None) -> Predictor:
    """Load a length model, once per process per path (later calls return the same object).

    Args:
        path: an ONNX model file; None loads the shipped default (:func:`default_model_path`).

    Returns:
        :class:`Predictor`.

    Raises:
        PredictorError: the file is missing or corrupt, or its layout/kind is unknown.
    """
    p = Path(path) if path is not None else default_model_path()
    try:
        key = str(p.resolve())
    except OSError:
        key = str(p.absolute())
    pred = _cache.get(key)
    if pred is not None:
        return pred
    with _lock:
        pred = _cache.get(key)
        if pred is None:
            pred = _open(Path(key))
            _cache[key] = pred
    return pred
