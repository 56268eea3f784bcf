"""Which text of an OpenAI-style request body the predictor scores (DESIGN.md "Prediction").

* ``chat/completions``: the content of the **last user message** of ``messages``,
  followed by the **instructions** of the request: the text of its ``system`` /
  ``developer`` messages (joined with a newline), after a blank line, bounded to
  :data:`INSTRUCTION_CHARS` characters (first and last half when longer). The
  instructions go last so that they land in the scanned tail of the features
  (:func:`sjf_core.predict._features.window`), where "answer in one sentence" or "reply with a 3-5 word
  title" is read like an instruction after pasted material; the user message stays
  first, so the head window still reads the request itself. A string content is used
  as is; a list of content parts contributes its text parts (``{"type": "text",
  "text": ...}``, ``input_text``, or bare strings), joined with a newline; image,
  audio and file parts are ignored. Missing or ``None`` content gives no text (and
  then no instructions either: the request is unscored). When there is no user
  message at all the last message with text is used (e.g. a lone ``system`` prompt).
* ``completions`` (legacy): ``prompt`` as a string, or a list of strings joined
  with a newline. Token-id prompts (lists of ints) cannot be scored.
* ``responses``: ``input`` as a string, or a list of items: message items
  (``{"role": "user", "content": ...}``) as for chat, bare strings, or
  ``input_text`` parts. The last user item wins.

Any other endpoint is tried in that order (``messages``, ``input``, ``prompt``).
When instructions were appended, the result is a :class:`ScoredText` (a ``str``) whose
``instructions_at`` says where they start, so the stated-size reader
(:mod:`sjf_core.predict._stated`) can tell the app's instructions from pasted user text; a
request with no user message scores its system prompt, all of it instructions
(``instructions_at == 0``). :func:`strip_blocks` removes fenced, quoted, triple-quoted and
``<tag>`` blocks (pasted material) from a message; the length memory's template keys use it too.
:func:`scored_text` never raises: unreadable input gives ``None``, which the
scheduler treats as unscored (FCFS order, DESIGN.md invariant 5).
"""

from __future__ import annotations

import logging
import re
from typing import Any, Mapping

from sjf_core._faults import note_fault

log = logging.getLogger("sjf_core.predict")

__all__ = ["scored_text", "INSTRUCTION_CHARS", "ScoredText", "strip_blocks"]

#: At most this many characters of system/developer instructions are appended.
INSTRUCTION_CHARS = 1000

_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
#: Upper bound on list items looked at, so a hostile body cannot make scoring slow.
_MAX_ITEMS = 10_000
_BLOCKS = re.compile(r"```.*?(```|$)|\"\"\".*?(\"\"\"|$)|<(\w{1,20})>.*?(</\3>|$)", re.S)
_QUOTED = re.compile(r"^[ \t]*>.*$", re.M)


class ScoredText(str):
    """The scored text (a ``str``) with ``instructions_at``: the index where the appended
    system/developer instructions start (``len(self)`` when there are none)."""

    instructions_at: int

    def __new__(cls, text: str, instructions_at: int):
        obj = super().__new__(cls, text)
        obj.instructions_at = instructions_at
        return obj


def strip_blocks(s: str) -> str:
    """``s`` with fenced (triple backtick), triple-double-quoted, ``<tag>...</tag>`` blocks and
    ``>``-quoted lines replaced by a space: what remains is the instruction around pasted material."""
    if "```" in s or '"""' in s or "<" in s:
        s = _BLOCKS.sub(" ", s)
    if ">" in s:
        s = _QUOTED.sub(" ", s)
    return s


def _clean(s: str) -> str | None:
    """``s`` with lone surrogates replaced (so it encodes as UTF-8), or None if empty."""
    if not s:
        return None
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", "replace").decode("utf-8")
    return s if s.strip() else None


def _content_text(content: Any) -> str | None:
    """Text of one message ``content``: a string, or a list of content parts."""
    if isinstance(content, str):
        return _clean(content)
    if isinstance(content, Mapping):  # a single part instead of a list
        content = [content]
    if not isinstance(content, (list, tuple)):
        return None
    texts: list[str] = []
    for part in content[:_MAX_ITEMS]:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping):
            ptype = part.get("type", "text")
            if ptype in _TEXT_PART_TYPES:
                t = part.get("text")
                if isinstance(t, str):
                    texts.append(t)
                elif isinstance(t, Mapping) and isinstance(t.get("value"), str):
                    texts.append(t["value"])  # assistants-style {"text": {"value": ...}}
    return _clean("\n".join(texts)) if texts else None


