"""The transport that admits OpenAI generation requests through the SJF queue.

Contract: :class:`SJFTransport` wraps the user's ``httpx``/``httpx2`` ``AsyncBaseTransport``
(kept, never replaced) and delegates every request to it. Only ``POST`` to ``.../chat/completions``,
``.../completions`` or ``.../responses`` is admitted (queue key: the URL without the endpoint,
i.e. the client's ``base_url``); everything else passes straight through. Per admitted request:

1. a ticket from ``Scheduler.lazy_ticket`` (the body is parsed and scored only when there is an
   order to decide; ``arrival`` survives SDK retries, :mod:`openai_sjf._arrivals`);
2. wait at most the request's ``pool`` timeout (else ``read``; None: no limit); expiry raises the
   library's ``PoolTimeout`` (SDK: ``openai.APITimeoutError``); cancellation leaves the queue;
3. send; the body is wrapped in :class:`~openai_sjf._stream.AdmittedStream`, which releases the
   slot when the body is done. An error before the request left releases at once; an
   **orphan** (it may have reached the backend, its answer was not read to the end) keeps the
   slot until a 1-token probe returns (:mod:`openai_sjf._orphans`).

Local replies (:mod:`openai_sjf._replies`): overload (``AdmissionRejected``) -> HTTP 429
(``openai.RateLimitError``, not retried unless ``retry_rejected``); superseded while queued ->
HTTP 409 (``openai.ConflictError``), never sent. Our ``x-sjf-*`` headers (but the probe mark) are
never sent on. Fail-open (DESIGN.md invariant 5): an unreadable body is admitted unscored (FCFS
among equals); an internal fault of admission waits at the backend's last-resort gate (FIFO, the
same slots, :mod:`sjf_core.admission._last_resort`), counted in :attr:`SJFTransport.stats`
(``internal_errors``, ``gated``), logged without prompt text. Details: docs/openai_sjf.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

from sjf_core import AdmissionRejected, LastResort, Superseded, note_fault

from ._arrivals import ArrivalMemory
from ._httplib import HTTPX, HttpLib, flavour, lib_of_transport
from ._options import WrapOptions
from ._orphans import OrphanProbe, reached_backend
from ._replies import rejected_response, superseded_response
from ._requests import api_key_of, backend_of, endpoint_of, queue_wait_limit, sjf_headers, strip_sjf_headers
from ._stream import AdmittedStream
from ._sweeper import ensure_sweeper
from ._tail import usage_tokens

log = logging.getLogger("openai_sjf")



@dataclass
class TransportStats:
    """Counters of one :class:`SJFTransport` (requests, not prompt text)."""

    admitted: int = 0
    passed_through: int = 0  # not an admitted endpoint (GET, embeddings, ...)
    unparsable: int = 0
    rejected: int = 0
    queue_timeouts: int = 0
    internal_errors: int = 0  # internal faults of admission ...
    gated: int = 0  # ... each admitted by the last-resort gate (FIFO, slots kept), never unscheduled
    superseded: int = 0  # answered 409: a newer request with the same supersede key
    orphans: int = 0  # slots handed to an idle probe (sjf_core.admission._probe)
    probes_ok: int = 0  # ... released when the probe returned
    probes_failed: int = 0  # ... released at the orphan's estimated end after failed / timed-out probes


class SJFTransport:
    """SJF admission around an existing ``httpx``/``httpx2`` ``AsyncBaseTransport``.

    ``SJFTransport(inner, ...)`` returns an instance of ``SJFTransport.for_library(lib)``,
    ``lib`` being ``http_lib`` if given, else the library ``inner`` subclasses (``httpx``
    for a duck-typed transport); it is also an instance of ``lib.AsyncBaseTransport``.

    Args:
        inner: the transport to delegate to (kept, never replaced).
        scheduler: a :class:`sjf_core._scheduler.Scheduler`.
        options: the wrapper's :class:`~openai_sjf._options.WrapOptions` (checked there:
            ``retry_rejected``, ``on_close``, ``probe_timeout_s``).
        arrivals: the :class:`~openai_sjf._arrivals.ArrivalMemory` (shared by
            the transports of one wrapped client).
        probe_header_names: extra request header names copied to the probe (the
            client's default headers; credentials are always copied).
        http_lib: the :class:`~openai_sjf._httplib.HttpLib` of the client (default: from ``inner``).
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

    def __init__(self, inner, scheduler, options: WrapOptions = WrapOptions(), *,
                 arrivals: ArrivalMemory | None = None, http_lib: HttpLib | None = None, probe_header_names=()):
        self.inner = inner
        self.scheduler = scheduler
        self.options = options
        self.retry_rejected = options.retry_rejected
        self.on_close = options.on_close
        self.probe_timeout_s = options.probe_timeout_s
        self.probe_header_names = frozenset(h.lower() for h in probe_header_names)
        self.arrivals = arrivals or ArrivalMemory()
        self.stats = TransportStats()
        self._spare: LastResort | None = None

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
        ticket = await self._admit(request, path, endpoint, headers)
        if isinstance(ticket, self.http.Response):  # a local reply (429 / 409)
            return ticket
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
                        note_fault(log, "usage of an answer unreadable; released without its length",
                                   level=logging.DEBUG)
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

    async def _admit(self, request, path: str, endpoint: str, headers: dict | None):
        """Wait for the request's slot: its ticket, or a local 429 / 409 reply. An internal
        fault of the queue waits at the backend's last-resort gate instead (FIFO, the same
        slots; :mod:`sjf_core.admission._last_resort`). Raises ``PoolTimeout`` when the
        wait limit passes, ``CancelledError`` when the caller leaves."""
        limit = queue_wait_limit(request)
        ticket = None
        try:
            ticket = self._ticket(request, path, endpoint, headers)
            self._sweep_if_waiting(ticket)
            await ticket.acquire(limit)
            return ticket
        except (asyncio.TimeoutError, TimeoutError):
            self.stats.queue_timeouts += 1
            raise self.http.PoolTimeout("timed out waiting for an SJF admission slot", request=request) from None
        except AdmissionRejected as exc:
            return self._rejected(request, exc)
        except Superseded:
            return self._superseded(request)
        except Exception as exc:
            fault = exc
        self.stats.internal_errors += 1
        self.stats.gated += 1
        if ticket is not None:
            ticket.release()  # whatever it holds (acquire already left the queue)
        gate = self._last_resort().ticket(backend_of(request.url, path, endpoint), fault)
        try:
            await gate.acquire(limit)
        except (asyncio.TimeoutError, TimeoutError):
            self.stats.queue_timeouts += 1
            raise self.http.PoolTimeout("timed out waiting for an SJF admission slot", request=request) from None
        return gate

    def _last_resort(self) -> LastResort:
        """The scheduler's gates, or the transport's own for a scheduler without them."""
        lr = getattr(self.scheduler, "last_resort", None)
        if isinstance(lr, LastResort):
            return lr
        if self._spare is None:
            slots = getattr(self.scheduler, "slots_for", None)
            self._spare = LastResort(slots if callable(slots) else (lambda key: 1))
        return self._spare

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
        return superseded_response(self.http, request)

    def _rejected(self, request, exc: AdmissionRejected):
        """HTTP 429 (``openai.RateLimitError``) for a request rejected by overload control."""
        self.stats.rejected += 1
        return rejected_response(self.http, request, exc, self.retry_rejected)
