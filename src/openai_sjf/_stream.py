"""A response body stream that holds an admission slot until it is closed.

:class:`AdmittedStream` wraps the ``AsyncByteStream`` (``httpx`` or ``httpx2``)
returned by the user's transport; ``AdmittedStream.for_library(lib)`` is the
subclass that is also a ``lib.AsyncByteStream`` (:mod:`openai_sjf._httplib`). The slot (:class:`sjf_core.admission._local.Ticket`) is released exactly once
(``Ticket.release`` is idempotent and thread-safe) when the first of these happens:

* the body is read to the end (non-streaming calls: as soon as the last byte
  arrives; ``stream=True``: at the end of the SSE stream);
* the stream is closed (``aclose()`` by httpx, the SDK, ``async with``);
* reading raises (dropped connection, read timeout, cancellation);
* the stream object is garbage-collected without being closed (abandoned):
  a :func:`weakref.finalize` hands the release to the event loop with
  ``call_soon_threadsafe`` (never inline inside the garbage collector).
  An SDK stream left with ``async for ... break`` sits in reference cycles
  (the SDK's async generators), so only the cyclic collector frees it, which
  may not run for minutes in a quiet process. While a request waits for a slot
  held by a stream that nobody has read for ``IDLE_S`` seconds, the transport
  asks the collector to run (:func:`sweep_while_waiting`, at most once per
  ``SWEEP_S`` seconds per process), so an abandoned stream cannot block the
  queue (a stream being read is never affected).

With an ``orphan`` callback (``on_close="probe"``, the default, and every non-SSE
body), a body closed, abandoned or broken before its end closes its connection and
hands the slot to that callback instead of releasing it: the transport holds the slot
until a 1-token probe of the backend returns (:mod:`openai_sjf._orphans`).

With ``on_close="drain"`` a body closed (or abandoned) before its end is first
read to its end in a background task, and only then released: the slot then
stays taken exactly as long as the backend works, for backends that keep
generating after a disconnect (DESIGN.md "Real backends"; paper §3.4).

At release, the true answer length is read from ``usage`` (``completion_tokens``
for chat/completions, ``output_tokens`` for responses) in the last two chunks
received, by a bytes regex: no body is buffered or copied beyond a few KiB of
tail. (The SDK stops reading an SSE stream at ``data: [DONE]`` and closes it, so
the tail is also read on close; a stream cut before its final ``usage`` chunk
gives None.) It feeds the τ estimate (``release(answer_tokens)``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import re
import weakref

from ._httplib import flavour, lib_of

log = logging.getLogger("openai_sjf")

#: Bytes of the body's tail searched for ``usage``.
USAGE_TAIL_BYTES = 4096
_USAGE_KEYS = (b'"completion_tokens"', b'"output_tokens"')
_NUMBER_RE = re.compile(rb"\s*:\s*(\d{1,9})")


def usage_tokens(prev: bytes, last: bytes) -> int | None:
    """Answer tokens from the ``usage`` object in the tail of a response body.

    Args:
        prev, last: the last two body chunks (raw bytes, identity encoding);
            ``prev`` is used only when ``last`` is shorter than ``USAGE_TAIL_BYTES``.

    Returns:
        The last ``completion_tokens`` (chat/completions) or ``output_tokens``
        (responses) integer in the final ``USAGE_TAIL_BYTES`` of the body, or None.
        A JSON string value cannot contain a bare ``"key"`` (its quotes would be
        escaped), so answer text never matches.
    """
    if len(last) >= USAGE_TAIL_BYTES:
        tail = last[-USAGE_TAIL_BYTES:]
    else:
        tail = prev[len(last) - USAGE_TAIL_BYTES:] + last if prev else last
    for key in _USAGE_KEYS:
        i = tail.rfind(key)
        if i >= 0:
            m = _NUMBER_RE.match(tail, i + len(key))
            if m is not None:
                return int(m.group(1))
    return None


#: Terminal SSE events: chat/completions and completions end with ``data: [DONE]``,
#: responses with one of these events. Matched only at a line start: answer text sits
#: inside JSON strings, which cannot hold a raw newline.
_SSE_END_RE = re.compile(rb"(?:^|\n)(?:data: \[DONE\]|event: response\.(?:completed|incomplete|failed))\s*(?:\n|$)")


def sse_ended(prev: bytes, last: bytes) -> bool:
    """True if the tail of a body (its last two chunks, raw bytes) holds the terminal
    event of an OpenAI SSE stream (``data: [DONE]``, or ``event: response.completed`` /
    ``incomplete`` / ``failed``): the backend has finished even if the reader stopped
    before the connection's end of file (the SDK stops at ``[DONE]`` and closes)."""
    tail = last if len(last) >= USAGE_TAIL_BYTES else (prev[-USAGE_TAIL_BYTES:] + last)
    return _SSE_END_RE.search(tail[-USAGE_TAIL_BYTES:]) is not None


