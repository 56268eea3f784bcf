"""Model files: where the shipped model lives, how a file's metadata is read, and opening it.

Contract:

* :func:`read_model_info` turns a file's ONNX ``metadata_props`` (str -> str) into a
  :class:`ModelInfo`; missing keys mean a ``v1`` classifier with bounds 200/800 (the paper's
  Model A). Raises :class:`PredictorError` on an unknown kind, bad bounds/σ or bad calibration knots.
* :func:`open_model` opens a file with onnxruntime (one thread, CPU) and checks it against its
  layout: returns ``(session, ModelInfo, Layout, Lexicon | None)``; raises :class:`PredictorError`.
* :func:`calibrated_log1p` is the calibration map μ -> ln(1 + E[tokens]) (float64, same shape).
* :func:`spread_at` is the spread calibration μ -> (location, σ) of ln(1 + tokens) (metadata
  ``sjf.calibration_spread``, fitted by :mod:`sjf_lab.calibrate`; issue 23).

The metadata keys (``sjf.feature_layout``, ``sjf.model_kind``, ``sjf.class_bounds``,
``sjf.log_sigma``, ``sjf.calibration``, ``sjf.calibration_spread``, ``sjf.lexicon*``) are described in docs/predictor.md
("Model files").
"""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sjf_core.predict._classes import LONG_MIN_TOKENS, SHORT_MAX_TOKENS
from sjf_core.predict._layouts import Layout, get_layout

__all__ = [
    "PredictorError", "ModelInfo", "default_model_path", "read_model_info", "calibrated_log1p", "open_model",
    "META_LAYOUT", "META_KIND", "META_BOUNDS", "META_SIGMA", "META_CALIBRATION", "META_SPREAD", "DEFAULT_MODEL_FILE",
    "spread_at",
]

META_LAYOUT = "sjf.feature_layout"
META_KIND = "sjf.model_kind"
META_BOUNDS = "sjf.class_bounds"
META_SIGMA = "sjf.log_sigma"
META_CALIBRATION = "sjf.calibration"
META_SPREAD = "sjf.calibration_spread"

#: File name of the shipped default model inside ``models/`` (package ``sjf_core._models``).
DEFAULT_MODEL_FILE = "default.onnx"


class PredictorError(Exception):
    """A model file is missing, unreadable, corrupt, or of an unknown layout.

    The message names the model path; it never contains prompt text.
    """


@dataclass(frozen=True)
class ModelInfo:
    """How to read one model file.

    Attributes:
        path: absolute model path.
        layout: feature layout name ("v1", "v2", "v2l", "v3").
        kind: "classifier" or "regressor".
        bounds: (Short max, Long min) answer tokens, default (200, 800).
        log_sigma: regressor residual std of ln(1+tokens) (> 0); unused for classifiers.
        metadata: all ONNX metadata_props.
        calibration: (μ knots, ln(1 + E[tokens]) knots) float64 arrays, or None.
        spread: (μ knots, median ln(1 + tokens) knots, σ knots) float64 arrays, or None.
    """

    path: str
    layout: str
    kind: str
    bounds: tuple[float, float]
    log_sigma: float
    metadata: dict
    calibration: tuple | None = None
    spread: tuple | None = None


def _knots(path, metadata: dict, key: str, width: int, positive_cols: tuple) -> tuple | None:
    """Knots of metadata ``key`` as ``width`` float64 arrays (strictly increasing first column and
    ``positive_cols`` increasing / positive as documented), or None when absent.

    Raises:
        PredictorError: present but malformed.
    """
    if key not in metadata:
        return None
    try:
        k = np.asarray(json.loads(metadata[key]), dtype=np.float64)
        ok = k.ndim == 2 and k.shape[1] == width and len(k) >= 2 and np.isfinite(k).all() \
            and (np.diff(k[:, 0]) > 0).all() and (np.diff(k[:, 1]) > 0).all() \
            and all((k[:, c] > 0).all() for c in positive_cols)
    except (ValueError, TypeError):
        ok = False
    if not ok:
        raise PredictorError(f"model {path}: bad {key} (want strictly increasing knots of width {width})")
    return tuple(k[:, c].copy() for c in range(width))


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
    """Interpret a model's metadata_props (missing keys: a v1 classifier, bounds 200/800).

    Raises:
        PredictorError: unknown kind, bad bounds or log_sigma, bad calibration knots.
    """
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
    cal = _knots(path, metadata, META_CALIBRATION, 2, ())
    spread = _knots(path, metadata, META_SPREAD, 3, (2,))
    return ModelInfo(str(path), layout, kind, (lo, hi), sigma, dict(metadata), cal, spread)


def calibrated_log1p(mu, knots: tuple) -> np.ndarray:
    """The calibration map at ``mu`` (array-like): ln(1 + E[tokens]) as float64 of ``mu``'s shape,
    piecewise linear through ``knots`` (xs, ys), extended with the end segments' slopes (strictly
    increasing, so the order of μ is kept)."""
    xs, ys = knots
    m = np.asarray(mu, dtype=np.float64)
    out = np.interp(m, xs, ys)
    lo_slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
    hi_slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    out = np.where(m < xs[0], ys[0] + (m - xs[0]) * lo_slope, out)
    return np.where(m > xs[-1], ys[-1] + (m - xs[-1]) * hi_slope, out)


def spread_at(mu, knots: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The spread calibration at ``mu``: (location, σ) of ln(1 + tokens), float64 of ``mu``'s shape.
    The location is piecewise linear through the (μ, median) knots and continues with the end
    slopes (strictly increasing: the order of μ is kept); σ is interpolated, constant beyond the ends."""
    xs, meds, sds = knots
    return calibrated_log1p(mu, (xs, meds)), np.interp(np.asarray(mu, dtype=np.float64), xs, sds)


def open_model(path: Path):
    """Open ``path`` with onnxruntime and check it against its layout.

    Returns:
        ``(session, ModelInfo, Layout, Lexicon | None)``; the session runs on the CPU with
        ``intra_op_num_threads=1``, ``inter_op_num_threads=1``.

    Raises:
        PredictorError: onnxruntime missing, file missing or unloadable, unknown layout,
            input width not the layout's, or a lexicon on a layout without a lexicon column.
    """
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
        layout: Layout = get_layout(info.layout)
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
    return session, info, layout, lexicon
