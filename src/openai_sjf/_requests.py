"""What the transport reads from an outgoing request: endpoint, queue key, wait limit, our headers.

Contract: pure functions of an ``httpx``/``httpx2`` ``Request`` (or its URL/headers); none of
them reads the body, and none raises on a well-formed request. :func:`strip_sjf_headers`
mutates the request's headers (our ``x-sjf-*`` headers, but the idle probe's mark, are never
sent on).
"""

from __future__ import annotations

from typing import Any

from sjf_core import HEADER_PREFIX, PROBE_HEADER

__all__ = ["ENDPOINTS", "endpoint_of", "backend_of", "queue_wait_limit", "sjf_headers", "strip_sjf_headers",
           "api_key_of"]

#: (path suffix, endpoint name), checked in this order.
ENDPOINTS = (("/chat/completions", "chat/completions"), ("/completions", "completions"), ("/responses", "responses"))


def endpoint_of(path: str) -> str | None:
    """The admitted endpoint name for a URL path, or None (pass through)."""
    path = path.rstrip("/")
    for suffix, name in ENDPOINTS:
        if path.endswith(suffix):
            return name
    return None


def backend_of(url: Any, path: str, endpoint: str) -> str:
    """Queue key: scheme://host[:port]/prefix of the request URL (no trailing slash)."""
    prefix = path.rstrip("/")[: -(len(endpoint) + 1)]
    return f"{url.scheme}://{url.netloc.decode('ascii')}{prefix}"


def queue_wait_limit(request: Any) -> float | None:
    """Seconds a request may wait in the queue: its httpx ``pool`` timeout, else ``read``."""
    t = request.extensions.get("timeout")
    if not isinstance(t, dict):
        return None
    v = t.get("pool")
    if v is None:
        v = t.get("read")
    return float(v) if v is not None else None


def sjf_headers(headers: Any, extra: str | None = None) -> dict[str, str] | None:
    """Only our scheduling headers (``x-sjf-*``, :mod:`sjf_core.predict._meta`) and the header named
    ``extra`` (fairness "header:NAME"), or None."""
    out = None
    for name, v in headers.items():
        low = name.lower()
        if low.startswith(HEADER_PREFIX) or low == extra:
            out = out or {}
            out[low] = v
    return out


#: our header that must reach the backend: the idle probe's mark (sjf_core.admission._probe)
_KEEP_HEADERS = (PROBE_HEADER,)


def strip_sjf_headers(request) -> None:
    """Remove our scheduling headers (``x-sjf-*`` but the probe mark) before sending."""
    for name in [k for k in request.headers if k.lower().startswith(HEADER_PREFIX)
                 and k.lower() not in _KEEP_HEADERS]:
        del request.headers[name]


def api_key_of(request) -> str | None:
    """The bearer token (or ``api-key`` header) of a request, for fairness "key"."""
    auth = request.headers.get("authorization") or ""
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return request.headers.get("api-key") or None
