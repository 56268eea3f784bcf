"""Opt-in production training log: features and observed answer tokens, never prompt text.

Each line is one JSON object that ``sjf train --data FILE`` accepts::

    {"v": 1, "ts": 1767225600.0, "layout": "v2", "completion_tokens": 412,
     "features": [..] | "features_sparse": {"n": 1068, "idx": [..], "val": [..]},
     "source": "production", "model": "llama3"}

``features`` are the predictor's inputs in ``layout`` (DESIGN.md invariant 6: features may be
persisted, prompt text may not); wide layouts (more than 64 columns) are written sparse.
``completion_tokens`` is the backend's ``usage.completion_tokens``.

Usage from an adapter, after a request completed::

    writer = TrainingLogWriter("/var/log/sjf/train.jsonl")
    writer.write(predictor.features_many([text])[0], predictor.info.layout, usage.completion_tokens)
    # or, equivalently:
    writer.write_observation(predictor, text, usage.completion_tokens)

Writes never raise (a logging failure must not fail a request): they return False, and
the failure is counted in :attr:`TrainingLogWriter.errors` and logged without text.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["TrainingLogWriter", "encode_record", "decode_features", "SPARSE_ABOVE"]

log = logging.getLogger("sjf_lab.training_log")

#: Layouts wider than this many features are written in sparse form.
SPARSE_ABOVE = 64


def _num(x: float) -> float | int:
    f = float(x)
    return int(f) if f.is_integer() else float(np.float32(f))


def encode_record(features, layout: str, completion_tokens: int, source: str = "production",
                  model: str | None = None, ts: float | None = None) -> dict:
    """The JSON-ready record of one observation.

    Raises:
        ValueError: features not a finite 1-D numeric vector, tokens not a non-negative integer,
            or layout not a short name.
    """
    if isinstance(features, (str, bytes)):
        raise ValueError("features must be numbers, not text")
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("features must be a non-empty finite 1-D vector")
    if isinstance(completion_tokens, bool) or not isinstance(completion_tokens, (int, np.integer, float)):
        raise ValueError("completion_tokens must be a number")
    if not math.isfinite(float(completion_tokens)) or completion_tokens < 0:
        raise ValueError("completion_tokens must be >= 0")
    if not isinstance(layout, str) or not (0 < len(layout) <= 16):
        raise ValueError("layout must be a short name such as 'v1' or 'v2'")
    rec: dict[str, Any] = {"v": 1, "ts": round(time.time() if ts is None else ts, 3), "layout": layout,
                           "completion_tokens": int(completion_tokens)}
    if x.size > SPARSE_ABOVE:
        idx = np.flatnonzero(x)
        rec["features_sparse"] = {"n": int(x.size), "idx": idx.tolist(), "val": [_num(v) for v in x[idx]]}
    else:
        rec["features"] = [_num(v) for v in x]
    rec["source"] = str(source)[:64]
    if model is not None:
        rec["model"] = str(model)[:128]
    return rec


def decode_features(obj: dict) -> np.ndarray | None:
    """Features (float32 [F]) of a log record, dense or sparse, or None if malformed."""
    try:
        if isinstance(obj.get("features"), list):
            x = np.asarray(obj["features"], dtype=np.float32)
        elif isinstance(obj.get("features_sparse"), dict):
            sp = obj["features_sparse"]
            n = int(sp["n"])
            if not 0 < n <= 1_000_000:
                return None
            x = np.zeros(n, dtype=np.float32)
            idx = np.asarray(sp["idx"], dtype=np.int64)
            val = np.asarray(sp["val"], dtype=np.float32)
            if idx.shape != val.shape or (idx.size and (idx.min() < 0 or idx.max() >= n)):
                return None
            x[idx] = val
        else:
            return None
    except (TypeError, ValueError, KeyError):
        return None
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        return None
    return x


class TrainingLogWriter:
    """Append observations to a JSONL file (thread-safe; opened lazily, line-buffered).

    Args:
        path: the log file (created with its parent directory; mode 0600).
        source: the ``source`` written on every line (default "production").
        max_bytes: stop writing once the file reaches this size (None: no limit).

    Attributes:
        written: lines written by this writer.
        errors: failed writes (bad input or I/O errors).
    """

    def __init__(self, path: str | os.PathLike, source: str = "production", max_bytes: int | None = None):
        self.path = Path(path)
        self.source = source
        self.max_bytes = max_bytes
        self.written = 0
        self.errors = 0
        self._lock = threading.Lock()
        self._fh = None

    def _open(self):
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._fh = os.fdopen(fd, "a", encoding="utf-8", buffering=1)
        return self._fh

    def write(self, features, layout: str, completion_tokens: int, model: str | None = None) -> bool:
        """Append one observation. Returns True if written; never raises."""
        try:
            line = json.dumps(encode_record(features, layout, completion_tokens, self.source, model),
                              separators=(",", ":"))
        except (ValueError, TypeError) as exc:
            self.errors += 1
            log.warning("training log: observation not written (%s)", type(exc).__name__)
            return False
        try:
            with self._lock:
                fh = self._open()
                if self.max_bytes is not None and fh.tell() >= self.max_bytes:
                    return False
                fh.write(line + "\n")
                self.written += 1
            return True
        except OSError as exc:
            self.errors += 1
            log.warning("training log %s: write failed (%s)", self.path, type(exc).__name__)
            return False

    def write_observation(self, predictor, text: str, completion_tokens: int, model: str | None = None) -> bool:
        """Extract ``predictor``'s features from ``text`` and append them (the text is not stored)."""
        try:
            feats = predictor.features_many([text])[0]  # with the model's lexicon column, if any
            layout = predictor.info.layout
        except Exception as exc:
            self.errors += 1
            log.warning("training log: features not extracted (%s)", type(exc).__name__)
            return False
        return self.write(feats, layout, completion_tokens, model)

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
