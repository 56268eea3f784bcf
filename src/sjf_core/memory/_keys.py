"""Evidence keys of one request: keyed hashes of its instruction-bearing parts, never its text.

:func:`evidence_keys` reads an OpenAI-style body and returns a :class:`RequestKeys`:
``group`` (the deployment: tenant + model group) and a tuple of ``(kind, digest)``
keys, each a 16-byte BLAKE2b digest keyed with a salt (``SJF_MEMORY_SALT``; all
workers of one deployment must share it). Kinds:

==========  ====================================================================
``group``   tenant (API key hash, where the body carries one) + model group:
            the broad key, present for every scorable request
``system``  the system / developer messages (all of them, in order)
``head``    the first line of the scored message (normalised, <= 256 chars; of a
            multi-line message only when it has >= 12 characters)
``tail``    the last line of the scored message, when it has more than one line
            (and >= 12 characters)
``outside`` the scored message with fenced (triple backtick), quoted (``>``),
            triple-double-quoted and ``<tag>...</tag>`` blocks removed, when it has one
``max``     ``max_tokens`` (or ``max_completion_tokens``/``max_output_tokens``)
==========  ====================================================================

Every key but ``group`` is scoped by the model group too (one app's answers depend
on the model). Normalisation before hashing: lowercase, runs of whitespace to one
space, digits to ``0``. The text itself is hashed and dropped at once; nothing here
keeps it. Never raises: unreadable parts give fewer keys.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from typing import Any, Mapping

from sjf_core._faults import note_fault
from sjf_core.settings import memory_salt
from sjf_core.predict._text import _content_text, strip_blocks

log = logging.getLogger("sjf_core.memory")

__all__ = ["RequestKeys", "evidence_keys", "KINDS", "SALT_ENV", "digest"]

SALT_ENV = "SJF_MEMORY_SALT"
KINDS = ("group", "system", "head", "tail", "outside", "max")
_DEFAULT_SALT = b"clairvoyant-sjf/memory/v1"
_MAX_LINE = 256
_MIN_LINE = 12
_MAX_SCAN = 200_000  # characters of a message looked at for template parts
_WS = re.compile(r"\s+")
_DIGITS = re.compile(r"\d")
_MAX_KEYS = ("max_completion_tokens", "max_tokens", "max_output_tokens")


def _salt() -> bytes:
    return memory_salt() or _DEFAULT_SALT


def digest(*parts: str, salt: bytes | None = None) -> bytes:
    """16-byte keyed BLAKE2b of ``parts`` (joined with NUL); the salt defaults to ``$SJF_MEMORY_SALT``."""
    h = hashlib.blake2b(digest_size=16, key=(salt if salt is not None else _salt())[:64])
    for i, p in enumerate(parts):
        if i:
            h.update(b"\x00")
        h.update(p.encode("utf-8", "replace"))
    return h.digest()


def _norm(s: str) -> str:
    return _DIGITS.sub("0", _WS.sub(" ", s).strip().lower())


@dataclass(frozen=True)
class RequestKeys:
    """Evidence keys of one request (digests only).

    Attributes:
        group: 16-byte digest of tenant + model group.
        keys: ``((kind, digest16), ...)``, ``group`` first.
    """

    group: bytes
    keys: tuple[tuple[str, bytes], ...]


def _tenant(body: Mapping) -> str:
    for field in ("metadata", "litellm_metadata"):
        md = body.get(field)
        if isinstance(md, Mapping):
            for k in ("user_api_key_hash", "user_api_key", "user_api_key_team_id"):
                v = md.get(k)
                if isinstance(v, str) and v:
                    return v[:128]
    return ""


def _system_text(body: Mapping) -> str | None:
    parts = []
    msgs = body.get("messages")
    if isinstance(msgs, (list, tuple)):
        for m in msgs[:1000]:
            if isinstance(m, Mapping) and m.get("role") in ("system", "developer"):
                t = _content_text(m.get("content"))
                if t:
                    parts.append(t)
    inst = body.get("instructions")  # responses API
    if isinstance(inst, str) and inst.strip():
        parts.append(inst)
    return "\n".join(parts) if parts else None


def _max_tokens(body: Mapping) -> int | None:
    for k in _MAX_KEYS:
        v = body.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and v == v and v < 1e9:
            return int(v)
    return None


def template_parts(text: str) -> dict[str, str]:
    """The normalised template parts of a scored message: ``head``, ``tail``, ``outside``.

    Returns a dict of kind -> normalised text (callers hash and drop it at once).
    """
    s = text[:_MAX_SCAN]
    out: dict[str, str] = {}
    lines = [ln for ln in s.splitlines() if ln.strip()]
    if not lines:
        return out
    if len(lines) == 1:
        out["head"] = _norm(lines[0])[:_MAX_LINE]  # a one-line prompt: its exact text
    else:  # an instruction line, not a stray "Hi," or a fence: at least _MIN_LINE characters
        head, tail = _norm(lines[0]), _norm(lines[-1])
        if len(head) >= _MIN_LINE:
            out["head"] = head[:_MAX_LINE]
        if len(tail) >= _MIN_LINE:
            out["tail"] = tail[:_MAX_LINE]
    stripped = strip_blocks(s)
    if len(stripped) < len(s):
        o = _norm(stripped)
        if o:
            out["outside"] = o[:4 * _MAX_LINE]
    return out


def evidence_keys(body: Any, text: str | None, model: str | None = None) -> RequestKeys | None:
    """Evidence keys of a request body whose scored text is ``text``; None if unreadable.

    Args:
        body: the parsed request body (dict).
        text: the scored text (:func:`sjf_core.predict._text.scored_text`), or None.
        model: the model group; default ``body["model"]``.
    """
    try:
        if not isinstance(body, Mapping):
            return None
        salt = _salt()
        m = model if model is not None else body.get("model")
        m = m[:200] if isinstance(m, str) else ""
        group = digest("group", _tenant(body), m, salt=salt)
        keys = [("group", group)]
        sys_text = _system_text(body)
        if sys_text:
            keys.append(("system", digest("system", m, _norm(sys_text[:_MAX_SCAN]), salt=salt)))
        if text:
            for kind, part in template_parts(text).items():
                keys.append((kind, digest(kind, m, part, salt=salt)))
        mt = _max_tokens(body)
        if mt is not None:
            keys.append(("max", digest("max", m, str(mt), salt=salt)))
        return RequestKeys(group, tuple(keys))
    except Exception:  # never fail scoring
        note_fault(log, "length memory keys could not be computed; the request is scored without the memory")
        return None
