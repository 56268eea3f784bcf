"""Local replies: the HTTP responses the transport answers itself, without sending the request.

Contract: each function returns a ``lib.Response`` (``lib`` the client's
:class:`~openai_sjf._httplib.HttpLib`) with a JSON OpenAI-style ``error`` body and
``x-should-retry`` set, so the SDK raises its usual error class. No prompt text in the body.

* :func:`rejected_response`: HTTP 429 (``openai.RateLimitError``) for
  :class:`sjf_core._errors.AdmissionRejected`, with ``Retry-After`` (whole seconds, >= 1),
  ``retry-after-ms`` and :data:`REJECTED_HEADER` (the reason).
* :func:`superseded_response`: HTTP 409 (``openai.ConflictError``, never retried) for a request
  superseded while queued (``x-sjf-supersede``).
"""

from __future__ import annotations

import json
import math

from sjf_core import AdmissionRejected

__all__ = ["REJECTED_HEADER", "rejected_response", "superseded_response"]

#: Response header that marks a local admission rejection.
REJECTED_HEADER = "x-sjf-rejected"


def superseded_response(http, request):
    """HTTP 409 (``openai.ConflictError``, not retried) for a request superseded while queued."""
    body = json.dumps({"error": {
        "message": "superseded by a newer request with the same x-sjf-supersede key; never sent to the backend",
        "type": "conflict", "code": "sjf_superseded"}}).encode()
    return http.Response(409, headers={"content-type": "application/json", "x-should-retry": "false"},
                         content=body, request=request)


def rejected_response(http, request, exc: AdmissionRejected, retry: bool):
    """HTTP 429 for an overload rejection; ``retry``: let the SDK retry it (``x-should-retry``)."""
    retry_after = max(0.0, float(exc.retry_after_s))
    body = json.dumps({
        "error": {
            "message": f"SJF admission rejected the request ({exc.reason}); retry after {retry_after:.1f} s",
            "type": "rate_limit_error",
            "code": "sjf_admission_rejected",
        }
    }).encode()
    headers = {
        "content-type": "application/json",
        "retry-after": str(max(1, math.ceil(retry_after))),
        "retry-after-ms": str(int(retry_after * 1000)),
        "x-should-retry": "true" if retry else "false",
        REJECTED_HEADER: str(exc.reason),
    }
    return http.Response(429, headers=headers, content=body, request=request)
