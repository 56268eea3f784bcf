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
  the caller shifts its own estimate). Explicit sizes (counts, closed forms) beat cues; among
  them the instructions beat the user text, and a count beats a closed form of the same zone;
  among several counts of one zone the largest wins.
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


_CLOSED = re.compile("|".join(f"(?P<c{i}>{rx})" for i, (rx, _, _) in enumerate(W.CLOSED_FORMS)))
_VAGUE = re.compile("|".join(f"(?P<v{i}>{rx})" for i, (rx, _, _) in enumerate(W.VAGUE_CUES)))
_DIRECTIVE = re.compile(W.DIRECTIVE)
_QUESTION_END = re.compile(r"^\s*[?？:：]")
_FORWARD = re.compile(W.FORWARD_REF)
_BACK = re.compile(W.BACK_REF)
_PARA = re.compile(r"\n[ \t]*\n")
_ZH_UNIT_CHARS = frozenset("字词句段行页条个")
_NON_DIGITS = bytes(c for c in range(256) if not 0x30 <= c <= 0x39)
_LIST_KEYS = frozenset(w.encode() for w in "list give suggest brainstorm nenne liste listez énumère enumera "
                       "перечисли".split())
_CUE_KEYS = frozenset(w.encode() for w in W.CUE_TRIGGERS)


def _closed(z: str) -> StatedSize | None:
    """The first closed answer form of ``z`` that is a directive (module docstring)."""
    for m in _CLOSED.finditer(z):
        i = int(m.lastgroup[1:])
        if i in W.UNDIRECTED or _DIRECTIVE.search(z, max(0, m.start() - 40), m.start()) \
                or _QUESTION_END.match(z[m.end():m.end() + 3]) or m.start() < 3:
            _, label, tokens = W.CLOSED_FORMS[i]
            return StatedSize(tokens, "closed", label)
    return None


def _zone_size(z: str) -> StatedSize | None:
    """The stated size of one lower-cased zone (count > closed form > cue), or None."""
    toks = z.encode("utf-8", "surrogatepass").translate(_SEP_TABLE).split()
    words = set(toks)
    found = []
    units = words.intersection(UNIT_KEYS)
    if units and (b"".join(toks).translate(None, _NON_DIGITS) or not words.isdisjoint(NUMBER_KEYS)):
        found = counts(z, units)
    if not found and not words.isdisjoint(_LIST_KEYS):
        found = list_counts(z)
    non_ascii = not z.isascii()
    if non_ascii and not _ZH_UNIT_CHARS.isdisjoint(z):
        found += zh_counts(z)
    best = best_count(found)
    if best is not None:
        return StatedSize(best.tokens, "count", best.label)
    if words.isdisjoint(_CUE_KEYS) and not (non_ascii and any(t in z for t in W.ZH_CUE_TRIGGERS)):
        return None
    size = _closed(z)
    if size is not None:
        return size
    m = _VAGUE.search(z)
    if m is not None:
        _, label, direction = W.VAGUE_CUES[int(m.lastgroup[1:])]
        return StatedSize(0.0, "vague", label, direction)
    return None


def _user_zones(u: str) -> list[tuple[int, str]]:
    """(priority, lower-cased zone) of the user text: where its instruction can be (module docstring)."""
    if len(u) > _SCAN:
        u = u[:_SCAN // 2] + "\n\n" + u[-_SCAN // 2:]
    u = strip_blocks(u).strip().lower()
    paras = _PARA.split(u)
    if len(paras) == 1 and len(u) <= _WHOLE:
        return [(1, u)] if u else []
    head = paras[0][:_HEAD]
    colon = head.find(":")
    forward = head.rstrip().endswith(":") or bool(_FORWARD.search(head))
    if colon >= 15 and len(paras[0]) - colon > 80:  # "Summarise in one sentence: <text>"
        head, forward = head[:colon], True
    last = paras[-1] if len(paras) > 1 else u[-250:]
    tail = last[-_TAIL:]
    back = bool(_BACK.search(tail))
    if back and not forward:
        return [(2, tail)]
    if forward and not back:
        return [(2, head)]
    return [(2, tail), (1, head)]


def read_size(text: str) -> StatedSize | None:
    """The answer size ``text`` states (module docstring), or None.

    ``text`` may be a :class:`~sjf_core.predict._text.ScoredText`; its appended instructions are
    read first.
    """
    ia = getattr(text, "instructions_at", None)
    zones = [] if ia is None else [(3, text[ia:ia + _INSTR_MAX].lower())]
    zones += _user_zones(text if ia is None else text[:ia])
    cue = None
    for _, z in sorted(zones, key=lambda pz: -pz[0]):
        size = _zone_size(z)
        if size is None:
            continue
        if size.kind != "vague":
            return size
        cue = cue or size
    return cue
