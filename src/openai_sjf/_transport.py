"""The transport that admits OpenAI generation requests through the SJF queue.

:class:`SJFTransport` wraps the transport the user's ``httpx.AsyncClient`` (openai
1.x/2.x) or ``httpx2.AsyncClient`` (openai 3.x) already has (the SDK default, a custom
transport, a proxy mount) and delegates every request to it. Only ``POST`` requests
whose path ends in ``/chat/completions``, ``/completions`` or ``/responses`` are
admitted; all other requests go straight through.

Per admitted request (``handle_async_request``):

1. get a ticket from the core seam ``Scheduler.lazy_ticket(backend, load, endpoint,
   arrival)``; the backend key is the request URL without the endpoint suffix (the
   client's ``base_url``); ``arrival`` survives SDK retries (:mod:`openai_sjf._arrivals`).
   The body is parsed (``json.loads`` of the bytes the SDK already serialised; never
   re-serialised) and scored only when there is an order to decide: when the request
   must wait, or when another one arrives while it runs. A request granted a slot at
   once and alone until its release is never scored (metrics label it ``idle``);
2. wait for a slot at most the request's ``pool`` timeout (else its
   ``read`` timeout; None waits without limit). Expiry leaves the queue and
   raises the library's ``PoolTimeout``, which the SDK maps to ``openai.APITimeoutError``
   (after its own retries, which keep the original arrival). Cancellation
   leaves the queue (``Ticket.acquire``);
3. send through the wrapped transport; the response body stream is wrapped in
   :class:`~openai_sjf._stream.AdmittedStream`, which releases the slot when the
   body is read to its end. An error raised before the request left (connect error,
   pool timeout) releases at once;
4. an **orphan** (the request may have reached the backend, but its answer was not
   read to the end: cancelled or timed out while the backend answers, a broken
   connection, an SSE stream closed early or abandoned with ``on_close="probe"``)
   keeps its slot until a 1-token probe of the backend returns
   (:mod:`openai_sjf._orphans`): the next request is sent exactly when the backend is
   free, whether it stopped on the disconnect or went on generating. ``on_close=
   "release"`` / ``"drain"`` override this for SSE streams only.

Overload: :class:`sjf_core._errors.AdmissionRejected` becomes a local HTTP 429
response with ``Retry-After``/``retry-after-ms`` (the SDK raises
``openai.RateLimitError``) and ``x-should-retry: false`` unless
``retry_rejected=True``.

One implementation serves both HTTP libraries: ``SJFTransport(inner, ...)`` is an
instance of the per-library subclass that also inherits that library's
``AsyncBaseTransport`` (:mod:`openai_sjf._httplib`), and raises / builds that library's
``PoolTimeout`` and ``Response``.

Supersede: a request superseded while queued (``x-sjf-supersede``, :mod:`sjf_core.predict._meta`)
gets a local HTTP 409 (the SDK raises ``openai.ConflictError``) at once; it is never sent.
Our ``x-sjf-*`` headers (but the idle probe's mark) are removed before any request is sent.

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

from sjf_core._errors import AdmissionRejected, Superseded
from sjf_core.predict._meta import HEADER_PREFIX

from ._arrivals import ArrivalMemory
from ._httplib import HTTPX, HttpLib, flavour, lib_of_transport
from ._orphans import DEFAULT_PROBE_TIMEOUT_S, OrphanProbe, reached_backend
from ._stream import AdmittedStream, ensure_sweeper, usage_tokens

log = logging.getLogger("openai_sjf")

#: (path suffix, endpoint name), checked in this order.
ENDPOINTS = (("/chat/completions", "chat/completions"), ("/completions", "completions"), ("/responses", "responses"))
#: Values of the ``on_close`` option (the first is the default).
ON_CLOSE = ("probe", "release", "drain")
#: Response header that marks a local admission rejection.
REJECTED_HEADER = "x-sjf-rejected"


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
_KEEP_HEADERS = ("x-sjf-probe",)


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


@dataclass
class TransportStats:
    """Counters of one :class:`SJFTransport` (requests, not prompt text)."""

    admitted: int = 0
    passed_through: int = 0  # not an admitted endpoint (GET, embeddings, ...)
    unparsable: int = 0
    rejected: int = 0
    queue_timeouts: int = 0
    internal_errors: int = 0
    superseded: int = 0  # answered 409: a newer request with the same supersede key
    orphans: int = 0  # slots handed to an idle probe (sjf_core.admission._probe)
    probes_ok: int = 0  # ... released when the probe returned
    probes_failed: int = 0  # ... left to the lease (or released) after a failed / timed-out probe


class SJFTransport:
    """SJF admission around an existing ``httpx``/``httpx2`` ``AsyncBaseTransport``.

    ``SJFTransport(inner, ...)`` returns an instance of ``SJFTransport.for_library(lib)``,
    ``lib`` being ``http_lib`` if given, else the library ``inner`` subclasses (``httpx``
    for a duck-typed transport); it is also an instance of ``lib.AsyncBaseTransport``.

    Args:
        inner: the transport to delegate to (kept, never replaced).
        scheduler: a :class:`sjf_core._scheduler.Scheduler`.
        retry_rejected: let the SDK retry a local 429 rejection (honouring
            ``Retry-After``); default False (``x-should-retry: false``).
        arrivals: the :class:`~openai_sjf._arrivals.ArrivalMemory` (shared by
            the transports of one wrapped client).
        on_close: what an SSE stream closed (or abandoned) before its end does with its
            slot: "probe" (default: close the connection, keep the slot until a
            1-token probe of the backend returns), "release" (close, release at once:
            for backends known to stop on disconnect) or "drain" (read the rest in the
            background, release at its end). Non-streamed answers always probe.
        probe_timeout_s: seconds an idle probe may take before the slot falls back
            to the queue's lease (or is released when there is none).
        probe_header_names: extra request header names copied to the probe (the
            client's default headers; credentials are always copied).
        http_lib: the :class:`~openai_sjf._httplib.HttpLib` of the client (default: from ``inner``).

    Raises:
        ValueError: an unknown ``on_close``.
    """

    #: the HTTP library of this flavour (set on the per-library subclasses)
    http: HttpLib = HTTPX

    def __new__(cls, inner=None, *args, http_lib: HttpLib | None = None, **kwargs):
        if cls is SJFTransport:
            cls = cls.for_library(http_lib or lib_of_transport(inner))
        return object.__new__(cls)

    @classmethod
    def for_library(cls, lib: HttpLib) -> type:
        """The subclass for HTTP library ``lib`` (inherits ``lib.AsyncBaseTransport``)."""
        return flavour(SJFTransport, lib, "AsyncBaseTransport")

    def __init__(self, inner, scheduler, retry_rejected: bool = False,
                 arrivals: ArrivalMemory | None = None, on_close: str = "probe",
                 http_lib: HttpLib | None = None, probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
                 probe_header_names=()):
        if on_close not in ON_CLOSE:
            raise ValueError(f"on_close must be one of {ON_CLOSE}, got {on_close!r}")
        self.inner = inner
        self.scheduler = scheduler
        self.retry_rejected = bool(retry_rejected)
        self.on_close = on_close
        if not float(probe_timeout_s) > 0:
            raise ValueError(f"probe_timeout_s must be > 0, got {probe_timeout_s!r}")
        self.probe_timeout_s = float(probe_timeout_s)
        self.probe_header_names = frozenset(h.lower() for h in probe_header_names)
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
    async def handle_async_request(self, request):
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
            raise self.http.PoolTimeout("timed out waiting for an SJF admission slot", request=request) from None
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
        except BaseException as exc:
            if reached_backend(exc, self.http):
                self._orphan(request, path, endpoint, ticket)  # the backend may still be answering
            else:
                ticket.release()
            raise
        try:
            encoding = response.headers.get("content-encoding", "identity").lower()
            read_usage = response.status_code == 200 and encoding in ("", "identity")
            if response.is_stream_consumed or response.is_closed:
                # A transport that returns an already-read body (e.g. Response(content=...)):
                # nothing is left to stream, so the backend is done.
                tokens = None
                if read_usage:
                    try:
                        tokens = usage_tokens(b"", response.content)
                    except Exception:  # closed without being read: no usage
                        tokens = None
                ticket.release(tokens)
                return response
            sse = response.headers.get("content-type", "").lower().startswith("text/event-stream")
            mode = self.on_close if sse else "probe"

            def orphan(loop=None, _req=request):
                self._orphan(_req, path, endpoint, ticket, loop)

            response.stream = AdmittedStream.for_library(self.http)(
                response.stream, ticket, asyncio.get_running_loop(), read_usage,
                drain=mode == "drain", orphan=None if mode == "release" else orphan)
        except BaseException:
            ticket.release()
            raise
        return response

    def _orphan(self, request, path: str, endpoint: str, ticket, loop=None) -> None:
        """Hand ``ticket`` to an idle probe of the request's backend (never raises)."""
        try:
            OrphanProbe(self.inner, self.http, request, backend_of(request.url, path, endpoint),
                        self.probe_timeout_s, self.probe_header_names, self.stats).hand_over(ticket, loop)
        except Exception:
            log.debug("openai_sjf: could not hand an orphaned slot to a probe; releasing it", exc_info=True)
            ticket.release()

    @staticmethod
    def _sweep_if_waiting(ticket) -> None:
        """A request about to wait: a slot holder may be an abandoned stream (see
        :func:`openai_sjf._stream.ensure_sweeper`). Never raises."""
        try:
            q = getattr(ticket, "queue", None)
            if q is not None and q.in_flight >= q.slots:
                ensure_sweeper(q)
        except Exception:
            log.debug("openai_sjf: could not start the abandoned-stream sweeper", exc_info=True)

    def _ticket(self, request, path: str, endpoint: str, headers: dict | None):
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

    def _superseded(self, request):
        """HTTP 409 (``openai.ConflictError``, not retried) for a request superseded while queued."""
        self.stats.superseded += 1
        body = json.dumps({"error": {
            "message": "superseded by a newer request with the same x-sjf-supersede key; never sent to the backend",
            "type": "conflict", "code": "sjf_superseded"}}).encode()
        return self.http.Response(409, headers={"content-type": "application/json", "x-should-retry": "false"},
                                  content=body, request=request)

    def _rejected(self, request, exc: AdmissionRejected):
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
        return self.http.Response(429, headers=headers, content=body, request=request)
