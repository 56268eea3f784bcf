"""The local queue's door: supersede, overload verdicts, deferral and rejection.

:class:`Door` is a collaborator of :class:`~sjf_core.admission._local.LocalAdmissionQueue`,
given its host (:class:`DoorHost`: what it may use of the queue) and run on the queue's loop
only. Before a ticket enters the queue, :meth:`Door.admit` removes the queued (or deferred)
ticket it supersedes, asks overload control (:mod:`sjf_core.admission._overload`) for a
verdict, and enqueues, defers (:meth:`Ticket.defer <sjf_core.admission._ticket.Ticket.defer>`,
re-checked when the queue drains and after ``defer_s``) or rejects it
(:meth:`Ticket.reject <sjf_core.admission._ticket.Ticket.reject>`; ``acquire`` raises
:class:`~sjf_core._errors.AdmissionRejected`). An admitted ticket is never dropped; a failing
overload check admits. The door owns the deferred tickets and the supersede index.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable, Protocol

from sjf_core._errors import AdmissionRejected, Superseded
from sjf_core.admission._overload import Verdict
from sjf_core.admission._ticket import DEFERRED, QUEUED

if TYPE_CHECKING:
    from sjf_core.admission._events import QueueStats
    from sjf_core.admission._overload import OverloadControl
    from sjf_core.admission._ticket import Ticket
    from sjf_core.policy._pending import PendingQueue

log = logging.getLogger("sjf_core.admission._local")


class DoorHost(Protocol):
    """What the door uses of its queue (the local store implements it)."""

    name: str
    stats: "QueueStats"
    pending: "PendingQueue"
    overload: "OverloadControl | None"
    clock: Callable[[], float]

    def enqueue(self, t: "Ticket") -> None:
        """Put an admitted ticket in the queue (and grant a free slot)."""

    def fail(self, t: "Ticket", exc: BaseException) -> None:
        """Make ``t``'s ``acquire`` raise ``exc`` (it is no longer waiting)."""


class Door:
    """Admission at the door of a local queue (see the module docstring).

    Attributes: ``deferred`` (tickets held by overload control, arrival order).
    """

    __slots__ = ("host", "deferred", "_timers", "_supersede", "_waking")

    def __init__(self, host: DoorHost):
        self.host = host
        self.deferred: list[Ticket] = []
        self._timers: dict[Ticket, asyncio.TimerHandle] = {}  # each deferred ticket's defer_s timer
        self._supersede: dict[tuple, Ticket] = {}
        self._waking = False

    def admit(self, t: "Ticket") -> None:
        """Enqueue, defer or reject the NEW ticket ``t`` (supersede first, then overload control)."""
        host = self.host
        if t.entry.supersede is not None:
            self._supersede_older(t)
        overload = host.overload
        if overload is None:
            host.enqueue(t)
            return
        verdict = self._check(t)
        if verdict is None:
            host.enqueue(t)
        elif overload.config.defer_s > 0:
            t.defer()
            host.stats.deferred += 1
            self.deferred.append(t)
            self._timers[t] = t.loop.call_later(overload.config.defer_s, self._defer_expired, t)
        else:
            self._reject(t, verdict)

    def forget(self, t: "Ticket") -> None:
        """``t`` left the queue (dispatched or cancelled): a later request may use its supersede key."""
        key = (t.entry.tenant, t.entry.supersede)
        if self._supersede.get(key) is t:
            del self._supersede[key]

    def wake(self) -> None:
        """Re-check deferred tickets in arrival order after the queue drained a little."""
        if not self.deferred or self._waking:
            return
        self._waking = True
        try:
            for t in list(self.deferred):
                if t.state != DEFERRED or self._check(t) is not None:
                    continue
                self.deferred.remove(t)
                self._stop_defer_timer(t)
                self.host.enqueue(t)
        finally:
            self._waking = False

    def cancel_deferred(self, t: "Ticket") -> None:
        """A deferred ticket's waiter went away."""
        if t in self.deferred:
            self.deferred.remove(t)
        self._stop_defer_timer(t)
        self.host.stats.cancelled += 1
        t.cancel()

    # ---- internals ----------------------------------------------------------------------
    def _supersede_older(self, t: "Ticket") -> None:
        """``t`` replaces the queued ticket with its (tenant, supersede key), if any."""
        key = (t.entry.tenant, t.entry.supersede)
        old = self._supersede.get(key)
        self._supersede[key] = t
        if old is None or old is t or old.state not in (QUEUED, DEFERRED):
            return
        host = self.host
        if old.state == DEFERRED:
            if old in self.deferred:
                self.deferred.remove(old)
            self._stop_defer_timer(old)
        elif host.pending.remove(old.entry) and host.overload is not None:
            host.overload.left(old.entry)
        host.stats.superseded += 1
        old.supersede()
        host.fail(old, Superseded(host.name))

    def _check(self, t: "Ticket") -> Verdict | None:
        host = self.host
        if host.overload is None:
            return None
        try:
            return host.overload.check(t.entry, len(host.pending), host.clock())
        except Exception:  # overload control must never fail a request: admit
            log.exception("overload check failed on backend %s; admitting", host.name)
            return None

    def _reject(self, t: "Ticket", verdict: Verdict) -> None:
        host = self.host
        host.stats.rejected += 1
        if host.overload is not None:
            host.overload.rejected[verdict.klass] += 1
        t.reject(verdict.reason)
        host.fail(t, AdmissionRejected(verdict.retry_after_s, verdict.reason, host.name))

    def _stop_defer_timer(self, t: "Ticket") -> None:
        timer = self._timers.pop(t, None)
        if timer is not None:
            timer.cancel()

    def _defer_expired(self, t: "Ticket") -> None:
        if t.state != DEFERRED:
            return
        self.deferred.remove(t)
        self._timers.pop(t, None)
        verdict = self._check(t)
        if verdict is None:
            self.host.enqueue(t)
        else:
            self._reject(t, verdict)
