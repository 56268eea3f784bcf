"""The word lists and the text window of the lexical features, shared by the Python
extractors (:mod:`._features` v1, :mod:`._features_v2` v2) and the C accelerator's bridge
(:mod:`._fastscan`, which passes them to the extension), so the two implementations share one
definition and neither extractor module imports the bridge's configuration.

Plain data (and :func:`window`): what each list means is documented with the features
(:mod:`._features`, :mod:`._features_v2`).
"""

from __future__ import annotations

# ---- v1 (paper §3.2) -----------------------------------------------------------------------
VERBS = ("what", "write", "explain", "summarize", "how", "list", "implement", "compare",
         "describe", "generate", "why", "define", "other")

#: Characters scanned at the start / end of a long prompt (bounded cost).
HEAD_CHARS = 3072
TAIL_CHARS = 1024

CODE_WORDS = frozenset((
    "code function def class script program implement algorithm debug refactor import variable "
    "loop recursion api sql regex react angular vue nextjs typescript javascript html css node "
    "express django flask component endpoint middleware query"
).encode().split())

# Verb words in priority order (first present wins) and the one-hot column each maps to.
VERB_PRIORITY = (
    ("summarize", (b"summarize", b"summarizing")),
    ("explain", (b"explain",)),
    ("compare", (b"compare", b"comparing")),
    ("translate", (b"translate", b"translating")),
    ("generate", (b"generate", b"generating")),
    ("implement", (b"implement",)),
    ("debug", (b"debug",)),
    ("refactor", (b"refactor",)),
    ("list", (b"list",)),
    ("write", (b"write",)),
    ("describe", (b"describe", b"describing")),
    ("define", (b"define", b"defining")),
    ("what", (b"what",)),
    ("how", (b"how",)),
    ("why", (b"why",)),
)
VERB_COL = {v: 6 + i for i, v in enumerate(VERBS)}
OTHER_COL = VERB_COL["other"]
CONSTRAINT_PLAIN = frozenset((b"briefly", b"concisely", b"shortly", b"tldr"))
CONSTRAINT_NUM_WORDS = frozenset((b"word", b"words", b"sentence", b"sentences", b"than"))
FORMAT_SUBSTRINGS = (b"list", b"table", b"bullet", b"step by step", b"enumerate", b"outline", b"numbered",
                      b"format", b"structure")

#: Non-ASCII punctuation that separates words like ASCII punctuation does (checked only
#: when the window is not pure ASCII).
UNICODE_SEPS: dict[bytes, tuple[bytes, ...]] = {}
for _c in ("\u2019\u2018\u201c\u201d\u2014\u2013\u2026\u00ab\u00bb\u00a0\u3001\u3002\uff0c\uff1a\uff1b\uff1f"
           "\uff01\uff08\uff09\u300c\u300d\u2022\u00b7"):
    _e = _c.encode()
    UNICODE_SEPS[_e[:1]] = UNICODE_SEPS.get(_e[:1], ()) + (_e,)


def window(text: str, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> str:
    """The scanned part of ``text``: all of it, or its first ``head`` and last ``tail``
    characters joined by a newline when it is longer than ``head + tail``."""
    if len(text) <= head + tail:
        return text
    return text[:head] + "\n" + text[-tail:]


# ---- v2 ------------------------------------------------------------------------------------
NGRAM_BUCKETS = 1024
NGRAM_HEAD_WORDS = 64
NGRAM_TAIL_WORDS = 32

V2_DENSE_GROUPS: list[tuple[str, tuple[str, ...]]] = [
    ("length", ("log_chars", "window_words", "window_lines")),
    ("structure", ("first_par_chars", "last_par_chars", "paragraphs", "code_share", "code_fences", "delimiters")),
    ("questions", ("question_marks", "question_lines", "wh_opener", "yesno_opener")),
    ("script", ("non_ascii_share", "cjk_share", "cyrillic_share")),
    ("tasks", ("long_task", "short_cue", "transform_task", "continue_cue", "code_task", "creative_task")),
]


# lexical cue sets (whole words in the scanned window)
def _bset(words: str) -> frozenset:
    return frozenset(words.encode().split())


LONG_TASK = _bset(
    "essay essays story stories article articles blog report tutorial guide chapter chapters novel screenplay script "
    "lyrics proposal curriculum syllabus itinerary outline plan lesson course whitepaper thesis paper documentation "
    "readme narrative biography speech presentation cover resume newsletter ebook book detailed comprehensive "
    "elaborate thorough extensive depth complete entire full long longer lengthy")
SHORT_CUE = _bset(
    "yes no briefly brief short shortly concise concisely succinct tldr only just single true false "
    "rate score classify choose pick select which correct answer number")
TRANSFORM = _bset(
    "rewrite rephrase paraphrase proofread translate translation correct grammar improve polish edit revise "
    "reword shorten simplify convert format reformat fix")
CONTINUE = _bset("continue roleplay role pretend act game simulate simulation dialogue conversation")
CODE_TASK = _bset(
    "code function class script program implement implementation app application website api backend frontend "
    "python javascript typescript java rust golang sql html css react django flask node component module "
    "algorithm bug debug error exception compile refactor unit tests")
CREATIVE = _bset("poem poems song sonnet haiku rap joke jokes limerick slogan tagline story stories tale fiction")
WH = _bset("what who when where which why how whom whose")
YESNO = _bset("is are was were do does did can could should would will has have am")
