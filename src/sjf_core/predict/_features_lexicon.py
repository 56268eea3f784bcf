"""The feature layouts with a lexicon column: "v2l" (the shipped default model's: v2 plus the
lexicon score) and "v3" (v2 plus length targets, the instruction / pasted-material split and
the lexicon score; issue 13). Both keep v2's columns (:mod:`sjf_core.predict._features_v2`,
0–1064) unchanged; the lexicon is :mod:`sjf_core.predict._lexicon`.

Contract: :func:`extract_v3` maps a str to float32 [:data:`N_FEATURES_V3`]; columns 0–18 are
the paper's v1 features, 0–1064 the v2 features (C accelerator when built), then the groups
below, computed in Python on :func:`sjf_core.predict._features.window` (bounded cost: a 1 MB paste
costs like a 4 kB prompt). Raises ``TypeError`` for a non-str.

* ``targets`` (numeric and structural length targets): requested words ("2,000 words",
  "a 500-word essay", "N pages" = 500 N words), requested sentences, paragraphs, items
  ("list 10", "10 ideas", "five tips"), lines; an answer-token estimate combining them;
  "at least" / "at most" qualifiers; a one-unit answer ("one word", "in one sentence",
  "yes or no", "a number", "just the answer"); full-output requests ("full code", "complete
  script", "entire", "step by step", "in detail").
* ``instruction`` (which part is instruction, which is pasted material): characters of the
  first and last line, whether the first line ends with ":" (instruction then material),
  share of the text in its longest paragraph, references to attached material ("the
  following", "above", "this text", "below"), and whether the last paragraph is shorter
  than a fifth of the text (an instruction after a paste).
* ``lexicon`` (last column): the score of the model's hashed bag-of-words ridge lexicon
  (:mod:`sjf_core.predict._lexicon`); 0 from the extractor, filled by the predictor when the model
  file carries a lexicon.
"""

from __future__ import annotations

import math
import re

import numpy as np

from sjf_core.predict._features import window
from sjf_core.predict._features_v2 import FEATURE_NAMES_V2, GROUPS_V2, N_FEATURES_V2, fill_text_v2

__all__ = ["FEATURE_NAMES_V3", "GROUPS_V3", "N_FEATURES_V3", "LEXICON_COL", "extract_v3", "extract_v3_many", "fill_text_v3",
           "FEATURE_NAMES_V2L", "GROUPS_V2L", "N_FEATURES_V2L", "extract_v2l", "extract_v2l_many", "fill_text_v2l",
           "length_targets"]

_TARGETS = ("req_words", "req_sentences", "req_paragraphs", "req_items", "req_lines", "req_tokens_est",
            "req_at_least", "req_at_most", "one_unit_answer", "full_output")
_INSTR = ("first_line_chars", "last_line_chars", "first_line_colon", "longest_par_share", "material_ref",
          "short_last_par")

FEATURE_NAMES_V3: tuple[str, ...] = FEATURE_NAMES_V2 + _TARGETS + _INSTR + ("lexicon",)
N_FEATURES_V3 = len(FEATURE_NAMES_V3)
#: Column of the lexicon score: the extractor writes 0; a model that carries a lexicon
#: (:mod:`sjf_core.predict._lexicon`, in its ONNX metadata) has the predictor fill it.
LEXICON_COL = N_FEATURES_V3 - 1
GROUPS_V3: dict[str, list[int]] = dict(GROUPS_V2)
GROUPS_V3["targets"] = list(range(N_FEATURES_V2, N_FEATURES_V2 + len(_TARGETS)))
GROUPS_V3["instruction"] = list(range(N_FEATURES_V2 + len(_TARGETS), LEXICON_COL))
GROUPS_V3["lexicon"] = [LEXICON_COL]

_NUMWORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
             "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "fifty": 50,
             "hundred": 100, "a": 1, "an": 1, "single": 1, "a few": 3, "several": 5, "couple": 2}
_NUM = r"\b(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|" \
       r"fifteen|twenty|thirty|fifty|hundred|a few|several|couple|single|an?)"
