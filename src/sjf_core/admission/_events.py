"""Statistics and events of an admission queue.

:class:`QueueStats` holds a queue's counters (int; monotonic except the high-water marks
``max_in_flight`` and ``max_waiting``). :class:`QueueEvents` is the listener interface
(metrics, plugins): override what you need; a listener that raises is logged and ignored,
it never breaks admission. Events name the queue and the request's
:class:`~sjf_core.policy._entry.Entry` (never prompt text).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sjf_core.policy._entry import Entry

log = logging.getLogger("sjf_core.admission")

EVENT_NAMES = ("on_enqueue", "on_dispatch", "on_complete", "on_cancel", "on_reject")


@dataclass
class QueueStats:
    """Counters of one admission queue (monotonic except gauges)."""

    enqueued: int = 0
    dispatched: int = 0
    released: int = 0
    cancelled: int = 0
    promoted: int = 0
    expired: int = 0
    fallback: int = 0
    max_in_flight: int = 0
    rejected: int = 0
    deferred: int = 0
    max_waiting: int = 0
    superseded: int = 0


class EventSource(Protocol):
    """What a listener may read of the queue that emits an event: every
    :class:`~sjf_core.admission._base.AdmissionQueue` has it (this module names the queue by
    this, so that the contract module may import the events and not the reverse)."""

    name: str
    store: str
    slots: int
    stats: QueueStats

    @property
    def in_flight(self) -> int: ...

    @property
    def waiting(self) -> int: ...

    @property
    def tau_s(self) -> float: ...


class QueueEvents:
    """Listener interface for queue events; override what you need (metrics, plugins)."""

    def on_enqueue(self, queue: EventSource, entry: "Entry") -> None: ...

    def on_dispatch(self, queue: EventSource, entry: "Entry", wait_s: float) -> None: ...

    def on_complete(self, queue: EventSource, entry: "Entry", service_s: float, answer_tokens: int | None) -> None: ...

    def on_cancel(self, queue: EventSource, entry: "Entry") -> None: ...

    def on_reject(self, queue: EventSource, entry: "Entry", reason: str) -> None:
        """Overload control refused ``entry`` (it never entered the queue)."""


class Emitter:
    """The listeners' bound methods per event name, skipping the no-op defaults of
    :class:`QueueEvents`. The list of listeners is public and may change at any time:
    :meth:`calls` re-collects when it did (an identity-first list compare, cheap)."""

    __slots__ = ("listeners", "seen", "by_name")

    def __init__(self, listeners: list):
        self.listeners = listeners
        self.seen: list = list(listeners)
        self.by_name: dict[str, tuple] = {}

    def calls(self, listeners: list, name: str) -> tuple:
        """The bound ``name`` methods of ``listeners`` to call (a tuple, possibly empty)."""
        if listeners is not self.listeners or self.seen != listeners:
            self.listeners, self.seen, self.by_name = listeners, list(listeners), {}
        default = getattr(QueueEvents, name, None)
        fns = []
        for listener in self.seen:
            fn = getattr(listener, name, None)
            if fn is not None and getattr(fn, "__func__", None) is not default:
                fns.append(fn)
        fns = self.by_name[name] = tuple(fns)
        return fns


def emit_failed(fn, name: str) -> None:
    """Log the exception of listener method ``fn`` (event ``name``)."""
    log.exception("queue listener %s.%s failed", type(getattr(fn, "__self__", fn)).__name__, name)
