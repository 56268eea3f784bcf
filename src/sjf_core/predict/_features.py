"""The paper's 19 lexical features (layout "v1", paper §3.2), in the published order.

Layout (DESIGN.md "Prediction"; the published Clairvoyant models take exactly this):

====  =====================  ==========================================================
 idx  name                   value
====  =====================  ==========================================================
   0  prompt_token_len       ``len(text) // 4`` (characters / 4, paper §3.2)
   1  has_code_keyword       1.0 if a code word (code, function, sql, react, ...) occurs
   2  has_length_constraint  1.0 if "in N words", "briefly", "tl;dr", ... occurs
   3  ends_with_question     1.0 if the text ends with "?" (trailing whitespace ignored)
   4  has_format_keyword     1.0 if list/table/bullet/step by step/outline/... occurs
   5  clause_count           count of "," ";" " and " " but " " because "
6–18  verb_*                 one-hot of the instruction verb: what, write, explain,
                             summarize, how, list, implement, compare, describe,
                             generate, why, define, other
====  =====================  ==========================================================

The verb is the highest-priority verb word present (priority: summarize, explain,
compare, translate, generate, implement, debug, refactor, list, write, describe,
define, what, how, why); translate/debug/refactor and "no verb" map to ``other``.
These word lists follow the reference implementation of the published models so
that Model A sees the inputs it was trained on.

Bounded cost: ``prompt_token_len`` uses the full length; every other feature is
computed on a window of the text (the first :data:`HEAD_CHARS` and last
:data:`TAIL_CHARS` characters), so a 1 MB pasted document costs no more than a
~4 kB prompt. Below ``HEAD_CHARS + TAIL_CHARS`` characters the whole text is used.
"""

from __future__ import annotations

import re

import numpy as np

from sjf_core.predict._wordlists import (CODE_WORDS, CONSTRAINT_NUM_WORDS, CONSTRAINT_PLAIN, FORMAT_SUBSTRINGS,
                                         HEAD_CHARS, OTHER_COL, TAIL_CHARS, UNICODE_SEPS, VERB_COL, VERB_PRIORITY,
                                         VERBS, window)

__all__ = ["FEATURE_NAMES", "VERBS", "HEAD_CHARS", "TAIL_CHARS", "Scan", "extract_v1", "extract_v1_many", "extract_v1_py", "fill_text_v1", "fill_v1", "window"]

#: The 19 v1 feature names in model-input order (paper §3.2, DESIGN.md).
FEATURE_NAMES: tuple[str, ...] = (
    "prompt_token_len", "has_code_keyword", "has_length_constraint", "ends_with_question",
    "has_format_keyword", "clause_count",
) + tuple(f"verb_{v}" for v in VERBS)

N_FEATURES = len(FEATURE_NAMES)

_VERB_FORMS = frozenset(f for _, forms in VERB_PRIORITY for f in forms)

# Length constraints (paper §3.2): "in N words", "in N sentences", "no more than N",
# "under N words", briefly, concisely, shortly, "one liner", "tl;dr". Word checks first; the
# numeric regex runs only when the window has a digit and one of its words.
_CONSTRAINT_NUM_RE = re.compile(rb"\bin\s+\d+\s+(?:words?|sentences?)\b|\bno\s+more\s+than\s+\d+|\bunder\s+\d+\s+words?\b")
_ONE_LINER_RE = re.compile(rb"\bone[\s-]liner\b")
_NON_DIGITS = bytes(c for c in range(256) if not 0x30 <= c <= 0x39)

# Tokenisation: ASCII letters are lower-cased, letters, digits, "_" and every non-ASCII byte
# (UTF-8 letters of other scripts) are word bytes; everything else separates words.
_WORD_BYTES = set(b"abcdefghijklmnopqrstuvwxyz0123456789_") | set(range(0x80, 0x100))
_SEP_TABLE = bytes(c if c in _WORD_BYTES else 0x20 for c in range(256))
class Scan:
    """One pass over the scanned window of a prompt, shared by the v1 and v2 extractors.

    Attributes:
        n_chars: characters of the whole text.
        w: the window (str); low: its UTF-8 bytes with ASCII lower-cased;
        toks: word tokens of ``low`` (bytes); words: their set.
    """

    __slots__ = ("n_chars", "w", "low", "toks", "words")

    def __init__(self, text: str):
        self.n_chars = len(text)
        self.w = window(text)
        self.low = self.w.encode("utf-8", "surrogatepass").lower()
        low = self.low
        if not low.isascii():
            for lead, seps in UNICODE_SEPS.items():
                if lead in low:
                    for sep in seps:
                        if sep in low:
                            low = low.replace(sep, b" ")
        self.toks = low.translate(_SEP_TABLE).split()
        self.words = set(self.toks)