# All patterns run on the lower-cased window.
_UNIT_RE = re.compile(_NUM + r"[\s-]*(?:or so\s+|to\s+\d+\s+|-\s*\d+\s+)?"
                      r"(words?|sentences?|paragraphs?|pages?|lines?|bullet points?|bullets?|points?|ideas?|"
                      r"examples?|tips?|ways?|reasons?|questions?|names?|steps?|items?|options?|suggestions?|"
                      r"titles?|facts?|things?|strategies|methods?|jokes?|headlines?|taglines?|slogans?|"
                      r"tweets?|lessons?|chapters?|sections?|slides?|scenes?|verses?|stanzas?|characters?)\b")
_LIST_RE = re.compile(r"\b(?:list|give me|provide|suggest|generate|write|create|name)\s+(?:me\s+)?(?:the\s+)?(?:top\s+)?"
                      + _NUM + r"\b")
_AT_LEAST = re.compile(r"\b(?:at least|minimum(?: of)?|no less than|more than|over)\s+\d")
_AT_MOST = re.compile(r"\b(?:at most|maximum(?: of)?|no more than|less than|fewer than|under|within|up to|"
                      r"not exceed(?:ing)?)\s+\d")
_ONE_UNIT = re.compile(r"\b(?:one|a single|1)[\s-]+(?:word|sentence|line|number|letter|paragraph)\b|\byes or no\b|"
                       r"\btrue or false\b|\bjust (?:the|a|one) (?:answer|number|word|name|letter)\b|"
                       r"\bonly (?:the|a|one) (?:answer|number|word|name|letter|code)\b|\bone[\s-]liner\b|"
                       r"\b(?:reply|respond|answer) (?:with|only with) (?:only )?(?:a|one|the)\b")
_FULL = re.compile(r"\b(?:full|complete|entire|whole)\s+(?:code|script|program|implementation|essay|article|"
                   r"story|report|document|source|app|application|guide|list|version|text)\b|\bstep[\s-]by[\s-]step\b|"
                   r"\bin (?:great |full )?detail\b|\bin depth\b|\bdetailed\b|\bcomprehensive\b")
_MATERIAL = re.compile(r"\b(?:the following|following text|above|below|this text|this article|this passage|"
                       r"the text|this code|the code below|this paragraph|this email|this essay)\b")
_TOKENS_PER = {"word": 1.35, "sentence": 25.0, "paragraph": 110.0, "page": 650.0, "line": 12.0, "item": 30.0,
               "chapter": 1500.0, "section": 250.0, "slide": 60.0, "scene": 300.0, "verse": 40.0, "stanza": 40.0,
               "character": 0.3}


def _num(s: str) -> float:
    s = s.lower()
    if s in _NUMWORDS:
        return float(_NUMWORDS[s])
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


def _unit(u: str) -> str:
    u = u.lower().rstrip("s")
    if u.startswith("bullet"):
        return "item"
    if u in ("word", "sentence", "paragraph", "page", "line", "chapter", "section", "slide", "scene", "verse",
             "stanza", "character"):
        return u
    return "item"


def length_targets(w: str) -> dict[str, float]:
    """Parsed length targets of a **lower-cased** text window (see the module docstring): requested
    counts per unit (max over mentions, capped at 100,000) and an answer-token estimate (0 when none)."""
    req = {"word": 0.0, "sentence": 0.0, "paragraph": 0.0, "item": 0.0, "line": 0.0}
    est = 0.0
    for m in _UNIT_RE.finditer(w):
        n = min(_num(m.group(1)), 100_000.0)
        u = _unit(m.group(2))
        if u == "page":
            req["word"] = max(req["word"], 500.0 * n)
        elif u in req:
            req[u] = max(req[u], n)
        est = max(est, n * _TOKENS_PER.get(u, 30.0))
    for m in _LIST_RE.finditer(w):
        n = _num(m.group(1))
        if n >= 2:
            req["item"] = max(req["item"], min(n, 1000.0))
            est = max(est, n * 30.0)
    return {**req, "tokens": est}


