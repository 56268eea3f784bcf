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
import re
import zlib

import numpy as np

from .features import FEATURE_NAMES, _fill_v1, window

__all__ = ["FEATURE_NAMES_V2", "GROUPS_V2", "NGRAM_BUCKETS", "extract_v2", "extract_v2_many"]

NGRAM_BUCKETS = 1024
NGRAM_HEAD_WORDS = 64
NGRAM_TAIL_WORDS = 32

_DENSE_GROUPS: list[tuple[str, tuple[str, ...]]] = [
    ("length", ("log_chars", "window_words", "window_lines")),
    ("structure", ("first_par_chars", "last_par_chars", "paragraphs", "code_share", "code_fences", "quoted_blocks")),
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
_UNIT_TOKENS = {
    "word": 1.3, "words": 1.3, "sentence": 25.0, "sentences": 25.0, "line": 12.0, "lines": 12.0,
    "paragraph": 110.0, "paragraphs": 110.0, "page": 600.0, "pages": 600.0, "chapter": 1500.0, "chapters": 1500.0,
    "item": 25.0, "items": 25.0, "point": 25.0, "points": 25.0, "bullet": 20.0, "bullets": 20.0,
    "example": 60.0, "examples": 60.0, "idea": 40.0, "ideas": 40.0, "tip": 40.0, "tips": 40.0,
    "step": 40.0, "steps": 40.0, "question": 30.0, "questions": 30.0, "reason": 40.0, "reasons": 40.0,
    "name": 5.0, "names": 5.0, "title": 12.0, "titles": 12.0, "slide": 80.0, "slides": 80.0,
    "scene": 300.0, "scenes": 300.0, "day": 120.0, "days": 120.0, "week": 200.0, "weeks": 200.0,
    "tweet": 50.0, "tweets": 50.0, "post": 200.0, "posts": 200.0, "verse": 60.0, "verses": 60.0,
    "stanza": 50.0, "stanzas": 50.0, "character": 0.3, "characters": 0.3, "option": 20.0, "options": 20.0,
    "way": 40.0, "ways": 40.0, "fact": 30.0, "facts": 30.0, "word-": 1.3,
}
_NUM_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
              "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "fifty": 50,
              "hundred": 100, "a hundred": 100, "a few": 3, "several": 5}
_TARGET_RE = re.compile(
    r"\b(\d{1,3}(?:,\d{3})+|\d{1,6}|" + "|".join(sorted(_NUM_WORDS, key=len, reverse=True)) + r")"
    r"(?:\s*(?:-|to)\s*\d{1,6})?[\s-]{0,2}(?:[a-z]+[\s-]){0,2}?"
    r"(" + "|".join(sorted((u for u in _UNIT_TOKENS if not u.endswith("-")), key=len, reverse=True)) + r")\b"
)
_LIST_N_RE = re.compile(r"\b(?:list|give|name|suggest|provide|generate|write|create)\s+(?:me\s+)?(\d{1,4})\b")

# ---- lexical cue sets (whole words in the scanned window) -------------------------------
_LONG_TASK = frozenset(
    "essay essays story stories article articles blog report tutorial guide chapter chapters novel screenplay script "
    "lyrics proposal curriculum syllabus itinerary outline plan lesson course whitepaper thesis paper documentation "
    "readme narrative biography speech presentation cover resume newsletter ebook book detailed comprehensive "
    "elaborate thorough extensive depth complete entire full long longer lengthy".split())
_SHORT_CUE = frozenset(
    "yes no one-word briefly brief short shortly concise concisely succinct tl;dr tldr only just single true false "
    "rate score classify choose pick select which correct answer number".split())
_TRANSFORM = frozenset(
    "rewrite rephrase paraphrase proofread translate translation correct grammar improve polish edit revise "
    "reword shorten simplify convert format reformat fix".split())
_CONTINUE = frozenset("continue roleplay role-play pretend act game simulate simulation dialogue conversation".split())
_CODE_TASK = frozenset(
    "code function class script program implement implementation app application website api backend frontend "
    "python javascript typescript java c++ rust golang sql html css react django flask node component module "
    "algorithm bug debug error exception compile refactor unit tests".split())
_CREATIVE = frozenset("poem poems song sonnet haiku rap joke jokes limerick slogan tagline story stories tale fiction".split())
_WH = frozenset("what who when where which why how whom whose".split())
_YESNO = frozenset("is are was were do does did can could should would will has have am".split())

_WORD_RE = re.compile(r"[a-z0-9][a-z0-9+#'\-]*")
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_CYR_RE = re.compile(r"[\u0400-\u04ff]")
_QUOTED_RE = re.compile(r'"""|\'\'\'|<[a-z_]+>|\[[A-Z ]+\]|^>', re.M)


