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
~10 kB prompt. Below ``HEAD_CHARS + TAIL_CHARS`` characters the whole text is used.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["FEATURE_NAMES", "VERBS", "HEAD_CHARS", "TAIL_CHARS", "extract_v1", "extract_v1_many", "window"]

VERBS = ("what", "write", "explain", "summarize", "how", "list", "implement", "compare",
         "describe", "generate", "why", "define", "other")

#: The 19 v1 feature names in model-input order (paper §3.2, DESIGN.md).
FEATURE_NAMES: tuple[str, ...] = (
    "prompt_token_len", "has_code_keyword", "has_length_constraint", "ends_with_question",
    "has_format_keyword", "clause_count",
) + tuple(f"verb_{v}" for v in VERBS)

N_FEATURES = len(FEATURE_NAMES)

#: Characters scanned at the start / end of a long prompt (bounded cost).
HEAD_CHARS = 8192
TAIL_CHARS = 2048

_CODE_WORDS = (
    "code function def class script program implement algorithm debug refactor import variable "
    "loop recursion api sql regex react angular vue nextjs typescript javascript html css node "
    "express django flask component endpoint middleware query"
).split()

# Verb words in priority order (first present wins) and the one-hot column each maps to.
_VERB_PRIORITY = (
    ("summarize", ("summarize", "summarizing")),
    ("explain", ("explain",)),
    ("compare", ("compare", "comparing")),
    ("translate", ("translate", "translating")),
    ("generate", ("generate", "generating")),
    ("implement", ("implement",)),
    ("debug", ("debug",)),
    ("refactor", ("refactor",)),
    ("list", ("list",)),
    ("write", ("write",)),
    ("describe", ("describe", "describing")),
    ("define", ("define", "defining")),
    ("what", ("what",)),
    ("how", ("how",)),
    ("why", ("why",)),
)
_VERB_COL = {v: 6 + i for i, v in enumerate(VERBS)}
_OTHER_COL = _VERB_COL["other"]

# One regex finds every word that matters for the code flag and the verb, in one pass.
_WORD_FEATURE = {w: ("code", None) for w in _CODE_WORDS}
for _rank, (_verb, _forms) in enumerate(_VERB_PRIORITY):
    for _f in _forms:
        _WORD_FEATURE[_f] = ("verb", _rank) if _f not in _WORD_FEATURE else ("both", _rank)
_WORDS_RE = re.compile(r"\b(" + "|".join(sorted(map(re.escape, _WORD_FEATURE), key=len, reverse=True)) + r")\b")

_CONSTRAINT_RE = re.compile(
    r"\bin\s+\d+\s+(?:words?|sentences?)\b|\bno\s+more\s+than\s+\d+|\bunder\s+\d+\s+words?\b"
    r"|\bbriefly\b|\bconcisely\b|\bshortly\b|\bone[\s-]liner\b|\btl;?dr\b"
)
_FORMAT_SUBSTRINGS = ("list", "table", "bullet", "step by step", "enumerate", "outline", "numbered",
                      "format", "structure")


def window(text: str, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> str:
    """The scanned part of ``text``: all of it, or its first ``head`` and last ``tail``
    characters joined by a newline when it is longer than ``head + tail``."""
    if len(text) <= head + tail:
        return text
    return text[:head] + "\n" + text[-tail:]


def _fill_v1(text: str, out: np.ndarray) -> None:
    out[0] = len(text) // 4
    w = window(text)
    low = w.lower()
    code = 0.0
    best = len(_VERB_PRIORITY)
    for m in _WORDS_RE.finditer(low):
        kind, rank = _WORD_FEATURE[m.group(1)]
        if kind != "verb":
            code = 1.0
        if rank is not None and rank < best:
            best = rank
            if best == 0 and code:
                break
    out[1] = code
    out[2] = 1.0 if _CONSTRAINT_RE.search(low) else 0.0
    out[3] = 1.0 if text.rstrip().endswith("?") else 0.0
    out[4] = 1.0 if any(s in low for s in _FORMAT_SUBSTRINGS) else 0.0
    out[5] = w.count(",") + w.count(";") + low.count(" and ") + low.count(" but ") + low.count(" because ")
    verb = _VERB_PRIORITY[best][0] if best < len(_VERB_PRIORITY) else "other"
    out[_VERB_COL.get(verb, _OTHER_COL)] = 1.0


def extract_v1(text: str) -> np.ndarray:
    """The 19 paper features of one prompt.

    Args:
        text: the scored prompt text (see :func:`sjf_core.text.scored_text`).

    Returns:
        numpy.ndarray, shape [19], float32, in :data:`FEATURE_NAMES` order.
        Cost is bounded by :data:`HEAD_CHARS` + :data:`TAIL_CHARS` characters.

    Raises:
        TypeError: if ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    out = np.zeros(N_FEATURES, dtype=np.float32)
    _fill_v1(text, out)
    return out


def extract_v1_many(texts) -> np.ndarray:
    """:func:`extract_v1` for a sequence of texts: float32 array of shape [N, 19]."""
    texts = list(texts)
    out = np.zeros((len(texts), N_FEATURES), dtype=np.float32)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, got {type(t).__name__}")
        _fill_v1(t, out[i])
    return out