#: Drain tasks in progress (strong references, so they are not garbage-collected).
_DRAINS: set = set()

#: A stream not read for this many seconds may be abandoned (see :func:`sweep_while_waiting`).
IDLE_S = 0.5
#: Least seconds between two garbage collections asked for by waiters (process-wide).
SWEEP_S = 1.0
#: Streams holding a slot and not finished yet (weak: an abandoned one must still be collectable).
_OPEN: "weakref.WeakSet[AdmittedStream]" = weakref.WeakSet()
_last_sweep = -math.inf


def idle_streams(queue, now: float) -> bool:
    """True if a stream holding a slot of ``queue`` has not been read for ``IDLE_S`` s."""
    for st in list(_OPEN):
        if st._state == "open" and st._ticket.queue is queue and now - st.last_read >= IDLE_S:
            return True
    return False


def _collect(now: float) -> None:
    global _last_sweep
    if now - _last_sweep < SWEEP_S:
        return
    _last_sweep = now
    gc.collect()  # finds abandoned SDK streams in reference cycles; their finalizers release on the loop


#: One sweeper task per queue while it has waiters (weak keys: queues may go away).
_SWEEPERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def ensure_sweeper(queue) -> None:
    """Called for a request that is about to wait for a slot of ``queue``: make sure one
    :func:`sweep_while_waiting` task runs for it (on the running loop)."""
    t = _SWEEPERS.get(queue)
    if t is None or t.done():
        try:
            _SWEEPERS[queue] = asyncio.get_running_loop().create_task(sweep_while_waiting(queue))
        except TypeError:  # a queue object that cannot be weakly referenced: no sweeper
            pass


async def sweep_while_waiting(queue) -> None:
    """While ``queue`` has waiters: if a slot holder is a stream nobody has read for
    ``IDLE_S`` s, ask the garbage collector to run (at most once per ``SWEEP_S`` s per
    process), so that an abandoned stream is found and its finalizers release the slot.
    A stream being read is never touched."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(0)  # the waiter that started us enqueues first
    while getattr(queue, "waiting", 0) > 0:
        now = loop.time()
        if idle_streams(queue, now):
            _collect(now)
        await asyncio.sleep(SWEEP_S / 2)


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
        tokens = None
    finally:
        try:
            await inner.aclose()
        except BaseException:
            pass
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
        pass
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
        _OPEN.add(self)

    @property
    def ticket(self):
        """The admission ticket this stream holds."""
        return self._ticket

    def _done(self) -> None:
        if self._state in ("draining", "orphaned"):
            return
        self._state = "done"
        _OPEN.discard(self)
        self._finalizer.detach()
        tokens = None
        if self._read_usage and self._last:
            try:
                tokens = usage_tokens(self._prev, self._last)
            except Exception:
                tokens = None
            self._prev = self._last = b""
        self._ticket.release(tokens)

    def _begin_orphan(self) -> None:
        """The body ended early: the ``orphan`` callback takes over the slot."""
        if self._state != "open":
            return
        self._state = "orphaned"
        _OPEN.discard(self)
        self._finalizer.detach()
        self._prev = self._last = b""
        self._orphan(self._loop)

    def _begin_drain(self) -> None:
        if self._state != "open":
            return
        self._state = "draining"
        _OPEN.discard(self)
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
