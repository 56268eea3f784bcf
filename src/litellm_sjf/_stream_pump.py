"""The stream pump, and the plugin's only contact with LiteLLM's (and its proxy's) internals.

Measured on the pinned LiteLLM 1.106.12; nothing else in :mod:`litellm_sjf` imports
``litellm`` or ``fastapi`` (but for the public ``CustomLogger`` base class).

* :meth:`StreamPump.relay(call, response) <StreamPump.relay>` — async generator: the items
  of LiteLLM's upstream ``response`` stream, unchanged and in order, read by a pump task so
  that a client that leaves cancels only the relay. An upstream error is re-raised to
  LiteLLM as is. The call's slot is released exactly once when the stream ends or aborts;
  if the client left mid-stream, the backend's ``on_disconnect`` decides: ``drain`` reads
  the answer to its end (at most ``drain_max_s``, LiteLLM's ``aclose`` of the stream
  deferred until then), ``probe`` hands the slot to the orphan policy's idle probe after
  the stream is closed, ``release`` frees it at once. Never raises an error of its own.
* :func:`backend_answered(exc) <backend_answered>` — True when a failed attempt got an
  HTTP error answer from the backend (not a timeout, a broken connection or a 408/499).
* :func:`refusal_http_error(exc) <refusal_http_error>` — the proxy's HTTP error for a
  deliberate refusal: 429 with ``Retry-After`` (whole seconds ≥ 1) or 409.
* :func:`quiet_superseded_log` — LiteLLM logs every exception of a request at ERROR on its
  ``"LiteLLM Proxy"`` logger (1.106.12 and 1.110.2: ``log_llm_api_exception``; only a client
  disconnect, 499, goes to INFO), so a superseded request, which is the editor working as
  meant, would read as an error. A filter on that logger turns exactly our 409 record into an
  INFO record (dropped where INFO is off, the default). Idempotent; never raises.
* :func:`proxy_config_path` / :func:`user_content_types` — the running proxy's config
  file; the content part types LiteLLM accepts in user messages.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
import time
from typing import Any, AsyncIterator

from sjf_core import AdmissionRejected, Superseded, note_fault

from ._calls import Call, CallRegistry, stream_chunk_tokens
from ._stats import HandlerStats

log = logging.getLogger("litellm_sjf")

_END = object()


class _Err:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException):
        self.exc = exc


# ---- LiteLLM's exceptions, config and types ---------------------------------------------
def backend_answered(exc: Any) -> bool:
    """See the module docstring. Never raises."""
    try:
        import litellm

        if isinstance(exc, (litellm.Timeout, litellm.APIConnectionError)):
            return False
    except Exception:  # LiteLLM's exception types not importable: treated as "not answered"
        note_fault(log, "LiteLLM's exception types unavailable; a failure is not taken as answered")
        return False
    code = getattr(exc, "status_code", None)
    return isinstance(code, int) and 400 <= code < 600 and code not in (408, 499)


def refusal_http_error(exc: BaseException) -> Exception:
    """The ``fastapi.HTTPException`` the proxy answers for :class:`AdmissionRejected` (429)
    or :class:`Superseded` (409); TypeError for anything else."""
    from fastapi import HTTPException

    if isinstance(exc, AdmissionRejected):
        retry = max(1, int(math.ceil(exc.retry_after_s)))
        return HTTPException(status_code=429, detail=f"SJF admission rejected: {exc.reason}; retry after {retry} s",
                             headers={"Retry-After": str(retry)})
    if isinstance(exc, Superseded):
        return HTTPException(status_code=409, detail=SUPERSEDED_DETAIL)
    raise TypeError(f"not a refusal: {type(exc).__name__}")


SUPERSEDED_DETAIL = ("SJF: superseded by a newer request with the same x-sjf-supersede key; it was never sent "
                     "to the backend")


class _SupersededAtInfo(logging.Filter):
    """LiteLLM's ERROR record of our 409 becomes INFO (see :func:`quiet_superseded_log`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        try:  # by its text: LiteLLM's own filter on that logger may have turned the args into strings
            ours = f"409: {SUPERSEDED_DETAIL}" in record.getMessage()
        except (TypeError, ValueError):  # a malformed record: logging's handler reports it as usual
            return True
        if not ours:
            return True
        record.levelno, record.levelname = logging.INFO, "INFO"
        record.exc_info = record.exc_text = None
        return logging.getLogger(record.name).isEnabledFor(logging.INFO)


