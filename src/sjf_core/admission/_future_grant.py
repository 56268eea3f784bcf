"""The local store's grant path: one asyncio future per waiter, the rate limit, the hold limit.

:class:`FutureGrants` implements :class:`~sjf_core.admission._ticket.GrantPath` for
:class:`~sjf_core.admission._local.LocalAdmissionQueue`, given its host (:class:`FutureHost`).
A waiter gets a future, passes the door (``host.submit``) and awaits the future, which the
queue's dispatch resolves (:meth:`FutureGrants.wake`) or the door fails
(:meth:`FutureGrants.fail`). After the grant, a dispatch rate limit (asyncio-throttle) may
still hold it, and a hold-limit timer (``lease_ttl_s``) force-releases a ticket that is neither
released nor renewed in time (:meth:`Ticket.expire <sjf_core.admission._ticket.Ticket.expire>`).
A waiter that leaves (timeout, cancellation, ``release`` while waiting) leaves the queue at
once, or hands back a slot granted meanwhile (DESIGN.md invariant 7).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Protocol

from sjf_core.admission._ticket import NEW, RUNNING

if TYPE_CHECKING:
    from sjf_core.admission._ticket import Ticket

_get_running_loop = asyncio.get_running_loop


class FutureHost(Protocol):
    """What the future grant path uses of its queue (the local store implements it)."""

    lease_ttl_s: float | None
    clock: Callable[[], float]
    in_flight: int
    waiting: int

    def submit(self, t: "Ticket") -> None:
        """Take a NEW ticket through the door (it may be granted at once)."""

    def leave(self, t: "Ticket") -> None:
        """A waiting ticket's owner went away: take it out of the queue (or the door)."""


class FutureGrants:
    """The local grant path (see the module docstring).

    Args:
        host: the queue. throttler: an asyncio-throttle ``Throttler`` (the rate limit), or None.

    Attributes: ``loop`` (the loop the queue runs on; rebound when idle), ``throttler``.
    """

    __slots__ = ("host", "throttler", "loop")

    def __init__(self, host: FutureHost, throttler: Any = None):
        self.host = host
        self.throttler = throttler
        self.loop: asyncio.AbstractEventLoop | None = None

    async def wait(self, t: "Ticket", timeout: float | None) -> None:
        """Wait until ``t`` holds a slot (see :meth:`~sjf_core.admission._ticket.Ticket.acquire`)."""
        if t.state is not NEW or t._fut is not None:
            raise RuntimeError(f"ticket already {t.state}")
        host = self.host
        loop = _get_running_loop()
        # Rebind when idle: tests and CLIs may run several event loops in turn.
        if self.loop is not loop and (self.loop is None or self.loop.is_closed()
                                      or (host.in_flight == 0 and host.waiting == 0)):
            self.loop = loop
        loop = t.loop = self.loop
        fut = t._fut = loop.create_future()
        throttler = self.throttler
        started = loop.time() if throttler is not None else 0.0
        host.submit(t)
        try:
            if fut.done():
                fut.result()  # raises AdmissionRejected when refused
            elif timeout is None:
                await fut
            else:
                await asyncio.wait_for(asyncio.shield(fut), timeout)
            if throttler is not None and t.state is RUNNING:
                left = None if timeout is None else max(0.0, timeout - (loop.time() - started))
                await asyncio.wait_for(throttler.acquire(), left)
                t.entry.dispatched_at = host.clock()  # service is measured from the send
                self.arm(t)
        except BaseException:
            self.abandon(t)
            raise

    def withdraw(self, t: "Ticket") -> None:
        """``t`` is waiting and its owner released it: make its ``acquire`` leave."""
        t.in_loop(self.abandon, t)

    def renew(self, t: "Ticket") -> None:
        """Restart ``t``'s hold limit."""
        t.in_loop(self.arm, t)

    async def settled(self, t: "Ticket") -> None:
        """Nothing to wait for: a local release is processed when it is made."""

    # ---- what the queue calls -------------------------------------------------------------
    @staticmethod
    def gone(t: "Ticket") -> bool:
        """True when ``t``'s waiter left already (cancelled while being popped)."""
        fut = t._fut
        return fut is None or fut.done()

    def wake(self, t: "Ticket") -> None:
        """``t`` was just granted: start its hold limit and resume its waiter."""
        if self.host.lease_ttl_s:
            self.arm(t)
        t._fut.set_result(True)

    @staticmethod
    def fail(t: "Ticket", exc: BaseException) -> None:
        """Make ``t``'s ``acquire`` raise ``exc`` (superseded or rejected at the door)."""
        fut = t._fut
        if fut is not None and not fut.done():
            fut.set_exception(exc)

    def abandon(self, t: "Ticket") -> None:
        """The waiter went away: leave the queue, or hand back a slot granted meanwhile."""
        fut = t._fut
        if fut is not None and fut.done() and not fut.cancelled() and t.state is RUNNING:
            t.release()
            return
        if fut is not None and not fut.done():
            fut.cancel()
        self.host.leave(t)

    def arm(self, t: "Ticket") -> None:
        """(Re)start ``t``'s hold-limit timer (``lease_ttl_s``; none when unset)."""
        if t._lease is not None:
            t._lease.cancel()
            t._lease = None
        ttl = self.host.lease_ttl_s
        if ttl and t.state is RUNNING and self.loop is not None:
            t._lease = self.loop.call_later(ttl, t.expire)

    @staticmethod
    def disarm(t: "Ticket") -> None:
        """Stop ``t``'s hold-limit timer (it was released)."""
        if t._lease is not None:
            t._lease.cancel()
            t._lease = None
