"""Feature layout "v2": the paper's 19 features plus what they miss (issue 3).

Columns 0–18 are the v1 features (:mod:`sjf_core.predict._features`), so column 0 is still
``prompt_token_len``. Then, by group (see :data:`GROUPS_V2`; the ablation in
``benchmarks/predictor_ablation.py`` keeps only groups that measurably help):

* ``length``: ln(1 + characters), words and lines in the scanned window.
* ``structure``: instruction vs pasted document — characters of the first and last
  paragraph, paragraph count, share of the scanned text inside code fences, fence count,
  quoted/delimited blocks.
* ``questions``: question marks, questions per line, leading wh-word / yes-no opener.
* ``script``: non-ASCII share, CJK share, Cyrillic share.
* ``tasks``: long-task nouns (essay, story, article, full code, ...), short-answer cues
  (yes or no, one word, only the answer, ...), transform tasks (rewrite, translate,
  proofread: answer ≈ input), continuation/role-play cues.
* ``ngrams``: hashed word unigrams and bigrams of the instruction-bearing head and tail
  (:data:`NGRAM_BUCKETS` binary buckets, CRC-32 hashing, stable across processes).

Dropped after the ablation (no measurable gain, ``benchmarks/predictor_ablation.py``):
explicit numeric length targets ("a 2000-word essay", "list 10 ideas", "in 3 sentences")
parsed to an answer-token estimate: −0.01 pp macro when removed (3 seeds); prompts with such
targets are rare, and the n-grams already see "word essay", "paragraphs", ...

Bounded cost: every group except the lengths reads only :func:`sjf_core.predict._features.window`
(head + tail), and n-grams read only :data:`NGRAM_HEAD_WORDS` + :data:`NGRAM_TAIL_WORDS` words.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from sjf_core.predict import _features as _f1
from sjf_core.predict._features import FEATURE_NAMES, Scan, fill_v1
from sjf_core.predict._wordlists import (CODE_TASK, CONTINUE, CREATIVE, LONG_TASK, NGRAM_BUCKETS, NGRAM_HEAD_WORDS,
                                         NGRAM_TAIL_WORDS, SHORT_CUE, TRANSFORM, V2_DENSE_GROUPS, WH, YESNO)

__all__ = ["FEATURE_NAMES_V2", "GROUPS_V2", "NGRAM_BUCKETS", "extract_v2", "extract_v2_many", "extract_v2_py", "fill_text_v2", "fill_v2"]

FEATURE_NAMES_V2: tuple[str, ...] = (
    FEATURE_NAMES
    + tuple(n for _, names in V2_DENSE_GROUPS for n in names)
    + tuple(f"ngram_{i:03d}" for i in range(NGRAM_BUCKETS))
)

#: Feature group -> column indices in :data:`FEATURE_NAMES_V2` (v1 groups as in paper Table 5).
GROUPS_V2: dict[str, list[int]] = {
    "v1:prompt_token_len": [0],
    "v1:has_code_keyword": [1],
    "v1:has_length_constraint": [2],
    "v1:ends_with_question": [3],
    "v1:has_format_keyword": [4],
    "v1:clause_count": [5],
    "v1:instruction_verb": list(range(6, 19)),
}
_col = 19
for _g, _names in V2_DENSE_GROUPS:
    GROUPS_V2[_g] = list(range(_col, _col + len(_names)))
    _col += len(_names)
GROUPS_V2["ngrams"] = list(range(_col, _col + NGRAM_BUCKETS))
_NGRAM0 = _col
N_FEATURES_V2 = len(FEATURE_NAMES_V2)
_IDX = {n: i for i, n in enumerate(FEATURE_NAMES_V2)}

# UTF-8 lead bytes: CJK / kana / Hangul (U+3000–U+DFFF: 0xE3–0xED), Cyrillic (U+0400–U+04FF: 0xD0–0xD3)
_KEEP_CJK = bytes(c for c in range(256) if not 0xE3 <= c <= 0xED)
_KEEP_CYR = bytes(c for c in range(256) if not 0xD0 <= c <= 0xD3)


_MIX1 = np.uint64(0x9E3779B1)
_MIX2 = np.uint64(0x85EBCA6B)
_MASK32 = np.uint64(0xFFFFFFFF)
_NB = np.uint64(NGRAM_BUCKETS)


def _log1p(x: float) -> float:
    return math.log1p(x) if x > 0 else 0.0


def fill_v2(scan: Scan, out: np.ndarray) -> None:
    """Write the v2 features of ``scan`` into ``out`` (zeros expected)."""
    fill_v1(scan, out)
    low, toks, words = scan.low, scan.toks, scan.words
    nb = len(low) or 1
    # length
    out[19] = _log1p(scan.n_chars)
    out[20] = len(toks)
    out[21] = low.count(b"\n") + 1
    # structure: instruction vs pasted material
    body = low.strip()
    first = body.find(b"\n\n")
    last = body.rfind(b"\n\n")
    out[22] = _log1p(first if first >= 0 else len(body))
    out[23] = _log1p(len(body) - last - 2 if last >= 0 else len(body))
    out[24] = body.count(b"\n\n")
    fences = low.count(b"```")
    out[26] = fences
    if fences >= 2:
        parts = low.split(b"```")
        out[25] = sum(len(parts[i]) for i in range(1, len(parts), 2)) / nb
    out[27] = low.count(b'"""') + low.count(b"\n>") + low.count(b":\n")
    # questions
    out[28] = low.count(b"?")
    out[29] = low.count(b"?\n") + (1 if low.rstrip().endswith(b"?") else 0)
    if toks:
        out[30] = 1.0 if toks[0] in WH else 0.0
        out[31] = 1.0 if toks[0] in YESNO else 0.0
    # script
    n_chars_w = len(scan.w) or 1
    out[32] = (len(low) - len(scan.w)) / n_chars_w
    if out[32] > 0:
        out[33] = len(low.translate(None, _KEEP_CJK)) / n_chars_w
        out[34] = len(low.translate(None, _KEEP_CYR)) / n_chars_w
    # tasks
    out[35] = len(words & LONG_TASK)
    out[36] = len(words & SHORT_CUE) + (2.0 if b"yes or no" in low or b"one word" in low else 0.0)
    out[37] = len(words & TRANSFORM)
    out[38] = len(words & CONTINUE)
    out[39] = len(words & CODE_TASK)
    out[40] = len(words & CREATIVE)
    # hashed word unigrams + bigrams of the head and tail
    if not toks:
        return
    if len(toks) > NGRAM_HEAD_WORDS + NGRAM_TAIL_WORDS:
        sel = toks[:NGRAM_HEAD_WORDS] + toks[-NGRAM_TAIL_WORDS:]
    else:
        sel = toks
    h = np.fromiter(map(zlib.crc32, sel), dtype=np.uint64, count=len(sel))
    out[_NGRAM0 + (h % NGRAM_BUCKETS).astype(np.intp)] = 1.0
    if len(h) > 1:  # bigram: a multiplicative mix of the two word hashes, top bits
        x = (h[:-1] * _MIX1 + h[1:]) & _MASK32
        x = ((x * _MIX2) & _MASK32) >> np.uint64(12)
        out[_NGRAM0 + (x % _NB).astype(np.intp)] = 1.0


def extract_v2(text: str) -> np.ndarray:
    """The v2 features of one prompt: float32 [len(FEATURE_NAMES_V2)] (C accelerator when built).

    Raises:
        TypeError: if ``text`` is not a str.
    """
    return _f1.extract_text(text, N_FEATURES_V2, 2, fill_v2)


def fill_text_v2(text: str, out: np.ndarray) -> None:
    """Write the v2 features of ``text`` into the zeroed float32 row ``out`` (no allocation)."""
    _f1.fill_text(text, out, 2, fill_v2)


def extract_v2_py(text: str) -> np.ndarray:
    """:func:`extract_v2` in pure Python (the reference implementation)."""
    out = np.zeros(N_FEATURES_V2, dtype=np.float32)
    fill_v2(Scan(text), out)
    return out


def extract_v2_many(texts) -> np.ndarray:
    """:func:`extract_v2` for a sequence of texts: float32 [N, len(FEATURE_NAMES_V2)]."""
    return _f1.extract_texts(texts, N_FEATURES_V2, 2, fill_v2)