def quiet_superseded_log() -> None:
    """Install :class:`_SupersededAtInfo` on LiteLLM's proxy logger, once."""
    logger = logging.getLogger("LiteLLM Proxy")
    if not any(isinstance(f, _SupersededAtInfo) for f in logger.filters):
        logger.addFilter(_SupersededAtInfo())


def proxy_config_path() -> str | None:
    """The config file the running proxy was started with (None outside a proxy)."""
    ps = sys.modules.get("litellm.proxy.proxy_server")
    path = getattr(ps, "user_config_file_path", None) if ps is not None else None
    return path if isinstance(path, str) and path else None


def user_content_types() -> frozenset:
    """Content part types LiteLLM accepts in a user message (empty if unknown)."""
    try:
        from litellm.types.llms.openai import ValidUserMessageContentTypes

        return frozenset(ValidUserMessageContentTypes)
    except Exception:  # an other LiteLLM: no part-type check
        note_fault(log, "LiteLLM's user content types unknown; no part-type check", level=logging.INFO)
        return frozenset()


# ---- deferring LiteLLM's close of the upstream stream -----------------------------------
def _defer_aclose(response: Any, replacement) -> tuple | None:
    """Make LiteLLM's close of the upstream stream call ``replacement`` instead.

    On client disconnect the proxy calls ``aclose()`` on the stream it handed to the
    iterator hook; we receive it wrapped in a slotted boundary object that forwards
    attributes to ``_source``. Shadow ``aclose`` on the first object that takes an
    instance attribute. Returns ``(obj, had_own)`` to undo it, or None when the stream
    cannot be patched (then no drain).
    """
    obj = response
    for _ in range(4):
        if obj is None or not hasattr(obj, "aclose"):
            return None
        try:
            had_own = "aclose" in object.__getattribute__(obj, "__dict__")
        except AttributeError:
            had_own = None
        if had_own is not None:
            if had_own:
                return None
            try:
                object.__setattr__(obj, "aclose", replacement)
                return (obj, had_own)
            except (AttributeError, TypeError):
                return None
        try:
            obj = object.__getattribute__(obj, "_source")
        except AttributeError:
            return None
    return None


def _undo_defer(closer: tuple | None) -> None:
    if closer is not None:
        try:
            object.__delattr__(closer[0], "aclose")
        except AttributeError:
            pass


async def _restore_aclose(closer: tuple | None) -> None:
    """Undo :func:`_defer_aclose` and close the stream for real."""
    if closer is None:
        return
    _undo_defer(closer)
    await closer[0].aclose()


async def _close_after(pump: asyncio.Task, response: Any) -> None:
    """Wait for a cancelled stream pump, then close the upstream stream (so a backend
    that stops on disconnect sees it before the idle probe queues behind it)."""
    await asyncio.wait({pump})
    close = getattr(response, "aclose", None)
    if close is not None:
        await close()


