"""Count statements of the stated-size reader: "at most 6 words", "3-5 sentences", "a 500-word essay",
"list 10 ideas", "300字以内" -> :class:`Count` (answer tokens and a label). Used by
:mod:`sjf_core.predict._stated`, which chooses the zone of the prompt to read.

Contract: :func:`counts` (lower-cased zone, its unit words) and :func:`zh_counts` (lower-cased zone)
return every count statement that asks for the answer's size; :func:`best_count` picks the
answer's size among them. Never raise for a str.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sjf_core.predict import _stated_words as W

__all__ = ["Count", "counts", "zh_counts", "best_count", "list_counts", "unit_tokens", "UNIT_KEYS", "NUMBER_KEYS"]


def _alt(words) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


_NUMW = _alt(W.NUMBER_WORDS)
_NUM = (r"(?:\d{1,3}(?:[,.'\u00a0\u202f]\d{3})+(?!\d)|\d+(?:[.,]\d+)?(?:\s?k(?![a-z]))?|"
        rf"(?:{_NUMW})(?:(?:[\s-]+|\s+and\s+|\s+und\s+)(?:{_NUMW}))*)")
_JOIN = r"(?:\s*(?:-|–|—|~)\s*|\s+(?:to|or|and|bis|oder|und|à|ou|et|a|o|y|до|или|и)\s+)"
# Anchored at the unit's start (searched with endpos = the unit's position).
_BEFORE_UNIT = re.compile(rf"(?<![\w.,])(?P<n1>{_NUM})(?:{_JOIN}(?P<n2>{_NUM}))?"
                          r"(?P<gap>[\s-]*(?:of\s+)?(?:[^\W\d_]{1,14}[\s-]+){0,2}?)$")
# "at most of", and a preposition between the qualifier and the number: "höchstens in zwei Sätzen"
_QUAL_PREP = rf"(?:(?:{_alt(W.QUALIFIER_PREPOSITIONS)})\s+)?"
_PRE_MAX = re.compile(rf"(?:{_alt(W.PRE_MAX)})\s*{_QUAL_PREP}$")
_PRE_MIN = re.compile(rf"(?:{_alt(W.PRE_MIN)})\s*{_QUAL_PREP}$")
_PRE_ABOUT = re.compile(rf"(?:{_alt(W.PRE_ABOUT)})\s*$")
_POST_MAX = re.compile(rf"^[\s,(]*(?:{_alt(W.POST_MAX)})\b")
_POST_MIN = re.compile(rf"^[\s,(]*(?:{_alt(W.POST_MIN)})\b")
_PER_AFTER = re.compile(W.PER_UNIT_AFTER)
_PER_BEFORE = re.compile(W.PER_UNIT_BEFORE)
_DESCRIPTIVE = re.compile(W.DESCRIPTIVE_BEFORE)
_POSSESSIVE = re.compile(W.POSSESSIVE_BEFORE)
_READ = re.compile(W.READ_BEFORE)
_REQUEST = re.compile(W.REQUEST_MARKERS)
_VERB = re.compile(W.REQUEST_VERBS)
_A_CONTEXT = re.compile(W.REQUEST_VERBS + r"\s+(?:me\s+|us\s+|just\s+|only\s+|mir\s+|moi\s+|me\s+)?$")
_PAGE_NOT_TEXT = re.compile(W.PAGE_NOT_TEXT)
_OUT_OF = re.compile(r"(?:out of|sur|top)[\s-]*$")  # a score ("out of 10 points"), a ranking ("top-5 words")
_CLAUSE_END = re.compile(r"[.!?\n;:。！？；：]")
_SPLIT = re.compile(r"[\s-]+")
_A_ADJ = frozenset("short brief long concise single full few simple catchy well-written detailed".split())
_A_UNITS = frozenset(("word", "sentence", "paragraph", "line"))
_ARTICLES = frozenset("a an ein eine einen einem einer un une una uno".split())
_LIST = re.compile(r"\b(?:list|give me|suggest|brainstorm|nenne|liste|listez|énumère|enumera|перечисли)"
                   r"\s+(?:me\s+|the\s+|die\s+|les\s+)?(?:top\s+)?(?P<n>\d{1,3})\s+[^\W\d_]")
_ZH_NUM = "[0-9" + "".join(W.ZH_DIGITS) + "".join(W.ZH_MULT) + "几]+"
_ZH_COUNT = re.compile(rf"(?P<pre>{_alt(W.ZH_PRE_MAX + W.ZH_PRE_MIN + W.ZH_PRE_ABOUT)})?\s*(?P<n1>{_ZH_NUM})"
                       rf"(?:\s*(?:-|~|到|至)\s*(?P<n2>{_ZH_NUM}))?\s*(?P<unit>{_alt(W.ZH_UNITS)})"
                       rf"(?!路|架|军|时间|距离|路程)(?P<post>{_alt(W.ZH_POST_MAX + W.ZH_POST_MIN + W.ZH_POST_ABOUT)})?")
_SYMBOLS = {"max": "≤ ", "min": "≥ ", "about": "~", "exact": ""}
#: Expected answer / stated bound: under a cap answers run a little short of it, past a floor a little over.
_FACTOR = {"max": 0.8, "min": 1.15, "about": 1.0, "exact": 1.0}
#: The most words a count may ask for; a larger one is no answer size ("a 700 page blog entry").
_MAX_WORDS = 100_000
#: Per unit, the largest count read as an answer size: list items and names up to 100; pages up to
#: the word bound (100,000 words = 200 pages: "a 200-page novel" reads; before issue 29 pages
#: stopped at 50); the other units at 100,000.
_MAX_COUNT = {"item": 100, "name": 100, "page": int(_MAX_WORDS / W.WORDS_PER_UNIT["page"])}

UNIT_KEYS = {w.encode(): v for w, v in W.UNITS.items()}
NUMBER_KEYS = frozenset(w.encode() for w in W.NUMBER_WORDS)


@dataclass
class Count:
    """One count statement: answer ``tokens``, ``label`` (numbers and unit), whether it applies to
    each part (``per_unit``), its ``unit`` and the count ``n`` (after its qualifier)."""

    tokens: float
    label: str
    per_unit: bool
    unit: str
    n: float


def _number(s: str) -> float:
    """Value of a number ("1,200", "2.5k", "twenty-five", "two hundred"); 0 when unreadable."""
    s = s.strip()
    if s[:1].isdigit():
        k = s.endswith("k")
        s = s.rstrip("k").strip()
        if re.fullmatch(r"\d{1,3}(?:[,.'\u00a0\u202f]\d{3})+", s):
            v = float(re.sub(r"\D", "", s))
        else:
            v = float(s.replace(",", "."))
        return v * 1000 if k else v
    toks = [t for t in _SPLIT.split(s) if t in W.NUMBER_WORDS]
    if len(toks) > 1 and toks[0] in _ARTICLES:  # "a one-line", "a hundred"
        toks = toks[1:]
    total, cur = 0.0, 0.0
    for t in toks:
        v = W.NUMBER_WORDS[t]
        if v in (100, 1000):
            cur = max(cur, 1.0) * v
            if v == 1000:
                total, cur = total + cur, 0.0
        else:
            cur += v
    return total + cur


def _zh_number(s: str) -> float:
    if s.isdigit():
        return float(s)
    total, cur = 0, 0
    for ch in s:
        if ch == "几":
            cur = 3
        elif ch in W.ZH_DIGITS:
            cur = W.ZH_DIGITS[ch]
        elif ch in W.ZH_MULT:
            total += max(cur, 1) * W.ZH_MULT[ch]
            cur = 0
        elif ch.isdigit():
            cur = cur * 10 + int(ch)
    return float(total + cur)


def unit_tokens(unit: str, lang: str) -> float:
    """Answer tokens of one ``unit`` in ``lang`` (:mod:`sjf_core.predict._stated_words`)."""
    if unit == "token":
        return 1.0
    if unit == "character":
        return W.TOKENS_PER_CHAR[lang]
    words = W.WORDS_PER_UNIT[unit]
    if lang == "zh":
        return words * W.ZH_CHARS_PER_WORD * W.TOKENS_PER_WORD["zh"]
    return words * W.TOKENS_PER_WORD[lang]


def _qualifier(z: str, start: int, end: int) -> str:
    """"max", "min", "about" or "exact" from the words before ``start`` and after ``end``."""
    lo = max(0, start - 30)
    if _PRE_MAX.search(z, lo, start) or _POST_MAX.match(z[end:end + 20]):
        return "max"
    if _PRE_MIN.search(z, lo, start) or _POST_MIN.match(z[end:end + 20]):
        return "min"
    return "about" if _PRE_ABOUT.search(z, lo, start) else "exact"


def _clause_start(z: str, start: int) -> int:
    lo = max(0, start - 60)
    for m in _CLAUSE_END.finditer(z, lo, start):
        lo = m.end()
    return lo


def _describes_material(z: str, start: int) -> bool:
    """True when the size before ``start`` describes given material, not the answer."""
    lo = _clause_start(z, start)
    if _POSSESSIVE.search(z, max(lo, start - 25), start) or _READ.search(z, max(lo, start - 30), start):
        return True
    return bool(_DESCRIPTIVE.search(z, lo, start)) and not _REQUEST.search(z, lo, start)


def _plausible(z: str, m: re.Match, unit: str, a: float, end: int) -> bool:
    """Unit-specific checks that keep "a word meaning", "two characters", "a landing page", "three
    points" of a triangle and "5-letter words" out."""
    n1, gap = m.group("n1"), m.group("gap")
    extra = [w for w in _SPLIT.split(gap) if w and w != "of"]
    if any(w in W.GAP_EXCLUDE for w in extra):
        return False
    if unit == "character" and (not n1[:1].isdigit() or a < 10 or extra):
        return False
    if unit == "page" and (n1 in _ARTICLES or n1 == "single" or _PAGE_NOT_TEXT.match(z[end:end + 16])
                           or any(_PAGE_NOT_TEXT.match(w) or w in ("landing", "home", "web") for w in extra)):
        return False
    if a > _MAX_COUNT.get(unit, 100_000):
        return False
    if not n1[:1].isdigit():
        if n1 in _ARTICLES and (unit not in _A_UNITS or not _A_CONTEXT.search(z, max(0, m.start() - 30),
                                                                                              m.start())):
            return False
        if any(w not in _A_ADJ and w not in W.NUMBER_WORDS for w in extra):
            return False
    if unit in ("item", "name") and not _VERB.search(z, _clause_start(z, m.start()), m.start()):
        return False
    return True


