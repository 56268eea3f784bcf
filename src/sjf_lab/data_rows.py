"""The fields of a data row every reader of the tooling takes (docs/data.md "Format"): one
place, so that ``sjf train``, ``sjf eval``, ``sjf demo --data``, ``sjf bench --data`` and
``sjf emulate --trace`` accept the same names.

* :data:`ANSWER_TOKEN_FIELDS` — the answer's length in tokens, under any of these names, read
  in this order: ``response_tokens`` (the conversation logs' name), ``answer_tokens`` (the
  emulator traces' and the demo prompts'), ``completion_tokens`` (OpenAI's ``usage`` name, the
  production logs'). :data:`TRACE_TOKEN_FIELDS`: the same, ``answer_tokens`` first (traces).
* :func:`answer_tokens_of(row) <answer_tokens_of>` — that value as given (the first of those
  names the row has), or None; each reader checks it as it needs.
* :data:`EXPECTED` — what a usable row needs, in words, for the readers' errors.
* :func:`why_unusable(row) <why_unusable>` — why a row cannot be used, or None: for a message
  that names the missing field instead of "no usable rows".
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["ANSWER_TOKEN_FIELDS", "TRACE_TOKEN_FIELDS", "EXPECTED", "answer_tokens_of", "why_unusable"]

ANSWER_TOKEN_FIELDS = ("response_tokens", "answer_tokens", "completion_tokens")
#: The same names, as an emulator trace reads them (its own name first).
TRACE_TOKEN_FIELDS = ("answer_tokens", "response_tokens", "completion_tokens")
EXPECTED = ("each line a JSON object with 'prompt' (a non-empty string) and the answer's length in tokens, "
            "an integer >= 0, as " + " or ".join(repr(f) for f in ANSWER_TOKEN_FIELDS))


def answer_tokens_of(row: Mapping[str, Any], fields: tuple[str, ...] = ANSWER_TOKEN_FIELDS) -> Any:
    """The row's answer length as given (the first of ``fields`` it has), or None."""
    for name in fields:
        if row.get(name) is not None:
            return row[name]
    return None


def why_unusable(row: Any) -> str | None:
    """Why ``row`` (a parsed JSON line) is not a usable (prompt, answer length) row, or None."""
    if not isinstance(row, Mapping):
        return "not a JSON object"
    prompt = row.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return "no 'prompt'" if prompt is None else "'prompt' is not a non-empty string"
    tok = answer_tokens_of(row)
    if tok is None:
        return "no answer length (" + " / ".join(ANSWER_TOKEN_FIELDS) + ")"
    if isinstance(tok, bool) or not isinstance(tok, (int, float)) or not tok >= 0:
        return "the answer length is not a number >= 0"
    return None