# ---- the pump ---------------------------------------------------------------------------
class StreamPump:
    """Relays admitted streams (module docstring). ``orphans``: the
    :class:`~litellm_sjf._orphans.OrphanPolicy` that probes a stream whose client left."""

    def __init__(self, settings: Any, calls: CallRegistry, stats: HandlerStats, orphans: Any):
        self.settings = settings
        self.calls = calls
        self.stats = stats
        self.orphans = orphans
        self._drain_warned: set[str] = set()

    async def relay(self, call: Call, response: Any) -> AsyncIterator[Any]:
        """Yield ``response``'s items; hold ``call``'s slot until the stream ends or aborts."""
        call.stream = True
        queue: asyncio.Queue = asyncio.Queue()
        mode = self.settings.on_disconnect_for(call.backend)
        drain = mode == "drain"
        closer = None  # (object LiteLLM will close, its real aclose) while we may drain
        close_requested = asyncio.Event()
        pump: asyncio.Task | None = None
        if drain:

            async def deferred_aclose():
                # LiteLLM closes the upstream stream when the client leaves. While the
                # answer is still coming, the pump drains it and closes it at the end.
                if pump is not None and not pump.done():
                    self._start_drain(call)
                    close_requested.set()
                    return
                await _restore_aclose(closer)

            closer = _defer_aclose(response, deferred_aclose)
            if closer is None:  # cannot keep LiteLLM from closing it: probe instead
                self._warn_undrainable(call.backend)
                drain, mode = False, "probe"
        pump = self.calls.spawn(self._pump(call, response, queue, closer, close_requested))
        finished = False
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    finished = True
                    break
                if isinstance(item, _Err):
                    finished = True
                    raise item.exc
                yield item
        finally:
            if not finished and not pump.done():
                # the client went away mid-stream
                if drain:
                    self._start_drain(call)
                elif mode == "probe" and call.probe is not None:
                    # the backend may go on generating for nobody: hold the slot until it is idle
                    call.orphaned = True
                    pump.cancel()
                    self.orphans.probe(call, before=_close_after(pump, response))
                else:
                    pump.cancel()

    def _start_drain(self, call: Call) -> None:
        if not call.draining:
            call.draining = True
            self.stats.drained += 1

    def _warn_undrainable(self, backend: str) -> None:
        self.stats.drain_unavailable += 1
        if backend not in self._drain_warned:
            from sjf_core import backend_label

            self._drain_warned.add(backend)
            log.warning("litellm_sjf: the streams of backend %s cannot be drained (on_disconnect: drain); "
                        "orphaned streams are probed instead", backend_label(backend))

    async def _pump(self, call: Call, response, queue: asyncio.Queue, closer, close_requested) -> None:
        tokens = None
        ttl = self.settings.lease_ttl_s
        last_renew = time.monotonic()
        drain_started = None
        try:
            it = response.__aiter__()
            while True:
                try:
                    item = await it.__anext__()
                except StopAsyncIteration:
                    break
                n = stream_chunk_tokens(item)
                if n is not None:
                    tokens = n
                now = time.monotonic()
                if now - last_renew > ttl / 4:
                    call.ticket.renew()
                    last_renew = now
                if call.draining:
                    drain_started = drain_started or now
                    if now - drain_started > self.settings.drain_max_s:
                        self.stats.drain_aborted += 1
                        break
                else:
                    queue.put_nowait(item)
            queue.put_nowait(_END)
        except asyncio.CancelledError:
            queue.put_nowait(_END)
            raise
        except BaseException as exc:  # upstream error: the relay re-raises it for LiteLLM
            queue.put_nowait(_Err(exc))
        finally:
            try:
                if closer is not None:
                    if close_requested.is_set():
                        await _restore_aclose(closer)
                    else:
                        _undo_defer(closer)
            except Exception:
                log.debug("closing a drained stream failed", exc_info=True)
            if not call.orphaned:  # an orphaned stream is released by its idle probe
                call.draining = False
                self.calls.release(call, tokens, "stream")


async def passthrough(response: Any) -> AsyncIterator[Any]:
    """``response``'s items, untouched (a stream the plugin did not admit)."""
    async for item in response:
        yield item


__all__ = ["StreamPump", "passthrough", "backend_answered", "refusal_http_error", "proxy_config_path",
           "user_content_types", "quiet_superseded_log", "SUPERSEDED_DETAIL"]
