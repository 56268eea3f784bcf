"""The length classes of an answer (paper §4.1): what the predictor predicts and every room counts in.

Short < 200 answer tokens, Medium 200–799, Long >= 800. Defined here, in the predictor's room
(the lowest room that names them); the policy room re-exports them
(:mod:`sjf_core.policy._entry`).
"""

from __future__ import annotations

SHORT, MEDIUM, LONG = 0, 1, 2
CLASS_NAMES = ("short", "medium", "long")

#: Class bounds in answer tokens (paper §4.1): Short < 200, Medium 200–799, Long >= 800.
SHORT_MAX_TOKENS = 200
LONG_MIN_TOKENS = 800


def class_of_tokens(tokens: float) -> int:
    """Length class of an answer of ``tokens`` tokens (paper §4.1 bounds).

    Returns 0 (Short, < 200), 1 (Medium, 200–799) or 2 (Long, >= 800).
    """
    if tokens < SHORT_MAX_TOKENS:
        return SHORT
    if tokens < LONG_MIN_TOKENS:
        return MEDIUM
    return LONG
