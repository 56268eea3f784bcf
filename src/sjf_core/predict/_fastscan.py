"""Bridge to the optional C accelerator :mod:`sjf_core.predict._scan` of the feature extractors.

The Python extractors (:mod:`sjf_core.predict._features`, :mod:`sjf_core.predict._features_v2`) are the
reference. When the extension is built (``setup.py`` compiles ``src/sjf_core/predict/_scan.c``;
a platform without a C compiler just skips it), :func:`fill` computes the same float32
features about ten times faster; ``tests/unit/test_features_fast.py`` checks they are equal.
The word lists and sizes (:mod:`sjf_core.predict._wordlists`, which the Python extractors use
too) are passed to the extension here, so the two implementations share one definition; this
module imports neither extractor (they call it). Set ``SJF_NO_C_SCAN=1`` to force Python.
"""

from __future__ import annotations

from sjf_core.predict import _wordlists as wl
from sjf_core.settings import native_scan_disabled

__all__ = ["available", "fill"]

_C_CODE, _C_CPLAIN, _C_CNUM, _C_VERB, _C_LINER = 1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4
_C_LONG, _C_SHORT = 1 << 8, 1 << 9
_C_TRANS, _C_CONT, _C_CODET, _C_CREAT, _C_WH, _C_YESNO = 1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 14, 1 << 15

# The column layout the C code writes (it hard-codes these positions).
_V2_DENSE = (
    "log_chars", "window_words", "window_lines", "first_par_chars", "last_par_chars", "paragraphs", "code_share",
    "code_fences", "delimiters", "question_marks", "question_lines",
    "wh_opener", "yesno_opener", "non_ascii_share", "cjk_share", "cyrillic_share", "long_task", "short_cue",
    "transform_task", "continue_cue", "code_task", "creative_task",
)


def _configure():
    if native_scan_disabled():
        return None
    try:
        from sjf_core.predict import _scan
    except ImportError:
        return None
    dense = tuple(n for _, names in wl.V2_DENSE_GROUPS for n in names)
    if dense != _V2_DENSE or 6 + len(wl.VERBS) + len(dense) != 41:
        return None  # the layout changed: the C code no longer matches, use Python
    lex: dict[bytes, list] = {}

    def add(words, bit, rank=None):
        for w in words:
            e = lex.setdefault(w, [0, -1])
            e[0] |= bit
            if rank is not None and e[1] < 0:
                e[1] = rank

    add(wl.CODE_WORDS, _C_CODE)
    add(wl.CONSTRAINT_PLAIN, _C_CPLAIN)
    add(wl.CONSTRAINT_NUM_WORDS, _C_CNUM)
    add((b"liner",), _C_LINER)
    for rank, (_verb, forms) in enumerate(wl.VERB_PRIORITY):
        add(forms, _C_VERB, rank=rank)
    for words, bit in ((wl.LONG_TASK, _C_LONG), (wl.SHORT_CUE, _C_SHORT), (wl.TRANSFORM, _C_TRANS),
                       (wl.CONTINUE, _C_CONT), (wl.CODE_TASK, _C_CODET), (wl.CREATIVE, _C_CREAT),
                       (wl.WH, _C_WH), (wl.YESNO, _C_YESNO)):
        add(words, bit)
    entries = [(w, e[0], e[1]) for w, e in lex.items()]
    verb_cols = [wl.VERB_COL.get(v, wl.OTHER_COL) for v, _ in wl.VERB_PRIORITY]
    seps = [s for group in wl.UNICODE_SEPS.values() for s in group]
    _scan.configure(entries, verb_cols, wl.OTHER_COL, list(wl.FORMAT_SUBSTRINGS), seps, wl.NGRAM_BUCKETS,
                    wl.NGRAM_HEAD_WORDS, wl.NGRAM_TAIL_WORDS)
    return _scan


_scan_mod = _configure()


def available() -> bool:
    """True when the C accelerator is built and configured."""
    return _scan_mod is not None


def fill(text: str, out, layout: int) -> None:
    """Write the v1 (``layout=1``, 19 columns) or v2 (``layout=2``) features of ``text`` into
    the zeroed float32 row ``out``. Only call when :func:`available`."""
    w = wl.window(text)
    _scan_mod.fill(w.encode("utf-8", "surrogatepass"), len(text), len(w), out, layout)
