"""What the tail of a response body says: the answer's length and whether an SSE stream ended.

Contract: both functions take the last two body chunks ``(prev, last)`` (raw bytes, identity
encoding) and read at most the final :data:`USAGE_TAIL_BYTES` of the body; nothing is buffered
beyond those chunks, and answer text never matches (a JSON string cannot hold a bare ``"key"``
or a raw newline). They never raise on any bytes.
"""

from __future__ import annotations

import re

__all__ = ["USAGE_TAIL_BYTES", "usage_tokens", "sse_ended"]

#: Bytes of the body's tail searched for ``usage``.
USAGE_TAIL_BYTES = 4096
_USAGE_KEYS = (b'"completion_tokens"', b'"output_tokens"')
_NUMBER_RE = re.compile(rb"\s*:\s*(\d{1,9})")


def usage_tokens(prev: bytes, last: bytes) -> int | None:
    """Answer tokens from the ``usage`` object in the tail of a response body.

    Args:
        prev, last: the last two body chunks (raw bytes, identity encoding);
            ``prev`` is used only when ``last`` is shorter than ``USAGE_TAIL_BYTES``.

    Returns:
        The last ``completion_tokens`` (chat/completions) or ``output_tokens``
        (responses) integer in the final ``USAGE_TAIL_BYTES`` of the body, or None.
        A JSON string value cannot contain a bare ``"key"`` (its quotes would be
        escaped), so answer text never matches.
    """
    if len(last) >= USAGE_TAIL_BYTES:
        tail = last[-USAGE_TAIL_BYTES:]
    else:
        tail = prev[len(last) - USAGE_TAIL_BYTES:] + last if prev else last
    for key in _USAGE_KEYS:
        i = tail.rfind(key)
        if i >= 0:
            m = _NUMBER_RE.match(tail, i + len(key))
            if m is not None:
                return int(m.group(1))
    return None


#: Terminal SSE events: chat/completions and completions end with ``data: [DONE]``,
#: responses with one of these events. Matched only at a line start: answer text sits
#: inside JSON strings, which cannot hold a raw newline.
_SSE_END_RE = re.compile(rb"(?:^|\n)(?:data: \[DONE\]|event: response\.(?:completed|incomplete|failed))\s*(?:\n|$)")


def sse_ended(prev: bytes, last: bytes) -> bool:
    """True if the tail of a body (its last two chunks, raw bytes) holds the terminal
    event of an OpenAI SSE stream (``data: [DONE]``, or ``event: response.completed`` /
    ``incomplete`` / ``failed``): the backend has finished even if the reader stopped
    before the connection's end of file (the SDK stops at ``[DONE]`` and closes)."""
    tail = last if len(last) >= USAGE_TAIL_BYTES else (prev[-USAGE_TAIL_BYTES:] + last)
    return _SSE_END_RE.search(tail[-USAGE_TAIL_BYTES:]) is not None