def _count_at(z: str, i: int, j: int, unit: str, lang: str) -> Count | None:
    """The count whose unit word spans z[i:j], or None (no number before it, or not the answer's)."""
    m = _BEFORE_UNIT.search(z, max(0, i - 70), i)
    if m is None:
        return None
    n1, n2 = m.group("n1"), m.group("n2")
    a = _number(n1)
    b = _number(n2) if n2 else a
    if not (0 < a <= 100_000 and 0 < b <= 100_000) or not _plausible(z, m, unit, max(a, b), j):
        return None
    if _OUT_OF.search(z, max(0, m.start() - 8), m.start()) or _describes_material(z, m.start()):
        return None
    q = "exact" if n2 else _qualifier(z, m.start(), j)
    n = (a + b) / 2 if n2 else a * _FACTOR[q]
    per = bool(_PER_AFTER.match(z[j:j + 20]) or _PER_BEFORE.search(z, max(0, m.start() - 50), m.start()))
    shown = f"{a:g}–{b:g}" if n2 else f"{_SYMBOLS[q]}{a:g}"
    name = "items" if unit in ("name", "item") else unit + ("s" if (b if n2 else a) != 1 else "")
    return Count(max(2.0, n * unit_tokens(unit, lang)), f"{shown} {name}", per, unit, n)


