"""A hashed bag-of-words length lexicon: one ridge-regression score per prompt (issue 13).

Contract:

* :func:`buckets_of` maps a text to the sorted unique int64 bucket ids of its word unigrams and
  bigrams (words: runs of ASCII letters/digits/underscore or non-ASCII UTF-8 bytes, ASCII
  lower-cased, over :func:`sjf_core.predict._features.window` only, so the cost is bounded), hashed
  with CRC-32 into ``n_buckets`` (a power of two).
* :func:`sjf_lab.lexicon_fit.fit_lexicon` (tooling) fits the weights a :class:`Lexicon` holds.
* :class:`Lexicon` scores texts: ``intercept + Σ w[b] / sqrt(#buckets)``, float64.
  :meth:`Lexicon.to_meta` / :meth:`Lexicon.from_meta` store it in ONNX metadata_props
  (float16, base64), so a model stays one file.

The score is a feature for the trees (``lexicon`` column of layout ``v3``): a linear model
over thousands of words generalises to unseen sources better than trees over 1,024 buckets.
In training it is **cross-fitted** (:func:`sjf_lab.lexicon_fit.cross_fit_scores`: each training
prompt gets the score of a lexicon fitted without its fold) so the trees do not over-trust it.
"""

from __future__ import annotations

import base64
import math
import zlib
from typing import Sequence

import numpy as np

import re

from sjf_core.settings import native_scan_disabled
from sjf_core.predict._features import window

__all__ = ["LEX_BUCKETS", "buckets_of", "Lexicon"]

LEX_BUCKETS = 1 << 16
_WORD = re.compile(rb"[a-z0-9_\x80-\xff]+")


def _c_ext():
    """The optional C accelerator ``sjf_core.predict._lex`` (built by ``pip install``), or None
    (not built, or ``SJF_NO_C_SCAN=1``)."""
    if native_scan_disabled():
        return None
    try:
        from sjf_core.predict import _lex
    except ImportError:
        return None
    return _lex


_C = _c_ext()
_MIX1 = np.uint64(0x9E3779B1)
_MIX2 = np.uint64(0x85EBCA6B)
_MASK32 = np.uint64(0xFFFFFFFF)


def buckets_of(text: str, n_buckets: int = LEX_BUCKETS) -> np.ndarray:
    """Sorted unique bucket ids (int64) of the unigrams and bigrams of ``text``'s scanned window."""
    toks = _WORD.findall(window(text).encode("utf-8", "surrogatepass").lower())
    if not toks:
        return np.zeros(0, dtype=np.int64)
    h = np.fromiter(map(zlib.crc32, toks), dtype=np.uint64, count=len(toks))
    mask = np.uint64(n_buckets - 1)
    uni = h & mask
    if len(h) > 1:
        x = (h[:-1] * _MIX1 + h[1:] + np.uint64(0x5BD1E995)) & _MASK32
        x = ((x * _MIX2) & _MASK32) >> np.uint64(8)
        allb = np.concatenate([uni, x & mask])
    else:
        allb = uni
    return np.unique(allb.astype(np.int64))


class Lexicon:
    """Fitted lexicon: ``weights`` float32 [n_buckets], ``intercept`` float."""

    def __init__(self, weights: np.ndarray, intercept: float):
        self.weights = np.ascontiguousarray(weights, dtype=np.float32)
        self._wbytes = memoryview(self.weights).cast("B")
        self.intercept = float(intercept)
        self.n_buckets = len(self.weights)
        if self.n_buckets & (self.n_buckets - 1):
            raise ValueError("lexicon size must be a power of two")

    def score_buckets(self, b: np.ndarray) -> float:
        if len(b) == 0:
            return self.intercept
        return self.intercept + float(self.weights[b].sum(dtype=np.float64)) / math.sqrt(len(b))

    def score(self, text: str) -> float:
        """Lexicon score of one text (float); the C accelerator when built (same number)."""
        if _C is not None:
            s, n = _C.score(window(text).encode("utf-8", "surrogatepass").lower(), self._wbytes, self.n_buckets)
            return self.intercept + s / math.sqrt(n) if n else self.intercept
        return self.score_buckets(buckets_of(text, self.n_buckets))

    def score_py(self, text: str) -> float:
        """:meth:`score` in pure Python (the reference implementation)."""
        return self.score_buckets(buckets_of(text, self.n_buckets))

    def score_many(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([self.score(t) for t in texts], dtype=np.float64)

    def to_meta(self) -> dict[str, str]:
        """ONNX metadata_props entries (``sjf.lexicon``: base64 float16 weights; intercept)."""
        raw = self.weights.astype(np.float16).tobytes()
        return {"sjf.lexicon": base64.b64encode(zlib.compress(raw, 9)).decode("ascii"),
                "sjf.lexicon_intercept": repr(self.intercept), "sjf.lexicon_buckets": str(self.n_buckets)}

    @classmethod
    def from_meta(cls, meta: dict) -> "Lexicon | None":
        """The lexicon stored by :meth:`to_meta`, or None when ``meta`` has none.

        Raises:
            ValueError: the entries are present but corrupt.
        """
        if "sjf.lexicon" not in meta:
            return None
        try:
            raw = zlib.decompress(base64.b64decode(meta["sjf.lexicon"]))
            w = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
            n = int(meta.get("sjf.lexicon_buckets", len(w)))
            if len(w) != n:
                raise ValueError("size mismatch")
            return cls(w, float(meta.get("sjf.lexicon_intercept", "0")))
        except Exception as exc:
            raise ValueError(f"corrupt lexicon metadata: {exc}") from None
