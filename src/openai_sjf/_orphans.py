"""Exact release of an orphaned slot: hold it until a probe of the backend returns.

Contract: :meth:`OrphanProbe.hand_over(ticket, loop) <OrphanProbe.hand_over>` takes the slot
of a request that may have reached the backend but whose answer was not read to the end
(cancelled or timed out while the backend answers, a broken connection, a stream closed
early or abandoned with ``on_close="probe"``). It sends one request of our own through the
same transport, base URL and credentials (``max_tokens: 1``, the fixed one-character prompt
of :mod:`sjf_core.admission._probe`, never the user's text, marked ``x-sjf-probe``) and
releases the ticket when it returns (one probe in flight per backend, shared by concurrent
orphans: :meth:`sjf_core.admission._probe.ProbeGate.wait_idle`). When the probe fails (a
non-2xx answer, a broken connection) or takes over ``timeout_s`` seconds, the slot is
released at the orphan's estimated end (its expected answer, capped by its ``max_tokens``,
at the queue's measured seconds per token), or earlier when a retried probe returns
(:mod:`sjf_core.admission._orphan_hold`). Never raises; never loses the release.

The probe carries the orphan's URL prefix and query (e.g. Azure's ``api-version``), its
``model`` field, and of its headers only the credential and identity ones
(:data:`PROBE_HEADERS`) plus the client's default header names. It goes to the transport,
below the ``AsyncClient`` (the user's event hooks never see it), and is counted in
:class:`~openai_sjf._transport.TransportStats` (``orphans``, ``probes_ok``,
``probes_failed``) and ``sjf_backend_probes_total``. Why a probe: docs/openai_sjf.md
("Orphaned calls: exact release") and DESIGN.md "Real backends".
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Iterable

from sjf_core import PROBE_HEADER, hold_until_idle, note_fault, orphan_deadline, probe_gate, probe_request
from sjf_core.config import DEFAULT_PROBE_TIMEOUT_S

log = logging.getLogger("openai_sjf")

#: Headers of the orphan copied to its probe (credentials and identity), lower case.
PROBE_HEADERS = frozenset({"authorization", "api-key", "openai-organization", "openai-project", "user-agent"})
#: Headers never copied (the probe sets its own body and framing).
_NEVER = frozenset({"content-type", "content-length", "transfer-encoding", "accept", "accept-encoding", "host",
                    "idempotency-key", "connection", "cookie"})
#: Exception names (in either HTTP library) raised before a request was sent: nothing to probe.
NOT_SENT = ("ConnectError", "ConnectTimeout", "PoolTimeout", "UnsupportedProtocol")

_TASKS: set = set()  # probes in progress (strong references)


def reached_backend(exc: BaseException, lib) -> bool:
    """False if ``exc`` (from sending a request with HTTP library ``lib``) means the request
    never left this process (connect error or timeout, pool timeout); True otherwise
    (cancellation, read/write timeouts, broken connections: the backend may be working)."""
    for name in NOT_SENT:
        cls = getattr(lib.module, name, None)
        if cls is not None and isinstance(exc, cls):
            return False
    return True


class ProbeFailed(Exception):
    """The probe got an answer that is not a 2xx (e.g. unknown model): it proves nothing."""


class OrphanProbe:
    """The probe for one orphaned request, and the hand-over of its slot.

    Args:
        inner: the transport the orphan went through (the probe uses it too).
        lib: the :class:`~openai_sjf._httplib.HttpLib` of that transport.
        request: the orphaned request (its URL, ``model`` and credential headers are read).
        backend: the queue key (URL prefix before the endpoint, no query).
        timeout_s: seconds before the slot falls back to the lease.
        header_names: extra header names (lower case) to copy, e.g. the client's defaults.
        stats: a :class:`~openai_sjf._transport.TransportStats` to count in (or None).
    """

    def __init__(self, inner, lib, request, backend: str, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
                 header_names: Iterable[str] = (), stats=None):
        self.inner = inner
        self.lib = lib
        self.request = request
        self.backend = backend
        self.timeout_s = float(timeout_s)
        self.header_names = PROBE_HEADERS | {h.lower() for h in header_names}
        self.stats = stats

    def _build(self, timeout_s: float | None = None):
        model = None
        try:
            body = json.loads(self.request.content)
            if isinstance(body, dict) and isinstance(body.get("model"), str):
                model = body["model"]
        except Exception:  # unreadable body: a probe without a model (servers with one model accept it)
            note_fault(log, "orphan's body unreadable; the probe names no model", level=logging.DEBUG)
            model = None
        url, payload = probe_request(self.backend, "openai", model)
        headers = {k: v for k, v in self.request.headers.items()
                   if k.lower() in self.header_names and k.lower() not in _NEVER}
        headers[PROBE_HEADER] = "1"
        t = self.timeout_s if timeout_s is None else float(timeout_s)
        return self.lib.Request("POST", url, params=self.request.url.params, headers=headers, json=payload,
                                extensions={"timeout": {"connect": min(t, 10.0), "read": t, "write": min(t, 10.0),
                                                        "pool": min(t, 10.0)}})

    async def send(self, timeout_s: float | None = None) -> None:
        """POST the probe through the orphan's transport and read its answer to the end
        (read timeout ``timeout_s``, default the probe timeout).

        Raises:
            ProbeFailed: a non-2xx answer. Transport errors propagate.
        """
        response = await self.inner.handle_async_request(self._build(timeout_s))
        try:
            async for _ in response.stream:
                pass
        finally:
            await response.stream.aclose()
        if not 200 <= response.status_code < 300:
            raise ProbeFailed(response.status_code)

    async def release_when_idle(self, ticket) -> None:
        """Hold ``ticket`` until the probe returns, or (probes failing) until the orphan's
        estimated end, then release it (:mod:`sjf_core.admission._orphan_hold`)."""
        outcome = None
        try:
            lease = getattr(getattr(ticket, "queue", None), "lease_ttl_s", None)
            outcome = await hold_until_idle(probe_gate(self.backend), self._sender, self.timeout_s,
                                            lambda: orphan_deadline(ticket, self._max_tokens()),
                                            renew=ticket.renew, renew_every_s=(lease or 240.0) / 4)
        except BaseException:  # cancelled (loop shutting down): release now (counted below)
            note_fault(log, "idle probe wait ended early; the slot is released", level=logging.DEBUG)
            outcome = None
        finally:
            if self.stats is not None:
                if outcome in ("probe", "retry"):
                    self.stats.probes_ok += 1
                else:
                    self.stats.probes_failed += 1
            ticket.release()

    def _sender(self, timeout_s: float):
        """The probe's ``send`` with a read timeout of ``timeout_s`` (retries are shorter)."""
        async def send() -> None:
            await self.send(timeout_s)

        return send

    def _max_tokens(self):
        """The orphan's answer cap from its body (``max_tokens`` and its aliases), or None."""
        try:
            body = json.loads(self.request.content)
            for k in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
                if isinstance(body.get(k), (int, float)):
                    return body[k]
        except Exception:  # not JSON, not an object, a streamed body: no cap known
            note_fault(log, "an orphan's max_tokens could not be read; its estimate is uncapped", level=logging.DEBUG)
        return None

    def hand_over(self, ticket, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Start :meth:`release_when_idle` for ``ticket`` on ``loop`` (default: the running
        loop). If no loop can run it, release at once. Never raises."""
        if self.stats is not None:
            self.stats.orphans += 1
        try:
            loop = loop or asyncio.get_running_loop()
            task = loop.create_task(self.release_when_idle(ticket))
        except Exception:
            log.debug("openai_sjf: could not start the idle probe; releasing the slot", exc_info=True)
            ticket.release()
            return
        _TASKS.add(task)
        task.add_done_callback(_TASKS.discard)
