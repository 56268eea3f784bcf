"""The stated-size reader: the answer size a prompt asks for, in answer tokens (issue 23).

Contract: :func:`read_size` (str) -> :class:`StatedSize` or None; never raises for a str, keeps
no text (the label holds numbers and unit names only), reads a bounded part of the prompt.

* **What it reads.** Counts of words, sentences, paragraphs, lines, pages, characters, tokens and
  list items ("at most 6 words", "3-5 sentences", "under 50 words", "at least 1,200 words",
  "a 500-word essay", "in one sentence", "list 50 names", "300字以内";
  :mod:`sjf_core.predict._stated_count`); closed answer forms ("answer with yes or no", "only the
  name", "a single number", "one word"); verbosity cues ("briefly", "in detail"). English,
  German, French, Spanish, Russian and Chinese (:mod:`sjf_core.predict._stated_words`).
* **Where.** Instructions, not pasted material: the appended system/developer instructions of a
  :class:`~sjf_core.predict._text.ScoredText` first; in the user text, fenced, quoted and tagged
  blocks are dropped (:func:`~sjf_core.predict._text.strip_blocks`); a short one-paragraph message
  is read whole, any other at its first paragraph (cut at an introducing colon: "Summarise in one sentence: <text>") and its
  last paragraph; when one of them points at the material ("below", "the text above") the
  other one is material and is not read. A size that describes material ("the text below has
  3000 words", "my 2000-word essay") or applies to each part ("200 words each", unless the
  parts are counted too) is not the answer's size.
* **Result.** ``kind`` "count" (tokens = count × tokens per unit × qualifier: at most 0.8,
  at least 1.15, range midpoint), "closed" (a few tokens) or "vague" (``direction`` −1 / +1:
  the caller shifts its own estimate). Explicit sizes (counts, closed forms) beat cues; in one zone
  a count beats a closed form, and among several counts the largest wins; in the user text the
  last paragraph's size before the first's. Instructions and user text: when both are explicit,
  the instructions' size stands if they name the user's message as material ("the user's text")
  or the user's zones ask for nothing (no request verb); else the larger wins, so that no system
  prompt makes a request look shorter than the size it asks for (docs/predictor.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sjf_core.predict import _stated_words as W
from sjf_core.predict._features import _SEP_TABLE
from sjf_core.predict._stated_count import NUMBER_KEYS, UNIT_KEYS, best_count, counts, list_counts, zh_counts
from sjf_core.predict._text import strip_blocks

__all__ = ["StatedSize", "read_size"]

_INSTR_MAX = 1200  # characters of appended instructions read
_WHOLE = 700       # a user text up to this long is read whole
_HEAD = 400        # else: its first paragraph (at most this many characters) ...
_TAIL = 400        # ... and its last paragraph (at most this many)
_SCAN = 6000       # a longer text is cut to its first and last 3,000 characters first


@dataclass(frozen=True)
class StatedSize:
    """A stated answer size.

    Attributes:
        tokens: expected answer tokens it implies (float > 0; for "vague" 0).
        kind: "count", "closed" or "vague".
        label: what was read, e.g. "≤ 6 words", "3–5 sentences", "yes/no", "brief" (no prompt text).
        direction: for "vague": −1 (shorter) or +1 (longer); else 0.
    """

    tokens: float
    kind: str
    label: str
    direction: int = 0




def _forms(table) -> list[tuple]:
    """(compiled expression, label, value, trigger words as UTF-8, CJK triggers) per entry of ``table``."""
    out = []
    for rx, label, value, triggers in table:
        t = triggers.split()
        out.append((re.compile(rx), label, value, frozenset(w.encode() for w in t if w.isascii() or not
                                                            any("\u4e00" <= ch <= "\u9fff" for ch in w)),
                    tuple(w for w in t if any("\u4e00" <= ch <= "\u9fff" for ch in w))))
    return out


_CLOSED = _forms(W.CLOSED_FORMS)
_VAGUE = _forms(W.VAGUE_CUES)
_DIRECTIVE = re.compile(W.DIRECTIVE)
_QUESTION_END = re.compile(r"^\s*[?？:：]")
_FORWARD = frozenset(w.encode() for w in W.FORWARD_WORDS)
_BACK = frozenset(w.encode() for w in W.BACK_WORDS)
_NOUNS = frozenset(w.encode() for w in W.MATERIAL_NOUNS)
_ZH_UNIT_CHARS = frozenset("字词句段行页条个")
_HAS_DIGIT = re.compile(r"[0-9]").search
_LIST_KEYS = frozenset(w.encode() for w in "list give suggest brainstorm nenne liste listez énumère enumera "
                       "перечисли".split())
_CUE_KEYS = frozenset().union(*(f[3] for f in _CLOSED + _VAGUE))
_CJK_CUES = tuple(t for f in _CLOSED + _VAGUE for t in f[4])
_UNIT_SET = frozenset(UNIT_KEYS)
_INSTR_MATERIAL = frozenset(w.encode() for w in W.INSTRUCTION_MATERIAL)
_ASK = re.compile(W.ASK_VERBS).search


def _triggered(forms, z: str, words: set, non_ascii: bool):
    for i, (rx, label, value, trig, cjk) in enumerate(forms):
        if not words.isdisjoint(trig) or (non_ascii and any(t in z for t in cjk)):
            yield i, rx, label, value


def _closed(z: str, words: set, non_ascii: bool) -> StatedSize | None:
    """The first closed answer form of ``z`` that is a directive (module docstring)."""
    for i, rx, label, tokens in _triggered(_CLOSED, z, words, non_ascii):
        for m in rx.finditer(z):
            if i in W.UNDIRECTED or _DIRECTIVE.search(z, max(0, m.start() - 40), m.start()) \
                    or _QUESTION_END.match(z[m.end():m.end() + 3]) or m.start() < 3:
                return StatedSize(tokens, "closed", label)
    return None


def _words(z: str) -> set:
    """Word tokens (UTF-8 bytes) of a lower-cased zone."""
    return set(z.encode("utf-8", "surrogatepass").translate(_SEP_TABLE).split())


def _zone_size(z: str, words: set) -> StatedSize | None:
    """The stated size of one lower-cased zone with its ``words`` (count > closed form > cue), or None."""
    found = []
    units = words & _UNIT_SET
    if units and (_HAS_DIGIT(z) or not words.isdisjoint(NUMBER_KEYS)):
        found = counts(z, units)
    if not found and not words.isdisjoint(_LIST_KEYS):
        found = list_counts(z)
    non_ascii = not z.isascii()
    if non_ascii and not _ZH_UNIT_CHARS.isdisjoint(z):
        found += zh_counts(z)
    best = best_count(found)
    if best is not None:
        return StatedSize(best.tokens, "count", best.label)
    if words.isdisjoint(_CUE_KEYS) and not (non_ascii and any(t in z for t in _CJK_CUES)):
        return None
    size = _closed(z, words, non_ascii)
    if size is not None:
        return size
    for _, rx, label, direction in _triggered(_VAGUE, z, words, non_ascii):
        if rx.search(z):
            return StatedSize(0.0, "vague", label, direction)
    return None


def _points_back(z: str, words: set) -> bool:
    if not words.isdisjoint(_BACK):
        return True
    if not words.isdisjoint(_NOUNS) and any(p in z for p in W.BACK_PHRASES):
        return True
    return not z.isascii() and any(p in z for p in W.ZH_BACK)


def _points_forward(z: str, words: set) -> bool:
    return z.rstrip().endswith((":", "：")) or not words.isdisjoint(_FORWARD) or (
        not z.isascii() and any(p in z for p in W.ZH_FORWARD))


def _user_zones(u: str) -> list[tuple[int, str, set]]:
    """(priority, lower-cased zone, its words) of the user text: where its instruction can be
    (module docstring)."""
    if len(u) > _SCAN:
        u = u[:_SCAN // 2] + "\n\n" + u[-_SCAN // 2:]
    u = strip_blocks(u).strip()
    first = u.find("\n\n")
    if first < 0 and len(u) <= _WHOLE:
        z = u.lower()
        return [(1, z, _words(z))] if z else []
    par0 = len(u) if first < 0 else first
    head = u[:min(par0, _HEAD)].lower()
    colon = head.find(":")
    cut = colon >= 15 and par0 - colon > 80  # "Summarise in one sentence: <text>"
    if cut:
        head = head[:colon]
    tail = (u[-250:] if first < 0 else u[u.rfind("\n\n") + 2:][-_TAIL:]).lower()
    hw, tw = _words(head), _words(tail)
    forward = cut or _points_forward(head, hw)
    back = _points_back(tail, tw)
    if back and not forward:
        return [(2, tail, tw)]
    if forward and not back:
        return [(2, head, hw)]
    return [(2, tail, tw), (1, head, hw)]


def _first(zones) -> StatedSize | None:
    """The first explicit size of ``zones`` (in their order), else their first cue, or None."""
    cue = None
    for _, z, words in zones:
        size = _zone_size(z, words)
        if size is None:
            continue
        if size.kind != "vague":
            return size
        cue = cue or size
    return cue


def _names_material(z: str, words: set) -> bool:
    """True when instructions name the user's message as material ("the user's text")."""
    return not words.isdisjoint(_INSTR_MATERIAL) or (not z.isascii() and any(p in z for p in W.ZH_INSTRUCTION_MATERIAL))


def read_size(text: str) -> StatedSize | None:
    """The answer size ``text`` states (module docstring), or None.

    ``text`` may be a :class:`~sjf_core.predict._text.ScoredText`; its appended instructions and
    the user text are read, and their sizes combined (module docstring, "Result").
    """
    ia = getattr(text, "instructions_at", None)
    zones = sorted(_user_zones(text if ia is None else text[:ia]), key=lambda pz: -pz[0])
    if ia is None:
        return _first(zones)
    z = text[ia:ia + _INSTR_MAX].lower()
    words = _words(z)
    instr = _zone_size(z, words)
    if instr is None or instr.kind == "vague":
        user = _first(zones)
        return instr if user is None or (instr is not None and user.kind == "vague") else user
    if _names_material(z, words):
        return instr  # an app's template over material: "Classify the tone of the user's text. One word."
    # explicit instructions: a size the user's message asks for (a zone with a request verb) wins when
    # it is larger, so that no client makes its request look shorter through its system prompt
    # ("Always answer with yes or no." + "Write a 2000-word essay"); other user text is material
    user = _first([zw for zw in zones if _ASK(zw[1])])
    return user if user is not None and user.kind != "vague" and user.tokens > instr.tokens else instr
