"""What the LiteLLM plugin takes from a request for tenants and intent (no prompt text).

* :func:`consume_intent` — LiteLLM's own ``priority`` request field (lower runs sooner)
  is removed from the request in the pre-call hook, so that neither LiteLLM's scheduler
  nor the backend sees it (litellm#7144), and kept for our queue. Our own inputs
  (``metadata.sjf_*``, ``x-sjf-*`` headers) never reach the backend either: LiteLLM does
  not forward ``metadata`` nor client headers by default.
* :func:`identity` — the caller's API key and team from LiteLLM's ``UserAPIKeyAuth``,
  for ``fairness`` "key" / "team" (hashed by :class:`sjf_core.settings._tenants.Fairness`).
* :func:`tenant_status` — per-tenant queue depth and oldest wait of one queue.

Never raises on request data.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping

from sjf_core import note_fault

log = logging.getLogger("litellm_sjf")


def consume_intent(data: dict, meta_body: dict) -> None:
    """Move LiteLLM's ``priority`` field from ``data`` (what is sent on) into
    ``meta_body`` (what the queue reads). Never raises."""
    try:
        if "priority" in data:
            meta_body["priority"] = data.pop("priority")
        if "user" in data:
            meta_body["user"] = data["user"]  # fairness "user": the OpenAI field, forwarded as is
    except Exception:
        note_fault(log, "LiteLLM priority / user fields not read; the request is scheduled without them")


def identity(user_api_key_dict: Any) -> tuple[Any, Any]:
    """``(api_key, team_id)`` of the caller (LiteLLM's hashed token and team id), or Nones."""
    try:
        key = getattr(user_api_key_dict, "api_key", None) or getattr(user_api_key_dict, "token", None)
        team = getattr(user_api_key_dict, "team_id", None)
        return (key if isinstance(key, str) else None), (team if isinstance(team, str) else None)
    except Exception:
        note_fault(log, "caller's key / team unreadable; the request goes to the shared tenant")
        return None, None


def tenant_status(queue: Any, now: float | None = None) -> dict | None:
    """``{tenant_id: {"waiting": n, "oldest_wait_s": s, "dispatched": n}}`` of a queue with
    fair shares (None otherwise). Tenant ids are hashed unless the config allows names;
    requests without a tenant are listed under "-"."""
    pending = getattr(queue, "pending", None)
    subs = getattr(pending, "_subs", None)
    if not isinstance(subs, Mapping):
        return None
    now = time.monotonic() if now is None else now
    out = {}
    for t, sub in list(subs.items()):
        waiting = len(sub)
        oldest = None
        if waiting:
            try:
                e = min(sub._live_entries(), key=lambda x: x.arrival, default=None)
                oldest = None if e is None else max(0.0, now - e.arrival)
            except Exception:
                note_fault(log, "oldest wait of a tenant unavailable", level=logging.DEBUG)
                oldest = None
        n = pending.dispatched.get(t, 0)
        if waiting or n:
            out["-" if t is None else t] = {"waiting": waiting, "oldest_wait_s": oldest, "dispatched": n}
    return out