def _bounded(instr: str) -> str:
    if len(instr) <= INSTRUCTION_CHARS:
        return instr
    half = INSTRUCTION_CHARS // 2
    return instr[:half] + "\n" + instr[-half:]


def _with_instructions(text: str | None, instr: list[str]) -> str | None:
    """``text`` + blank line + the bounded instructions (``text`` None stays None)."""
    if text is None:
        return None
    parts = [p for p in (_clean(i) for i in instr) if p is not None]
    if not parts:
        return text
    return ScoredText(text + "\n\n" + _bounded("\n".join(p.strip() for p in parts)), len(text) + 2)


def _instructions(messages) -> list[str]:
    out = []
    for msg in messages[:_MAX_ITEMS]:
        if isinstance(msg, Mapping) and msg.get("role") in ("system", "developer"):
            t = _content_text(msg.get("content"))
            if t is not None:
                out.append(t)
    return out


def _from_messages(messages: Any, extra_instructions: Any = None) -> str | None:
    if not isinstance(messages, (list, tuple)) or not messages:
        return None
    user = _last_user(messages)
    if user is None:
        return None
    text, is_user = user
    if not is_user:  # no user message: the system prompt itself is scored, all of it instructions
        return None if text is None else ScoredText(text, 0)
    instr = [extra_instructions] if isinstance(extra_instructions, str) else []
    return _with_instructions(text, instr + _instructions(messages))


def _last_user(messages) -> tuple[str | None, bool] | None:
    """(text of the last user message, True), or (fallback text, False) when there is none."""
    fallback = None
    for msg in reversed(messages[-_MAX_ITEMS:]):
        if isinstance(msg, str):  # a bare string item (responses input list)
            if fallback is None:
                fallback = _clean(msg)
            continue
        if not isinstance(msg, Mapping):
            continue
        if msg.get("type") in _TEXT_PART_TYPES:  # a bare input_text item
            text = _content_text([msg])
            role = "user"
        else:
            role = msg.get("role")
            text = _content_text(msg.get("content"))
        if role == "user":
            return text, True
        if fallback is None and text is not None and role in (None, "system", "developer"):
            fallback = text
    return fallback, False


def _from_prompt(prompt: Any) -> str | None:
    if isinstance(prompt, str):
        return _clean(prompt)
    if isinstance(prompt, (list, tuple)) and prompt:
        items = prompt[:_MAX_ITEMS]
        if all(isinstance(p, str) for p in items):
            return _clean("\n".join(items))
    return None  # token ids, lists of token-id lists, anything else


def _from_input(inp: Any, instructions: Any = None) -> str | None:
    if isinstance(inp, str):
        instr = [instructions] if isinstance(instructions, str) else []
        return _with_instructions(_clean(inp), instr)
    if isinstance(inp, (list, tuple)):
        return _from_messages(inp, instructions)
    return None


def scored_text(body: Any, endpoint: str = "chat/completions") -> str | None:
    """The prompt text to score for a request, or None when nothing is scorable.

    Args:
        body: the parsed JSON request body (normally a dict; anything else gives None).
        endpoint: the API route, e.g. "chat/completions", "/v1/completions",
            "responses" (a leading "/v1/" and slashes are ignored).

    Returns:
        The text (str, never empty or all-whitespace, always UTF-8 encodable),
        or None. Never raises.
    """
    try:
        if not isinstance(body, Mapping):
            return None
        ep = str(endpoint or "").strip("/").lower()
        if ep.startswith("v1/"):
            ep = ep[3:]
        if ep.endswith("chat/completions"):
            order = ("messages",)
        elif ep.endswith("completions"):
            order = ("prompt",)
        elif ep.endswith("responses"):
            order = ("input",)
        else:
            order = ("messages", "input", "prompt")
        for field in order:
            if field == "messages":
                text = _from_messages(body.get("messages"))
            elif field == "input":
                text = _from_input(body.get("input"), body.get("instructions"))
            else:
                text = _from_prompt(body.get("prompt"))
            if text is not None:
                return text
        return None
    except Exception:  # pragma: no cover - defensive: never fail a request
        note_fault(log, "request text could not be read; the request is unscored")
        return None
