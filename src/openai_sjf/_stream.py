"""A response body stream that holds an admission slot until the body is done.

Contract: :class:`AdmittedStream` wraps the ``AsyncByteStream`` (``httpx`` or ``httpx2``) the
user's transport returned; ``AdmittedStream.for_library(lib)`` is the subclass that is also a
``lib.AsyncByteStream`` (:mod:`openai_sjf._httplib`). Its ticket (state running) is released
exactly once (``Ticket.release`` is idempotent and thread-safe), with the answer tokens read
from the body's tail (:mod:`openai_sjf._tail`, None when absent), at the first of: body read to
its end; ``aclose()``; reading raised; the stream garbage-collected unclosed (a
:func:`weakref.finalize` hands the release to the loop with ``call_soon_threadsafe``, never
inline in the collector; :mod:`openai_sjf._sweeper` makes the collector run while requests wait).

A body that ends early (closed, abandoned or broken before its end, and not just after the SSE
terminal event) does not release: with an ``orphan`` callback (``on_close="probe"``, every
non-SSE body) it closes its connection and hands the slot to that callback (the idle probe,
:mod:`openai_sjf._orphans`); with ``drain`` it is read to its end in a background task first.
The rules and their reasons: docs/openai_sjf.md ("Streaming", "Orphaned calls").
"""

from __future__ import annotations

import asyncio
import logging
import weakref

from sjf_core import note_fault

from ._httplib import flavour, lib_of
from ._sweeper import IDLE_S, track, untrack
from ._tail import sse_ended, usage_tokens

log = logging.getLogger("openai_sjf")

#: Drain tasks in progress (strong references, so they are not garbage-collected).
_DRAINS: set = set()


async def _drain(it, inner, ticket, prev: bytes, last: bytes, read_usage: bool) -> None:
    """Read the rest of a closed-early body to its end, then close it and release the slot."""
    tokens = None
    try:
        async for chunk in it:
            if read_usage:
                prev, last = last, chunk
        if read_usage and last:
            tokens = usage_tokens(prev, last)
    except BaseException:  # the connection failed or we were cancelled: release anyway
        note_fault(log, "draining a closed stream ended early; its slot is released", level=logging.DEBUG)
        tokens = None
    finally:
        try:
            await inner.aclose()
        except BaseException:
            note_fault(log, "closing a drained stream failed", level=logging.DEBUG)
        ticket.release(tokens)


def _start_drain(loop, it, inner, ticket, prev=b"", last=b"", read_usage=False) -> None:
    task = loop.create_task(_drain(it, inner, ticket, prev, last, read_usage))
    _DRAINS.add(task)
    task.add_done_callback(_DRAINS.discard)


async def _close_then_orphan(inner, orphan, loop) -> None:
    """Close an abandoned body's connection, then hand its slot to ``orphan`` (never raises)."""
    try:
        await inner.aclose()
    except BaseException:
        note_fault(log, "closing an abandoned stream failed; its slot goes to the probe", level=logging.DEBUG)
    finally:
        orphan(loop)


def _start_orphan(loop, inner, orphan) -> None:
    task = loop.create_task(_close_then_orphan(inner, orphan, loop))
    _DRAINS.add(task)
    task.add_done_callback(_DRAINS.discard)


def _release_abandoned(ticket, loop: asyncio.AbstractEventLoop | None, inner=None, orphan=None,
                       drain: bool = False) -> None:
    """Finalizer of an abandoned stream: release, drain or hand to ``orphan`` on the loop,
    never inside the GC."""
    if not ticket.running:
        return
    log.debug("response stream abandoned without close; releasing its admission slot")
    if loop is not None and not loop.is_closed():
        try:
            if drain and inner is not None:  # on_close="drain": best effort, a fresh read of the rest
                loop.call_soon_threadsafe(lambda: _start_drain(loop, inner.__aiter__(), inner, ticket))
            elif orphan is not None and inner is not None:  # hold the slot until the backend is idle
                loop.call_soon_threadsafe(lambda: _start_orphan(loop, inner, orphan))
            else:
                loop.call_soon_threadsafe(ticket.release)
            return
        except RuntimeError:  # loop closed meanwhile
            pass
    ticket.release()