def _log1p(x: float) -> float:
    return math.log1p(x) if x > 0 else 0.0


def _targets(low: str) -> tuple[float, float]:
    """(largest answer-token estimate, largest count) from numeric length targets, or zeros."""
    best_tokens = 0.0
    best_count = 0.0
    for m in _TARGET_RE.finditer(low):
        raw, unit = m.group(1), m.group(2)
        n = _NUM_WORDS.get(raw)
        if n is None:
            try:
                n = int(raw.replace(",", ""))
            except ValueError:
                continue
        if n <= 0 or n > 200_000:
            continue
        est = n * _UNIT_TOKENS.get(unit, 0.0)
        if est > best_tokens:
            best_tokens = est
        if unit not in ("word", "words", "character", "characters") and n > best_count:
            best_count = float(n)
    for m in _LIST_N_RE.finditer(low):
        n = float(m.group(1))
        if n > best_count:
            best_count = n
    return best_tokens, best_count


def _fill_v2(text: str, out: np.ndarray) -> None:
    _fill_v1(text, out[:19])
    w = window(text)
    low = w.lower()
    n = len(text)
    nw = len(w) or 1
    words = _WORD_RE.findall(low)
    wordset = set(words)
    # length
    out[19] = _log1p(n)
    out[20] = len(words)
    out[21] = w.count("\n") + 1
    # structure
    stripped = w.strip()
    first = stripped.find("\n\n")
    last = stripped.rfind("\n\n")
    out[22] = _log1p(first if first >= 0 else len(stripped))
    out[23] = _log1p(len(stripped) - last - 2 if last >= 0 else len(stripped))
    out[24] = stripped.count("\n\n")
    fences = w.count("```")
    out[26] = fences
    if fences >= 2:
        inside = 0
        parts = w.split("```")
        for i in range(1, len(parts), 2):
            inside += len(parts[i])
        out[25] = inside / nw
    out[27] = len(_QUOTED_RE.findall(w[:4096]))
    # numeric targets
    tok, cnt = _targets(low[:4096] + " " + low[-1024:] if len(low) > 5120 else low)
    out[28] = _log1p(tok)
    out[29] = cnt
    out[30] = 1.0 if tok > 0 or cnt > 0 else 0.0
    # questions
    out[31] = w.count("?")
    out[32] = sum(1 for line in w.splitlines() if line.rstrip().endswith("?"))
    first_word = words[0] if words else ""
    out[33] = 1.0 if first_word in _WH else 0.0
    out[34] = 1.0 if first_word in _YESNO else 0.0
    # script
    enc = len(w.encode("utf-8", "surrogatepass"))
    out[35] = (enc - len(w)) / nw
    out[36] = len(_CJK_RE.findall(w)) / nw
    out[37] = len(_CYR_RE.findall(w)) / nw
    # tasks
    out[38] = len(wordset & _LONG_TASK)
    out[39] = len(wordset & _SHORT_CUE) + (2.0 if "yes or no" in low or "one word" in low else 0.0)
    out[40] = len(wordset & _TRANSFORM)
    out[41] = len(wordset & _CONTINUE)
    out[42] = len(wordset & _CODE_TASK)
    out[43] = len(wordset & _CREATIVE)
    # hashed n-grams of the instruction-bearing head and tail
    if len(words) > NGRAM_HEAD_WORDS + NGRAM_TAIL_WORDS:
        sel = words[:NGRAM_HEAD_WORDS] + ["|"] + words[-NGRAM_TAIL_WORDS:]
    else:
        sel = words
    prev = "^"
    for tok_ in sel:
        out[_NGRAM0 + zlib.crc32(tok_.encode()) % NGRAM_BUCKETS] = 1.0
        out[_NGRAM0 + zlib.crc32((prev + " " + tok_).encode()) % NGRAM_BUCKETS] = 1.0
        prev = tok_


def extract_v2(text: str) -> np.ndarray:
    """The v2 features of one prompt: float32 [len(FEATURE_NAMES_V2)].

    Raises:
        TypeError: if ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    out = np.zeros(N_FEATURES_V2, dtype=np.float32)
    _fill_v2(text, out)
    return out


def extract_v2_many(texts) -> np.ndarray:
    """:func:`extract_v2` for a sequence of texts: float32 [N, len(FEATURE_NAMES_V2)]."""
    texts = list(texts)
    out = np.zeros((len(texts), N_FEATURES_V2), dtype=np.float32)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, got {type(t).__name__}")
        _fill_v2(t, out[i])
    return out
