"""The local queue's door: supersede, overload verdicts, deferral and rejection.

A mixin of :class:`~sjf_core.admission._local.LocalAdmissionQueue`; it runs on the queue's
loop only. Before a ticket enters the queue, :meth:`_Door._submit` removes the queued (or
deferred) ticket it supersedes, asks overload control
(:mod:`sjf_core.admission._overload`) for a verdict, and enqueues, defers (state DEFERRED,
re-checked when the queue drains and after ``defer_s``) or rejects it (state REJECTED,
``acquire`` raises :class:`~sjf_core._errors.AdmissionRejected`). An admitted ticket is
never dropped; a failing overload check admits.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sjf_core._errors import AdmissionRejected, Superseded
from sjf_core.admission._overload import Verdict
from sjf_core.admission._ticket import DEFERRED, QUEUED, TicketState

if TYPE_CHECKING:
    from sjf_core.admission._ticket import Ticket

log = logging.getLogger("sjf_core.admission._local")


class _Door:
    """Admission at the door of a local queue (see the module docstring)."""

    def _submit(self, t: "Ticket") -> None:
        """Admission: enqueue, defer or reject ``t`` (overload control)."""
        if (self._in_flight >= self.slots or len(self.pending) or self._deferred or self.overload is not None
                or self._throttler is not None):  # it would not be granted at once
            # the order matters now: score the newcomer and any request running unscored
            if t._scorer is not None:
                self._score(t)
            if self._running:
                for r in tuple(self._running):  # at most `slots` tickets
                    if r._scorer is not None:
                        self._score(r)
        if t.entry.supersede is not None:
            self._supersede_older(t)
        if self.overload is None:
            self._enqueue(t)
            return
        verdict = self._check(t)
        if verdict is None:
            self._enqueue(t)
        elif self.overload.config.defer_s > 0:
            t.state = DEFERRED
            self.stats.deferred += 1
            self._deferred.append(t)
            t._defer_timer = self._loop.call_later(self.overload.config.defer_s, self._defer_expired, t)
        else:
            self._reject(t, verdict)

    def _supersede_older(self, t: "Ticket") -> None:
        """``t`` replaces the queued ticket with its (tenant, supersede key), if any."""
        key = (t.entry.tenant, t.entry.supersede)
        old = self._supersede.get(key)
        self._supersede[key] = t
        if old is None or old is t or old.state not in (QUEUED, DEFERRED):
            return
        was_deferred = old.state == DEFERRED
        old.state = TicketState.SUPERSEDED
        if was_deferred:
            if old in self._deferred:
                self._deferred.remove(old)
            self._stop_defer_timer(old)
        elif self.pending.remove(old.entry) and self.overload is not None:
            self.overload.left(old.entry)
        self.stats.superseded += 1
        self._emit("on_cancel", old.entry)
        if old._fut is not None and not old._fut.done():
            old._fut.set_exception(Superseded(self.name))

    def _forget_supersede(self, t: "Ticket") -> None:
        key = (t.entry.tenant, t.entry.supersede)
        if self._supersede.get(key) is t:
            del self._supersede[key]

    def _check(self, t: "Ticket") -> Verdict | None:
        if self.overload is None:
            return None
        try:
            return self.overload.check(t.entry, len(self.pending), self.clock())
        except Exception:  # overload control must never fail a request: admit
            log.exception("overload check failed on backend %s; admitting", self.name)
            return None

    def _reject(self, t: "Ticket", verdict: Verdict) -> None:
        t.state = TicketState.REJECTED
        self.stats.rejected += 1
        if self.overload is not None:
            self.overload.rejected[verdict.klass] += 1
        self._emit("on_reject", t.entry, verdict.reason)
        if t._fut is not None and not t._fut.done():
            t._fut.set_exception(AdmissionRejected(verdict.retry_after_s, verdict.reason, self.name))

    @staticmethod
    def _stop_defer_timer(t: "Ticket") -> None:
        if t._defer_timer is not None:
            t._defer_timer.cancel()
            t._defer_timer = None

    def _defer_expired(self, t: "Ticket") -> None:
        if t.state != DEFERRED:
            return
        self._deferred.remove(t)
        t._defer_timer = None
        verdict = self._check(t)
        if verdict is None:
            t.state = QUEUED
            self._enqueue(t)
        else:
            self._reject(t, verdict)

    def _wake_deferred(self) -> None:
        """Re-check deferred tickets in arrival order after the queue drained a little."""
        if not self._deferred or self._waking:
            return
        self._waking = True
        try:
            for t in list(self._deferred):
                if t.state != DEFERRED or self._check(t) is not None:
                    continue
                self._deferred.remove(t)
                self._stop_defer_timer(t)
                t.state = QUEUED
                self._enqueue(t)
        finally:
            self._waking = False

    def _cancel_deferred(self, t: "Ticket") -> None:
        """A deferred ticket's waiter went away."""
        t.state = TicketState.CANCELLED
        if t in self._deferred:
            self._deferred.remove(t)
        self._stop_defer_timer(t)
        self.stats.cancelled += 1
        self._emit("on_cancel", t.entry)