def _has_length_constraint(low: bytes, words: set) -> bool:
    if not words.isdisjoint(CONSTRAINT_PLAIN) or b"tl;dr" in low:
        return True
    if b"liner" in words and _ONE_LINER_RE.search(low):
        return True
    if not words.isdisjoint(CONSTRAINT_NUM_WORDS) and low.translate(None, _NON_DIGITS):
        return _CONSTRAINT_NUM_RE.search(low) is not None
    return False


def fill_v1(scan: Scan, out: np.ndarray) -> None:
    """Write the 19 v1 features of ``scan`` into ``out[:19]`` (zeros expected)."""
    low, words = scan.low, scan.words
    out[0] = scan.n_chars // 4
    out[1] = 0.0 if words.isdisjoint(CODE_WORDS) else 1.0
    out[2] = 1.0 if _has_length_constraint(low, words) else 0.0
    end = low[-64:].rstrip() or low.rstrip()
    out[3] = 1.0 if end.endswith(b"?") else 0.0
    for s in FORMAT_SUBSTRINGS:
        if s in low:
            out[4] = 1.0
            break
    out[5] = low.count(b",") + low.count(b";") + low.count(b" and ") + low.count(b" but ") + low.count(b" because ")
    col = OTHER_COL
    if not words.isdisjoint(_VERB_FORMS):
        for verb, forms in VERB_PRIORITY:
            if forms[0] in words or (len(forms) > 1 and forms[1] in words):
                col = VERB_COL.get(verb, OTHER_COL)
                break
    out[col] = 1.0


_FAST = None  # sjf_core.predict._fastscan when the C accelerator is built, else False (resolved on first use)


def _fast():
    global _FAST
    if _FAST is None:
        from sjf_core.predict import _fastscan as fastscan

        _FAST = fastscan if fastscan.available() else False
    return _FAST


def fill_text(text: str, out: np.ndarray, version: int, fill_py) -> None:
    """Write the features of layout ``version`` (1 or 2) of ``text`` into the zeroed float32
    row ``out``: the C accelerator when built, else ``fill_py(Scan(text), out)``."""
    fast = _FAST if _FAST is not None else _fast()
    if fast:
        fast.fill(text, out, version)
    else:
        fill_py(Scan(text), out)


def extract_text(text: str, width: int, version: int, fill_py) -> np.ndarray:
    """One prompt's features as a new float32 row [width] (see :func:`fill_text`).

    Raises:
        TypeError: if ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    out = np.zeros(width, dtype=np.float32)
    fill_text(text, out, version, fill_py)
    return out


def extract_texts(texts, width: int, version: int, fill_py) -> np.ndarray:
    """Features of a sequence of texts: float32 [N, width] (see :func:`fill_text`).

    Raises:
        TypeError: if an item is not a str.
    """
    texts = list(texts)
    out = np.zeros((len(texts), width), dtype=np.float32)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, got {type(t).__name__}")
        fill_text(t, out[i], version, fill_py)
    return out


def extract_v1(text: str) -> np.ndarray:
    """The 19 paper features of one prompt.

    Args:
        text: the scored prompt text (see :func:`sjf_core.predict._text.scored_text`).

    Returns:
        numpy.ndarray, shape [19], float32, in :data:`FEATURE_NAMES` order.
        Cost is bounded by :data:`HEAD_CHARS` + :data:`TAIL_CHARS` characters. Uses the C
        accelerator (:mod:`sjf_core.predict._fastscan`) when built; the numbers are the same.

    Raises:
        TypeError: if ``text`` is not a str.
    """
    return extract_text(text, N_FEATURES, 1, fill_v1)


def fill_text_v1(text: str, out: np.ndarray) -> None:
    """Write the v1 features of ``text`` into the zeroed float32 row ``out`` [19] (no allocation)."""
    fill_text(text, out, 1, fill_v1)


def extract_v1_py(text: str) -> np.ndarray:
    """:func:`extract_v1` in pure Python (the reference implementation)."""
    out = np.zeros(N_FEATURES, dtype=np.float32)
    fill_v1(Scan(text), out)
    return out


def extract_v1_many(texts) -> np.ndarray:
    """:func:`extract_v1` for a sequence of texts: float32 array of shape [N, 19]."""
    return extract_texts(texts, N_FEATURES, 1, fill_v1)
