"""Will LiteLLM reject this chat request before it reaches the backend?

``rejected_reason(kwargs, call_type) -> str | None``: a short reason (no prompt text)
when the request is certain to be refused by LiteLLM after routing, else None. Never
raises. The plugin gives such a request no ticket: it would only hold a slot while it
waits, then fail without reaching the backend (issue 12).

Only shapes measured to fail on the pinned LiteLLM (1.106.12, ``openai/`` and
``ollama_chat/`` providers) are flagged, so a request that would succeed is never let
through unscheduled:

* ``messages`` that is not a list (a string, a dict, a number);
* an item of ``messages`` that is not a mapping;
* a ``user`` message whose ``content`` is a number, or a list holding an item that is
  not a mapping, or a part whose ``type`` LiteLLM does not accept for user messages.

System and assistant messages with odd content are sent on by LiteLLM and are not
flagged.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from sjf_core import note_fault

from ._stream_pump import user_content_types

log = logging.getLogger("litellm_sjf")

_CHAT_CALLS = ("completion", "acompletion")
_USER_TYPES = user_content_types()


def rejected_reason(kwargs: Any, call_type: Any) -> str | None:
    """See the module docstring."""
    try:
        name = str(getattr(call_type, "value", call_type) or "")
        if name not in _CHAT_CALLS or not isinstance(kwargs, Mapping) or "messages" not in kwargs:
            return None
        messages = kwargs["messages"]
        if not isinstance(messages, list):
            return "messages is not a list"
        for m in messages:
            if not isinstance(m, Mapping):
                return "a message is not an object"
            if m.get("role") != "user":
                continue
            content = m.get("content")
            if isinstance(content, (int, float)) and not isinstance(content, bool):
                return "user content is a number"
            if isinstance(content, list):
                for part in content:
                    if not isinstance(part, Mapping):
                        return "user content holds a part that is not an object"
                    if _USER_TYPES and part.get("type") not in _USER_TYPES:
                        return "user content part has a type LiteLLM refuses"
        return None
    except Exception:  # the check is a courtesy: LiteLLM itself answers a body it refuses
        note_fault(log, "request shape not checked; LiteLLM judges it")
        return None