def _log1p(x: float) -> float:
    return math.log1p(x) if x > 0 else 0.0


def fill_text_v3(text: str, out: np.ndarray) -> None:
    """Write the v3 features of ``text`` into the zeroed float32 row ``out`` [N_FEATURES_V3]."""
    fill_text_v2(text, out[:N_FEATURES_V2])
    w = window(text).lower()
    t = length_targets(w)
    o = N_FEATURES_V2
    out[o + 0] = _log1p(t["word"])
    out[o + 1] = _log1p(t["sentence"])
    out[o + 2] = _log1p(t["paragraph"])
    out[o + 3] = _log1p(t["item"])
    out[o + 4] = _log1p(t["line"])
    out[o + 5] = _log1p(t["tokens"])
    out[o + 6] = 1.0 if _AT_LEAST.search(w) else 0.0
    out[o + 7] = 1.0 if _AT_MOST.search(w) else 0.0
    out[o + 8] = len(_ONE_UNIT.findall(w))
    out[o + 9] = len(_FULL.findall(w))
    body = w.strip()
    n = len(body) or 1
    nl1 = body.find("\n")
    first = body if nl1 < 0 else body[:nl1]
    nl2 = body.rfind("\n")
    last = body if nl2 < 0 else body[nl2 + 1:]
    i = o + len(_TARGETS)
    out[i + 0] = _log1p(len(first))
    out[i + 1] = _log1p(len(last))
    out[i + 2] = 1.0 if first.rstrip().endswith(":") else 0.0
    pars = body.split("\n\n")
    out[i + 3] = max(len(p) for p in pars) / n
    out[i + 4] = len(_MATERIAL.findall(w))
    out[i + 5] = 1.0 if len(pars) > 1 and len(pars[-1]) < 0.2 * n else 0.0


def _extract_one(text: str, width: int, fill) -> np.ndarray:
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    out = np.zeros(width, dtype=np.float32)
    fill(text, out)
    return out


def extract_v3(text: str) -> np.ndarray:
    """The v3 features of one prompt: float32 [N_FEATURES_V3].

    Raises:
        TypeError: if ``text`` is not a str.
    """
    return _extract_one(text, N_FEATURES_V3, fill_text_v3)


def extract_v3_many(texts) -> np.ndarray:
    """:func:`extract_v3` for a sequence of texts: float32 [N, N_FEATURES_V3].

    Raises:
        TypeError: if an item is not a str.
    """
    texts = list(texts)
    out = np.zeros((len(texts), N_FEATURES_V3), dtype=np.float32)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, got {type(t).__name__}")
        fill_text_v3(t, out[i])
    return out


# ---- layout "v2l": v2 plus the lexicon column only (no regex groups: the cheaper variant) ----
FEATURE_NAMES_V2L: tuple[str, ...] = FEATURE_NAMES_V2 + ("lexicon",)
N_FEATURES_V2L = len(FEATURE_NAMES_V2L)
GROUPS_V2L: dict[str, list[int]] = {**GROUPS_V2, "lexicon": [N_FEATURES_V2L - 1]}


def fill_text_v2l(text: str, out: np.ndarray) -> None:
    """Write the v2l features of ``text`` into the zeroed float32 row ``out`` [N_FEATURES_V2L]
    (the v2 features; the last column, the lexicon score, is left to the predictor)."""
    fill_text_v2(text, out[:N_FEATURES_V2])


def extract_v2l(text: str) -> np.ndarray:
    """The v2l features of one prompt: float32 [N_FEATURES_V2L] (lexicon column 0).

    Raises:
        TypeError: if ``text`` is not a str.
    """
    return _extract_one(text, N_FEATURES_V2L, fill_text_v2l)


def extract_v2l_many(texts) -> np.ndarray:
    """:func:`extract_v2l` for a sequence of texts: float32 [N, N_FEATURES_V2L].

    Raises:
        TypeError: if an item is not a str.
    """
    from sjf_core.predict._features_v2 import extract_v2_many

    x = extract_v2_many(texts)
    return np.hstack([x, np.zeros((len(x), 1), dtype=np.float32)])
