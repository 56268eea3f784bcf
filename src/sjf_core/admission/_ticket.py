"""Ticket states and the questions adapters ask of a ticket.

:class:`TicketState` (a ``str`` enum: a state compares equal to its name, e.g.
``TicketState.RUNNING == "running"``) is the lifecycle of one request's admission::

    NEW ─▶ QUEUED ─▶ RUNNING ─▶ RELEASED
             │  ╰──▶ CANCELLED | SUPERSEDED
    NEW ─▶ DEFERRED ─▶ QUEUED | REJECTED | CANCELLED      (overload control)
    NEW ─▶ REJECTED

Adapters ask :attr:`TicketView.running` (holds a slot: must be released exactly once),
:attr:`TicketView.waiting` (not yet granted nor refused) and :attr:`TicketView.finished`
(terminal: nothing to release) instead of comparing state strings.
"""

from __future__ import annotations

import enum


class TicketState(enum.StrEnum):
    """One admission's state (see the module docstring for the transitions)."""

    NEW = "new"
    QUEUED = "queued"
    DEFERRED = "deferred"
    RUNNING = "running"
    RELEASED = "released"
    CANCELLED = "cancelled"
    SUPERSEDED = "superseded"
    REJECTED = "rejected"


#: States of a ticket that waits: not yet granted a slot nor refused.
WAITING_STATES = frozenset({TicketState.NEW, TicketState.QUEUED, TicketState.DEFERRED})
#: Terminal states: the ticket holds nothing and never will.
FINISHED_STATES = frozenset({TicketState.RELEASED, TicketState.CANCELLED, TicketState.SUPERSEDED,
                             TicketState.REJECTED})


class TicketView:
    """The lifecycle questions, answered from ``self.state`` (a :class:`TicketState`)."""

    __slots__ = ()
    state: TicketState

    @property
    def running(self) -> bool:
        """True while the ticket holds a slot (it must be released exactly once)."""
        return self.state is TicketState.RUNNING

    @property
    def waiting(self) -> bool:
        """True while the ticket is new, queued or deferred (neither granted nor refused)."""
        return self.state in WAITING_STATES

    @property
    def finished(self) -> bool:
        """True once the ticket is released, cancelled, superseded or rejected."""
        return self.state in FINISHED_STATES
