"""The httpx transport that admits OpenAI generation requests through the SJF queue.

:class:`SJFTransport` wraps the transport the user's ``httpx.AsyncClient``
already has (the SDK default, a custom transport, a proxy mount) and delegates
every request to it. Only ``POST`` requests whose path ends in
``/chat/completions``, ``/completions`` or ``/responses`` are admitted; all
other requests go straight through.

Per admitted request (``handle_async_request``):

1. get a ticket from the core seam ``Scheduler.lazy_ticket(backend, load, endpoint,
   arrival)``; the backend key is the request URL without the endpoint suffix (the
   client's ``base_url``); ``arrival`` survives SDK retries (:mod:`openai_sjf.arrivals`).
   The body is parsed (``json.loads`` of the bytes the SDK already serialised; never
   re-serialised) and scored only when there is an order to decide: when the request
   must wait, or when another one arrives while it runs. A request granted a slot at
   once and alone until its release is never scored (metrics label it ``idle``);
2. wait for a slot at most the request's httpx ``pool`` timeout (else its
   ``read`` timeout; None waits without limit). Expiry leaves the queue and
   raises ``httpx.PoolTimeout``, which the SDK maps to ``openai.APITimeoutError``
   (after its own retries, which keep the original arrival). Cancellation
   leaves the queue (``Ticket.acquire``);
3. send through the wrapped transport; the response body stream is wrapped in
   :class:`~openai_sjf.stream.AdmittedStream`, which releases the slot when the
   body is done or closed. A transport error releases at once.

Overload: :class:`sjf_core.errors.AdmissionRejected` becomes a local HTTP 429
response with ``Retry-After``/``retry-after-ms`` (the SDK raises
``openai.RateLimitError``) and ``x-should-retry: false`` unless
``retry_rejected=True``.

Fail-open (DESIGN.md invariant 5): an unreadable body is admitted unscored (the
policy's neutral key, FCFS among equals); an internal fault of the scheduler
sends the request straight through, counted in :attr:`SJFTransport.stats` and
logged without prompt text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from dataclasses import dataclass
from typing import Any

import httpx

from sjf_core.errors import AdmissionRejected, Superseded
from sjf_core.meta import HEADER_PREFIX

from .arrivals import ArrivalMemory
from .stream import AdmittedStream, ensure_sweeper, usage_tokens

log = logging.getLogger("openai_sjf")

#: (path suffix, endpoint name), checked in this order.
ENDPOINTS = (("/chat/completions", "chat/completions"), ("/completions", "completions"), ("/responses", "responses"))
#: Values of the ``on_close`` option.
ON_CLOSE = ("release", "drain")
#: Response header that marks a local admission rejection.
REJECTED_HEADER = "x-sjf-rejected"


def endpoint_of(path: str) -> str | None:
    """The admitted endpoint name for a URL path, or None (pass through)."""
    path = path.rstrip("/")
    for suffix, name in ENDPOINTS:
        if path.endswith(suffix):
            return name
    return None


def backend_of(url: httpx.URL, path: str, endpoint: str) -> str:
    """Queue key: scheme://host[:port]/prefix of the request URL (no trailing slash)."""
    prefix = path.rstrip("/")[: -(len(endpoint) + 1)]
    return f"{url.scheme}://{url.netloc.decode('ascii')}{prefix}"


def queue_wait_limit(request: httpx.Request) -> float | None:
    """Seconds a request may wait in the queue: its httpx ``pool`` timeout, else ``read``."""
    t = request.extensions.get("timeout")
    if not isinstance(t, dict):
        return None
    v = t.get("pool")
    if v is None:
        v = t.get("read")
    return float(v) if v is not None else None


def sjf_headers(headers: httpx.Headers, extra: str | None = None) -> dict[str, str] | None:
    """Only our scheduling headers (``x-sjf-*``, :mod:`sjf_core.meta`) and the header named
    ``extra`` (fairness "header:NAME"), or None."""
    out = None
    for name, v in headers.items():
        low = name.lower()
        if low.startswith(HEADER_PREFIX) or low == extra:
            out = out or {}
            out[low] = v
    return out


def strip_sjf_headers(request: httpx.Request) -> None:
    """Remove our ``x-sjf-*`` headers from a request before it is sent."""
    for name in [k for k in request.headers if k.lower().startswith(HEADER_PREFIX)]:
        del request.headers[name]


def api_key_of(request: httpx.Request) -> str | None:
    """The bearer token (or ``api-key`` header) of a request, for fairness "key"."""
    auth = request.headers.get("authorization") or ""
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return request.headers.get("api-key") or None


@dataclass
class TransportStats:
    """Counters of one :class:`SJFTransport` (requests, not prompt text)."""

    admitted: int = 0
    passed_through: int = 0  # not an admitted endpoint (GET, embeddings, ...)
    unparsable: int = 0
    rejected: int = 0
    queue_timeouts: int = 0
    internal_errors: int = 0
    superseded: int = 0