class AdmittedStream:
    """An ``AsyncByteStream`` that releases ``ticket`` when the body is done.

    ``AdmittedStream(inner, ...)`` is an instance of ``AdmittedStream.for_library(lib)``
    for the library of ``inner`` (``httpx`` for a duck-typed stream).

    Args:
        inner: the original response stream (an ``httpx``/``httpx2`` ``AsyncByteStream``).
        ticket: the admission ticket holding the slot (state "running").
        loop: the event loop the request runs on (for GC-time release and drains).
        read_usage: look for ``usage`` at the end of the body (False for
            compressed bodies or error statuses).
        drain: ``on_close="drain"``: a body closed before its end is read to its
            end in a background task, and the slot is released only then, so
            that a backend which keeps generating after a disconnect
            (llama-cpp-python) never runs more than ``slots`` requests. The
            caller's close returns at once.
        orphan: called as ``orphan(loop)`` (on the loop) when the body ends early
            without ``drain``: closed or abandoned before its end, or reading
            raised. It takes over the slot (the transport's idle probe). None:
            release at once (``on_close="release"``).
    """

    def __new__(cls, inner=None, *args, **kwargs):
        if cls is AdmittedStream:
            cls = cls.for_library(lib_of(inner, "AsyncByteStream"))
        return object.__new__(cls)

    @classmethod
    def for_library(cls, lib) -> type:
        """The subclass for HTTP library ``lib`` (inherits ``lib.AsyncByteStream``)."""
        return flavour(AdmittedStream, lib, "AsyncByteStream")

    def __init__(self, inner, ticket, loop: asyncio.AbstractEventLoop | None, read_usage: bool = True,
                 drain: bool = False, orphan=None):
        self._inner = inner
        self._ticket = ticket
        self._loop = loop
        self._read_usage = read_usage
        self._drain = bool(drain) and loop is not None
        self._orphan = orphan if loop is not None else None
        self._it = None
        self._state = "open"  # open -> done | draining | orphaned
        self._prev = self._last = b""
        self._finalizer = weakref.finalize(self, _release_abandoned, ticket, loop,
                                           inner if (self._drain or self._orphan) else None, self._orphan,
                                           self._drain)
        self._finalizer.atexit = False
        #: loop time of the last chunk handed to the reader (or of the response start)
        self.last_read = loop.time() if loop is not None else 0.0
        track(self)

    def is_idle(self, queue, now: float) -> bool:
        """True while this stream holds a slot of ``queue`` and has not been read for ``IDLE_S`` s."""
        return self._state == "open" and self._ticket.queue is queue and now - self.last_read >= IDLE_S

    @property
    def ticket(self):
        """The admission ticket this stream holds."""
        return self._ticket

    def _done(self) -> None:
        if self._state in ("draining", "orphaned"):
            return
        self._state = "done"
        untrack(self)
        self._finalizer.detach()
        tokens = None
        if self._read_usage and self._last:
            try:
                tokens = usage_tokens(self._prev, self._last)
            except Exception:
                note_fault(log, "usage of a stream unreadable; released without its answer length")
                tokens = None
            self._prev = self._last = b""
        self._ticket.release(tokens)

    def _begin_orphan(self) -> None:
        """The body ended early: the ``orphan`` callback takes over the slot."""
        if self._state != "open":
            return
        self._state = "orphaned"
        untrack(self)
        self._finalizer.detach()
        self._prev = self._last = b""
        self._orphan(self._loop)

    def _begin_drain(self) -> None:
        if self._state != "open":
            return
        self._state = "draining"
        untrack(self)
        self._finalizer.detach()
        it = self._it if self._it is not None else self._inner.__aiter__()
        _start_drain(self._loop, it, self._inner, self._ticket, self._prev, self._last, self._read_usage)

    async def __aiter__(self):
        it = self._it = self._inner.__aiter__()
        early = failed = False
        try:
            async for chunk in it:
                self._prev, self._last = self._last, chunk  # the tail: usage, and did the answer end
                if self._loop is not None:
                    self.last_read = self._loop.time()
                try:
                    yield chunk
                except GeneratorExit:  # the reader stopped before the end
                    early = True
                    raise
        except BaseException:  # reading raised (broken connection, timeout, cancellation)
            failed = True
            raise
        finally:
            if early and sse_ended(self._prev, self._last):
                self._done()  # the reader stopped after the terminal event: the backend is done
            elif early and self._drain:
                self._begin_drain()
            elif (early or failed) and self._orphan is not None:
                self._begin_orphan()
            else:
                self._done()

    async def aclose(self) -> None:
        if self._drain and self._state == "open":
            self._begin_drain()  # the drain task closes the inner stream when the body ends
            return
        if self._state == "draining":
            return
        if self._orphan is not None and self._state == "open" and not sse_ended(self._prev, self._last):
            try:
                await self._inner.aclose()  # a backend that stops on disconnect stops now
            finally:
                self._begin_orphan()
            return
        try:
            await self._inner.aclose()
        finally:
            self._done()
