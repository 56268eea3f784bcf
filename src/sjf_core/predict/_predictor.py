"""The loaded length model: features -> ONNX model -> :class:`Prediction`.

Contract:

* :func:`load_predictor` (path or None = the shipped model) returns one :class:`Predictor` per
  process per resolved path (cached, thread-safe); raises :class:`PredictorError` for a missing,
  corrupt or unknown-layout file (:mod:`sjf_core.predict._model_file`).
* :meth:`Predictor.predict` (one prompt, str) -> :class:`Prediction` (probabilities of
  Short/Medium/Long, label, ``expected_tokens`` float >= 0, answer tokens); raises TypeError
  for a non-str.
* :meth:`Predictor.predict_features` (float32 [N, F]) -> (probabilities float32 [N, 3],
  expected tokens float64 [N]); :meth:`Predictor.score_many` -> the ordering key float64 [N]
  (higher = longer). ValueError for features of the wrong width.

A classifier's ``expected_tokens`` is Σ P(class) · typical tokens of the class; a regressor's
comes from ln(1 + tokens) ~ Normal(μ, σ) or, with calibration maps, the maps at μ
(:mod:`sjf_core.predict._estimate`; docs/predictor.md, "Model files" and "Calibration").
A regressor's estimate from **text** (:meth:`Predictor.predict`, :meth:`Predictor.predict_many`,
:meth:`Predictor.score_many`) also honours the answer size the prompt states
(:mod:`sjf_core.predict._stated`): an explicit size dominates, a verbosity cue shifts.
:meth:`Predictor.predict_features` has no text and gives the model's estimate alone.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from sjf_core._faults import note_fault
from sjf_core.predict._estimate import Estimate, Knots, base_many, base_one, class_probs, class_probs_many, with_stated
from sjf_core.predict._layouts import Layout
from sjf_core.predict._model_file import (  # noqa: F401  (re-exported: the model-file names callers use)
    DEFAULT_MODEL_FILE, META_BOUNDS, META_CALIBRATION, META_KIND, META_LAYOUT, META_SIGMA, ModelInfo,
    PredictorError, calibrated_log1p, default_model_path, open_model, read_model_info)
from sjf_core.predict._prediction import TYPICAL_TOKENS, Prediction
from sjf_core.predict._stated import read_size

log = logging.getLogger("sjf_core.predict")

__all__ = [
    "Predictor", "PredictorError", "ModelInfo", "load_predictor", "default_model_path", "read_model_info",
    "META_LAYOUT", "META_KIND", "META_BOUNDS", "META_SIGMA", "META_CALIBRATION", "DEFAULT_MODEL_FILE",
    "calibrated_log1p",
]

_TYPICAL = np.asarray(TYPICAL_TOKENS, dtype=np.float64)
_TYPICAL_T = tuple(float(t) for t in TYPICAL_TOKENS)
_NAMES = ("short", "medium", "long")


def _make_prediction(ps: float, pm: float, pl: float, expected: float) -> Prediction:
    """:class:`Prediction` from class probabilities (label = argmax, first on ties)."""
    label = _NAMES[0] if ps >= pm and ps >= pl else (_NAMES[1] if pm >= pl else _NAMES[2])
    return Prediction(ps, pm, pl, label, expected)


class Predictor:
    """A loaded length model. Thread-safe; use :func:`load_predictor` to get one.

    Attributes:
        info: :class:`ModelInfo` of the model file.
        layout: the :class:`~sjf_core.predict._layouts.Layout` its inputs follow.
        read_sizes: honour stated answer sizes in text predictions (regressors; default True).
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
        self._knots = Knots(info)
        self.read_sizes = True
        self._fill = layout.fill
        self._tls = threading.local()
        self._bind_ok = True
        self._lexicon = lexicon
        self._lex_col = layout.n_features - 1 if lexicon is not None else None

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

    def _from_log(self, mu: np.ndarray, texts: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Probabilities [N, 3] float32 and expected tokens [N] of regressor outputs μ [N]; with
        ``texts``, each prompt's stated size is honoured (:func:`~sjf_core.predict._estimate.with_stated`)."""
        cols = base_many(mu, self.info, self._knots)
        if texts is not None and self.read_sizes:
            for i, t in enumerate(texts):
                size = read_size(t)
                if size is not None:
                    est = with_stated(Estimate(*(float(c[i]) for c in cols)), size, self._knots)
                    for c, v in zip(cols, est):
                        c[i] = v
        return class_probs_many(cols[3], cols[4]).astype(np.float32), cols[2]

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
            return self._from_log(y)
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
        if self.info.kind == "regressor":  # scalar path (same numbers as predict_many)
            est = base_one(float(y[0]), self._knots)
            if self.read_sizes:
                est = with_stated(est, read_size(text), self._knots)
            ps, pm, pl = class_probs(est)
            return _make_prediction(ps, pm, pl, est.expected)
        ps, pm, pl = float(y[0]), float(y[1]), float(y[2])
        return _make_prediction(ps, pm, pl, ps * _TYPICAL_T[0] + pm * _TYPICAL_T[1] + pl * _TYPICAL_T[2])

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
            note_fault(log, "onnxruntime I/O binding unavailable for this model; plain run()", level=logging.INFO)
            self._bind_ok = False
            return None
        self._tls.bind = b
        return b

    def estimate_many(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Probabilities float32 [N, 3] and expected tokens float64 [N] of many prompts (stated sizes
        honoured for a regressor, as in :meth:`predict`)."""
        texts = list(texts)
        x = self.features_many(texts)
        if self.info.kind != "regressor" or not len(x):
            return self.predict_features(x)
        return self._from_log(self._run(np.ascontiguousarray(x, dtype=np.float32)), texts)

    def predict_many(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities of many prompts: float32 [N, 3] = [P(Short), P(Medium), P(Long)]."""
        return self.estimate_many(texts)[0]

    def score_many(self, texts: Sequence[str]) -> np.ndarray:
        """The ordering key of many prompts, higher = longer: float64 [N].

        For a regressor: expected answer tokens (seed 003 "magnitude prior").
        For a classifier: P(Long) (paper §3.3), the key of the ``sjf`` policy.
        """
        probs, expected = self.estimate_many(texts)
        return expected if self.info.kind == "regressor" else probs[:, 2].astype(np.float64)

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
    session, info, layout, lexicon = open_model(path)
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