class SJFTransport(httpx.AsyncBaseTransport):
    """SJF admission around an existing ``httpx.AsyncBaseTransport``.

    Args:
        inner: the transport to delegate to (kept, never replaced).
        scheduler: a :class:`sjf_core.scheduler.Scheduler`.
        retry_rejected: let the SDK retry a local 429 rejection (honouring
            ``Retry-After``); default False (``x-should-retry: false``).
        arrivals: the :class:`~openai_sjf.arrivals.ArrivalMemory` (shared by
            the transports of one wrapped client).
        on_close: what a response body closed before its end does with its slot:
            "release" (default: close the connection, release at once) or
            "drain" (read the rest in the background, release at its end).

    Raises:
        ValueError: an unknown ``on_close``.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, scheduler, retry_rejected: bool = False,
                 arrivals: ArrivalMemory | None = None, on_close: str = "release"):
        if on_close not in ON_CLOSE:
            raise ValueError(f"on_close must be one of {ON_CLOSE}, got {on_close!r}")
        self.inner = inner
        self.scheduler = scheduler
        self.retry_rejected = bool(retry_rejected)
        self.on_close = on_close
        self.arrivals = arrivals or ArrivalMemory()
        self.stats = TransportStats()

    # ---- lifecycle: delegate ------------------------------------------------------
    async def __aenter__(self):
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, exc_type=None, exc_value=None, traceback=None) -> None:
        await self.inner.__aexit__(exc_type, exc_value, traceback)

    async def aclose(self) -> None:
        await self.inner.aclose()

    # ---- requests -----------------------------------------------------------------
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        endpoint = endpoint_of(request.url.path) if request.method == "POST" else None
        fairness = getattr(self.scheduler, "fairness", None)
        headers = sjf_headers(request.headers, getattr(fairness, "header", None))
        strip_sjf_headers(request)  # ours: never sent on
        if endpoint is None:
            self.stats.passed_through += 1
            return await self.inner.handle_async_request(request)
        path = request.url.path

        try:
            ticket = self._ticket(request, path, endpoint, headers)
        except AdmissionRejected as exc:
            return self._rejected(request, exc)
        except Superseded:
            return self._superseded(request)
        except Exception:
            self.stats.internal_errors += 1
            log.exception("openai_sjf: admission failed internally; sending the request without admission")
            return await self.inner.handle_async_request(request)

        try:
            self._sweep_if_waiting(ticket)
            await ticket.acquire(queue_wait_limit(request))
        except (asyncio.TimeoutError, TimeoutError):
            self.stats.queue_timeouts += 1
            raise httpx.PoolTimeout("timed out waiting for an SJF admission slot", request=request) from None
        except AdmissionRejected as exc:
            return self._rejected(request, exc)
        except Superseded:
            return self._superseded(request)
        except Exception:
            # acquire already left the queue (Ticket._abandon); fail open.
            self.stats.internal_errors += 1
            log.exception("openai_sjf: admission wait failed internally; sending the request without admission")
            return await self.inner.handle_async_request(request)
        self.stats.admitted += 1

        try:
            response = await self.inner.handle_async_request(request)
        except BaseException:
            ticket.release()
            raise
        try:
            encoding = response.headers.get("content-encoding", "identity").lower()
            read_usage = response.status_code == 200 and encoding in ("", "identity")
            if response.is_stream_consumed or response.is_closed:
                # A transport that returns an already-read body (e.g. httpx.Response(content=...)):
                # nothing is left to stream, so the backend is done.
                tokens = None
                if read_usage:
                    try:
                        tokens = usage_tokens(b"", response.content)
                    except Exception:  # closed without being read: no usage
                        tokens = None
                ticket.release(tokens)
                return response
            response.stream = AdmittedStream(response.stream, ticket, asyncio.get_running_loop(), read_usage,
                                             drain=self.on_close == "drain")
        except BaseException:
            ticket.release()
            raise
        return response

    @staticmethod
    def _sweep_if_waiting(ticket) -> None:
        """A request about to wait: a slot holder may be an abandoned stream (see
        :func:`openai_sjf.stream.ensure_sweeper`). Never raises."""
        try:
            q = getattr(ticket, "queue", None)
            if q is not None and q.in_flight >= q.slots:
                ensure_sweeper(q)
        except Exception:
            log.debug("openai_sjf: could not start the abandoned-stream sweeper", exc_info=True)

    def _ticket(self, request: httpx.Request, path: str, endpoint: str, headers: dict | None):
        def load():
            body: Any = None
            try:
                body = json.loads(request.content)
            except Exception:  # not JSON, or a streaming body: unscored, FCFS order
                self.stats.unparsable += 1
            return body, headers

        # parsed and scored only when there is an order to decide (not at zero contention)
        return self.scheduler.lazy_ticket(backend_of(request.url, path, endpoint), load, endpoint,
                                          self.arrivals.arrival(request), api_key=api_key_of(request))

    def _superseded(self, request: httpx.Request) -> httpx.Response:
        """HTTP 409 (``openai.ConflictError``, not retried) for a request superseded while queued."""
        self.stats.superseded += 1
        body = json.dumps({"error": {
            "message": "superseded by a newer request with the same x-sjf-supersede key; never sent to the backend",
            "type": "conflict", "code": "sjf_superseded"}}).encode()
        return httpx.Response(409, headers={"content-type": "application/json", "x-should-retry": "false"},
                              content=body, request=request)

    def _rejected(self, request: httpx.Request, exc: AdmissionRejected) -> httpx.Response:
        self.stats.rejected += 1
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
            "x-should-retry": "true" if self.retry_rejected else "false",
            REJECTED_HEADER: str(exc.reason),
        }
        return httpx.Response(429, headers=headers, content=body, request=request)