def counts(z: str, units: set) -> list[Count]:
    """Every count statement of the lower-cased zone ``z`` whose unit is one of ``units``
    (UTF-8 unit words found in it, keys of :data:`UNIT_KEYS`)."""
    out = []
    for w in units:
        unit, lang = UNIT_KEYS[w]
        s = w.decode()
        k = z.find(s)
        while k >= 0:
            e = k + len(s)
            if (k == 0 or not z[k - 1].isalnum()) and (e == len(z) or not z[e].isalnum()):
                c = _count_at(z, k, e, unit, lang)
                if c is not None:
                    out.append(c)
            k = z.find(s, e)
    return out


def list_counts(z: str) -> list[Count]:
    """"list 10 countries", "give me 5 ...": items without a unit word."""
    return [Count(float(m.group("n")) * unit_tokens("item", "en"), f"{m.group('n')} items", False, "item",
                  float(m.group("n"))) for m in _LIST.finditer(z) if 2 <= int(m.group("n")) <= _MAX_COUNT["item"]]


def zh_counts(z: str) -> list[Count]:
    """Chinese count statements ("不超过300字", "用一句话", "5个要点")."""
    out = []
    for m in _ZH_COUNT.finditer(z):
        a = _zh_number(m.group("n1"))
        b = _zh_number(m.group("n2")) if m.group("n2") else a
        unit = W.ZH_UNITS[m.group("unit")]
        if not (0 < a <= _MAX_COUNT.get(unit, 100_000)) or _describes_material(z, m.start("n1")):
            continue
        if unit in ("item", "name") and not _VERB.search(z, _clause_start(z, m.start()), m.start()):
            continue  # as in English: items are asked for ("列出5条建议"), else "开通一条线路", "三点" (3 o'clock)
        pre, post = m.group("pre") or "", m.group("post") or ""
        q = ("max" if pre in W.ZH_PRE_MAX or post in W.ZH_POST_MAX else
             "min" if pre in W.ZH_PRE_MIN or post in W.ZH_POST_MIN else
             "about" if pre or post else "exact")
        n = (a + b) / 2 if m.group("n2") else a * _FACTOR[q]
        label = f"{a:g}–{b:g}" if m.group("n2") else f"{_SYMBOLS[q]}{a:g}"
        out.append(Count(max(2.0, n * unit_tokens(unit, "zh")), f"{label} {m.group('unit').lstrip('个')}", False,
                         unit, n))
    return out


def best_count(found: list[Count]) -> Count | None:
    """The answer's size among a zone's counts: the largest total; a per-part size counts only
    times a count of parts ("3 paragraphs of 100 words each")."""
    totals = [c for c in found if not c.per_unit]
    best = max(totals, key=lambda c: c.tokens) if totals else None
    for p in (c for c in found if c.per_unit):
        for c in totals:
            if c.unit != p.unit and c.unit not in ("word", "character", "token"):
                if best is None or c.n * p.tokens > best.tokens:
                    best = Count(c.n * p.tokens, f"{c.label} × {p.label}", False, p.unit, c.n * p.n)
    return best
