"""Feature layout "v2": the paper's 19 features plus what they miss (issue 3).

Columns 0–18 are the v1 features (:mod:`sjf_core.features`), so column 0 is still
``prompt_token_len``. Then, by group (see :data:`GROUPS_V2`; the ablation in
``benchmarks/predictor_ablation.py`` keeps only groups that measurably help):

* ``length``: ln(1 + characters), words and lines in the scanned window.
* ``structure``: instruction vs pasted document — characters of the first and last
  paragraph, paragraph count, share of the scanned text inside code fences, fence count,
  quoted/delimited blocks.
* ``targets``: explicit numeric length targets parsed to an answer-token estimate
  ("a 2000-word essay" ≈ 2,600 tokens, "list 10 ideas", "in 3 sentences", "5 pages").
* ``questions``: question marks, questions per line, leading wh-word / yes-no opener.
* ``script``: non-ASCII share, CJK share, Cyrillic share.
* ``tasks``: long-task nouns (essay, story, article, full code, ...), short-answer cues
  (yes or no, one word, only the answer, ...), transform tasks (rewrite, translate,
  proofread: answer ≈ input), continuation/role-play cues.
* ``ngrams``: hashed word unigrams and bigrams of the instruction-bearing head and tail
  (:data:`NGRAM_BUCKETS` binary buckets, CRC-32 hashing, stable across processes).

Bounded cost: every group except the lengths reads only :func:`sjf_core.features.window`
(head + tail), and n-grams read only :data:`NGRAM_HEAD_WORDS` + :data:`NGRAM_TAIL_WORDS` words.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from . import features as _f1
from .features import FEATURE_NAMES, Scan, fill_v1

__all__ = ["FEATURE_NAMES_V2", "GROUPS_V2", "NGRAM_BUCKETS", "extract_v2", "extract_v2_many", "extract_v2_py", "fill_text_v2", "fill_v2"]

NGRAM_BUCKETS = 1024
NGRAM_HEAD_WORDS = 64
NGRAM_TAIL_WORDS = 32

_DENSE_GROUPS: list[tuple[str, tuple[str, ...]]] = [
    ("length", ("log_chars", "window_words", "window_lines")),
    ("structure", ("first_par_chars", "last_par_chars", "paragraphs", "code_share", "code_fences", "delimiters")),
    ("targets", ("target_tokens", "target_count", "has_target")),
    ("questions", ("question_marks", "question_lines", "wh_opener", "yesno_opener")),
    ("script", ("non_ascii_share", "cjk_share", "cyrillic_share")),
    ("tasks", ("long_task", "short_cue", "transform_task", "continue_cue", "code_task", "creative_task")),
]

FEATURE_NAMES_V2: tuple[str, ...] = (
    FEATURE_NAMES
    + tuple(n for _, names in _DENSE_GROUPS for n in names)
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
for _g, _names in _DENSE_GROUPS:
    GROUPS_V2[_g] = list(range(_col, _col + len(_names)))
    _col += len(_names)
GROUPS_V2["ngrams"] = list(range(_col, _col + NGRAM_BUCKETS))
_NGRAM0 = _col
N_FEATURES_V2 = len(FEATURE_NAMES_V2)
_IDX = {n: i for i, n in enumerate(FEATURE_NAMES_V2)}

# ---- numeric length targets ------------------------------------------------------------
# unit -> answer tokens per unit (rough English figures: 1 word ≈ 1.3 tokens)
_UNIT_TOKENS_STR = {
    "word": 1.3, "words": 1.3, "sentence": 25.0, "sentences": 25.0, "line": 12.0, "lines": 12.0,
    "paragraph": 110.0, "paragraphs": 110.0, "page": 600.0, "pages": 600.0, "chapter": 1500.0, "chapters": 1500.0,
    "item": 25.0, "items": 25.0, "point": 25.0, "points": 25.0, "bullet": 20.0, "bullets": 20.0,
    "example": 60.0, "examples": 60.0, "idea": 40.0, "ideas": 40.0, "tip": 40.0, "tips": 40.0,
    "step": 40.0, "steps": 40.0, "question": 30.0, "questions": 30.0, "reason": 40.0, "reasons": 40.0,
    "name": 5.0, "names": 5.0, "title": 12.0, "titles": 12.0, "slide": 80.0, "slides": 80.0,
    "scene": 300.0, "scenes": 300.0, "day": 120.0, "days": 120.0, "tweet": 50.0, "tweets": 50.0,
    "post": 200.0, "posts": 200.0, "verse": 60.0, "verses": 60.0, "stanza": 50.0, "stanzas": 50.0,
    "option": 20.0, "options": 20.0, "way": 40.0, "ways": 40.0, "fact": 30.0, "facts": 30.0,
    "characters": 0.3, "tokens": 1.0, "minutes": 150.0, "minute": 150.0,
}
_UNIT_TOKENS = {k.encode(): v for k, v in _UNIT_TOKENS_STR.items()}
_NOT_COUNTS = frozenset((b"word", b"words", b"characters", b"tokens", b"minutes", b"minute"))
_NUM_WORDS = {k.encode(): v for k, v in {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "fifty": 50, "hundred": 100,
    "thousand": 1000, "few": 3, "several": 5, "dozen": 12}.items()}
_LIST_VERBS = frozenset(b"list give name suggest provide generate write create make brainstorm".split())
_TARGET_SCAN_HEAD = 160
_TARGET_SCAN_TAIL = 64


def _number(sel: list, j: int) -> int:
    t = sel[j]
    if t.isdigit():
        if len(t) > 6:
            return 0
        n = int(t)
        if len(t) == 3 and j > 0 and sel[j - 1].isdigit() and len(sel[j - 1]) <= 3:  # "2,000" -> 2 000
            n += 1000 * int(sel[j - 1])
        return n
    return _NUM_WORDS.get(t, 0)


def _targets(toks: list, words: set) -> tuple[float, float]:
    """(largest answer-token estimate, largest count) of explicit numeric length targets."""
    if words.isdisjoint(_UNIT_TOKENS) and words.isdisjoint(_LIST_VERBS):
        return 0.0, 0.0
    if len(toks) > _TARGET_SCAN_HEAD + _TARGET_SCAN_TAIL:
        sel = toks[:_TARGET_SCAN_HEAD] + [b"|"] + toks[-_TARGET_SCAN_TAIL:]
    else:
        sel = toks
    best_tokens = best_count = 0.0
    n_sel = len(sel)
    for i, t in enumerate(sel):
        per = _UNIT_TOKENS.get(t)
        if per is not None:
            for j in (i - 1, i - 2, i - 3):
                if j < 0:
                    break
                n = _number(sel, j)
                if n:
                    if n * per > best_tokens:
                        best_tokens = n * per
                    if t not in _NOT_COUNTS and n > best_count:
                        best_count = float(n)
                    break
        elif t in _LIST_VERBS:
            for j in (i + 1, i + 2):
                if j < n_sel and sel[j].isdigit() and len(sel[j]) <= 4:
                    best_count = max(best_count, float(sel[j]))
                    break
    return best_tokens, best_count


# ---- lexical cue sets (whole words in the scanned window) -------------------------------
def _bset(words: str) -> frozenset:
    return frozenset(words.encode().split())


_LONG_TASK = _bset(
    "essay essays story stories article articles blog report tutorial guide chapter chapters novel screenplay script "
    "lyrics proposal curriculum syllabus itinerary outline plan lesson course whitepaper thesis paper documentation "
    "readme narrative biography speech presentation cover resume newsletter ebook book detailed comprehensive "
    "elaborate thorough extensive depth complete entire full long longer lengthy")
_SHORT_CUE = _bset(
    "yes no briefly brief short shortly concise concisely succinct tldr only just single true false "
    "rate score classify choose pick select which correct answer number")
_TRANSFORM = _bset(
    "rewrite rephrase paraphrase proofread translate translation correct grammar improve polish edit revise "
    "reword shorten simplify convert format reformat fix")
_CONTINUE = _bset("continue roleplay role pretend act game simulate simulation dialogue conversation")
_CODE_TASK = _bset(
    "code function class script program implement implementation app application website api backend frontend "
    "python javascript typescript java rust golang sql html css react django flask node component module "
    "algorithm bug debug error exception compile refactor unit tests")
_CREATIVE = _bset("poem poems song sonnet haiku rap joke jokes limerick slogan tagline story stories tale fiction")
_WH = _bset("what who when where which why how whom whose")
_YESNO = _bset("is are was were do does did can could should would will has have am")
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
    # numeric targets
    tok, cnt = _targets(toks, words)
    out[28] = _log1p(tok)
    out[29] = cnt
    out[30] = 1.0 if tok > 0 or cnt > 0 else 0.0
    # questions
    out[31] = low.count(b"?")
    out[32] = low.count(b"?\n") + (1 if low.rstrip().endswith(b"?") else 0)
    if toks:
        out[33] = 1.0 if toks[0] in _WH else 0.0
        out[34] = 1.0 if toks[0] in _YESNO else 0.0
    # script
    n_chars_w = len(scan.w) or 1
    out[35] = (len(low) - len(scan.w)) / n_chars_w
    if out[35] > 0:
        out[36] = len(low.translate(None, _KEEP_CJK)) / n_chars_w
        out[37] = len(low.translate(None, _KEEP_CYR)) / n_chars_w
    # tasks
    out[38] = len(words & _LONG_TASK)
    out[39] = len(words & _SHORT_CUE) + (2.0 if b"yes or no" in low or b"one word" in low else 0.0)
    out[40] = len(words & _TRANSFORM)
    out[41] = len(words & _CONTINUE)
    out[42] = len(words & _CODE_TASK)
    out[43] = len(words & _CREATIVE)
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
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    out = np.zeros(N_FEATURES_V2, dtype=np.float32)
    fast = _f1._FAST if _f1._FAST is not None else _f1._fast()
    if fast:
        fast.fill(text, out, 2)
    else:
        fill_v2(Scan(text), out)
    return out


def fill_text_v2(text: str, out: np.ndarray) -> None:
    """Write the v2 features of ``text`` into the zeroed float32 row ``out`` (no allocation)."""
    fast = _f1._FAST if _f1._FAST is not None else _f1._fast()
    if fast:
        fast.fill(text, out, 2)
    else:
        fill_v2(Scan(text), out)


def extract_v2_py(text: str) -> np.ndarray:
    """:func:`extract_v2` in pure Python (the reference implementation)."""
    out = np.zeros(N_FEATURES_V2, dtype=np.float32)
    fill_v2(Scan(text), out)
    return out


def extract_v2_many(texts) -> np.ndarray:
    """:func:`extract_v2` for a sequence of texts: float32 [N, len(FEATURE_NAMES_V2)]."""
    texts = list(texts)
    out = np.zeros((len(texts), N_FEATURES_V2), dtype=np.float32)
    fast = _f1._FAST if _f1._FAST is not None else _f1._fast()
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, got {type(t).__name__}")
        if fast:
            fast.fill(t, out[i], 2)
        else:
            fill_v2(Scan(t), out[i])
    return out
