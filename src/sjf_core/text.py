"""Which text of an OpenAI-style request body the predictor scores (DESIGN.md "Prediction").

* ``chat/completions``: the content of the **last user message** of ``messages``.
  A string content is used as is; a list of content parts contributes its text
  parts (``{"type": "text", "text": ...}``, ``input_text``, or bare strings),
  joined with a newline; image, audio and file parts are ignored. Missing or
  ``None`` content gives no text. When there is no user message at all the
  last message with text is used (e.g. a lone ``system`` prompt).
* ``completions`` (legacy): ``prompt`` as a string, or a list of strings joined
  with a newline. Token-id prompts (lists of ints) cannot be scored.
* ``responses``: ``input`` as a string, or a list of items: message items
  (``{"role": "user", "content": ...}``) as for chat, bare strings, or
  ``input_text`` parts. The last user item wins.

Any other endpoint is tried in that order (``messages``, ``input``, ``prompt``).
:func:`scored_text` never raises: unreadable input gives ``None``, which the
scheduler treats as unscored (FCFS order, DESIGN.md invariant 5).
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["scored_text"]

_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
#: Upper bound on list items looked at, so a hostile body cannot make scoring slow.
_MAX_ITEMS = 10_000


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


def _from_messages(messages: Any) -> str | None:
    if not isinstance(messages, (list, tuple)) or not messages:
        return None
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
            return text
        if fallback is None and text is not None and role in (None, "system", "developer"):
            fallback = text
    return fallback


def _from_prompt(prompt: Any) -> str | None:
    if isinstance(prompt, str):
        return _clean(prompt)
    if isinstance(prompt, (list, tuple)) and prompt:
        items = prompt[:_MAX_ITEMS]
        if all(isinstance(p, str) for p in items):
            return _clean("\n".join(items))
    return None  # token ids, lists of token-id lists, anything else


def _from_input(inp: Any) -> str | None:
    if isinstance(inp, str):
        return _clean(inp)
    if isinstance(inp, (list, tuple)):
        return _from_messages(inp)
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
                text = _from_input(body.get("input"))
            else:
                text = _from_prompt(body.get("prompt"))
            if text is not None:
                return text
        return None
    except Exception:  # pragma: no cover - defensive: never fail a request
        return None
