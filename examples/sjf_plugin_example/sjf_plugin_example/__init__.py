"""Example clairvoyant-sjf plugin (pluggy hooks of :mod:`sjf_core.ext._hooks`).

Registered through the ``clairvoyant_sjf.plugins`` entry point ``example`` (see
``pyproject.toml``); the module itself is the plugin object.

* :func:`sjf_predict`: explicit length limits in the prompt ("in one sentence",
  "in 50 words", "answer yes or no") give the expected answer tokens directly; other
  prompts return None, which defers to the built-in predictor.
* :func:`sjf_ordering_key`: under the ``sjf`` policy (key = P(Long)), a request with
  ``max_tokens`` < 200 cannot yield a Long answer (≥ 800 tokens), so its key is 0.
* ``sjf_on_*``: per-backend event counts in :data:`COUNTS` (numbers only).
"""

from __future__ import annotations

import re
import threading
from collections import Counter

from sjf_core import hookimpl

__all__ = ["sjf_predict", "sjf_ordering_key", "COUNTS", "reset"]

#: Tokens per English word (≈ 4 characters per token, paper §3.2).
TOKENS_PER_WORD = 4 / 3
#: Typical tokens of one sentence.
TOKENS_PER_SENTENCE = 30
#: Typical tokens of one paragraph.
TOKENS_PER_PARAGRAPH = 110

_LIMIT = r"(?:in|under|within|at most|no more than|maximum(?: of)?|max|less than|fewer than|up to)"
_NUM_WORDS = {"one": 1, "a": 1, "an": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_N = r"(\d{1,5}|one|a|an|single|two|three|four|five)"
_WORDS_RE = re.compile(rf"\b{_LIMIT}\s+{_N}\s+words?\b|\b{_N}\s+words?\s+(?:or less|or fewer|max(?:imum)?)\b", re.I)
_SENT_RE = re.compile(rf"\b{_LIMIT}\s+{_N}\s+(?:short\s+)?sentences?\b|\bone[- ]sentence\b", re.I)
_PARA_RE = re.compile(rf"\b{_LIMIT}\s+{_N}\s+(?:short\s+)?paragraphs?\b", re.I)
_YESNO_RE = re.compile(r"\b(?:answer|reply|respond)\s+(?:with\s+)?(?:only\s+)?(?:a\s+)?(?:yes or no|yes/no|one word|a single word)\b", re.I)

_lock = threading.Lock()
#: Event counts: ``COUNTS[(event, backend)]`` -> int.
COUNTS: Counter = Counter()


def _num(s: str | None) -> int:
    if s is None:
        return 1
    s = s.lower()
    return int(s) if s.isdigit() else _NUM_WORDS.get(s, 1)


def _first_number(match: re.Match) -> int:
    groups = [g for g in match.groups() if g is not None]
    return _num(groups[0]) if groups else 1


@hookimpl
def sjf_predict(text: str):
    """Expected answer tokens from an explicit length limit, or None to defer.

    Args:
        text: the prompt (read in-process only; never stored or logged).

    Returns:
        float tokens (>= 1) or None.
    """
    if _YESNO_RE.search(text):
        return 5.0
    m = _WORDS_RE.search(text)
    if m:
        return max(1.0, _first_number(m) * TOKENS_PER_WORD)
    m = _SENT_RE.search(text)
    if m:
        return float(_first_number(m) * TOKENS_PER_SENTENCE)
    m = _PARA_RE.search(text)
    if m:
        return float(_first_number(m) * TOKENS_PER_PARAGRAPH)
    return None


@hookimpl
def sjf_ordering_key(prediction, meta, default_key, policy):
    """Key 0 for a capped request under ``sjf`` (it cannot be Long); else None (keep the policy key)."""
    if policy == "sjf" and meta.max_tokens is not None and 0 < meta.max_tokens < 200:
        return 0.0
    return None


def _count(event: str, backend: str) -> None:
    with _lock:
        COUNTS[(event, backend)] += 1


@hookimpl
def sjf_on_enqueue(backend, entry):
    _count("enqueue", backend)


@hookimpl
def sjf_on_dispatch(backend, entry, wait_s):
    _count("dispatch", backend)


@hookimpl
def sjf_on_complete(backend, entry, service_s, answer_tokens):
    _count("complete", backend)


@hookimpl
def sjf_on_cancel(backend, entry):
    _count("cancel", backend)


@hookimpl
def sjf_on_reject(backend, reason):
    _count("reject", backend)


def reset() -> None:
    """Clear :data:`COUNTS`."""
    with _lock:
        COUNTS.clear()
