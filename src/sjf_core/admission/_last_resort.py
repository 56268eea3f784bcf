"""The last-resort gate: where a request goes when its admission itself failed.

Contract (DESIGN.md invariant 5, "fail-open, never unbounded"): when making or waiting
for a request's ticket raises an internal fault — a store error, a Redis
misconfiguration or outage the store did not absorb, a predictor or memory fault, a bug
of ours — an adapter does not send the request unscheduled. It calls
:meth:`LastResort.admit` (or :meth:`LastResort.ticket` and ``acquire``) and waits at the
backend's gate: plain FIFO, in this process, no predictor, no store. The gate takes its
slots from the backend's :class:`~sjf_core.admission._ledger.SlotLedger`, the one count
of slots held in this process by every path, so a gated request never runs beside
``slots`` requests of the normal queue: the bound stays ``slots`` per backend.

A :class:`GateTicket` has the interface adapters use of a
:class:`~sjf_core.admission._ticket.Ticket`: ``acquire(timeout)``, ``release(tokens)``
(exactly once, idempotent, thread-safe), ``arelease``, ``renew``, ``running``,
``waiting``, ``finished``, ``entry`` (FCFS, unscored), ``queue`` (its :class:`Gate`), and
a lease (``lease_ttl_s``) as the safety net of a lost release.

Each gated request is counted by kind (:func:`fault_kind`: ``store``, ``predictor``,
``memory``, ``internal``) in :attr:`LastResort.counts`, in ``sjf_fail_open_total{reason=
"gate_<kind>"}`` (listeners with a ``fail_open(backend, reason)`` method), and logged at
ERROR once per kind (type and file:line, never the message: it could carry prompt text);
later ones at DEBUG. Every request tries its normal path first, so a transient fault
costs only the requests it hit.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
import traceback
from typing import Any, Callable

from sjf_core.admission._backend_url import normalise
from sjf_core.admission._ledger import SlotLedger
from sjf_core.admission._ticket import FINISHED_STATES, WAITING_STATES, TicketState
from sjf_core.policy._entry import Entry

log = logging.getLogger("sjf_core.admission._last_resort")

__all__ = ["LastResort", "Gate", "GateTicket", "fault_kind", "KINDS"]

#: Kinds of fault a gated request is counted under.
KINDS = ("store", "predictor", "memory", "internal")
#: A gate's counts in :meth:`LastResort.status` (each as ``gate_<name>``).
GATE_COUNTS = ("in_flight", "granted", "released", "expired")
_LOCK = threading.Lock()  # the RUNNING -> RELEASED step of every gate ticket
_SEQ = itertools.count()


def fault_kind(exc: BaseException | None) -> str:
    """Which part failed: ``store`` (redis-py or our Redis store in the traceback),
    ``predictor`` / ``memory`` (the deepest of our frames is in that room), else
    ``internal``. Never raises."""
    try:
        if exc is None:
            return "internal"
        if (type(exc).__module__ or "").startswith("redis"):
            return "store"
        files = [fr.filename.replace("\\", "/") for fr in traceback.extract_tb(exc.__traceback__)]
        if any("/redis/" in f or "/admission/_redis" in f for f in files):
            return "store"
        for f in reversed(files):
            if "/sjf_core/" in f:
                if "/predict/" in f or f.endswith("/_scoring.py"):
                    return "predictor"
                if "/memory/" in f or f.endswith("/_memory_wiring.py"):
                    return "memory"
                return "internal"
    except Exception:
        pass
    return "internal"


def _where(exc: BaseException | None) -> str:
    try:
        fr = traceback.extract_tb(exc.__traceback__)[-1]
        return f" at {fr.filename.rsplit('/', 1)[-1]}:{fr.lineno}"
    except Exception:
        return ""


class GateTicket:
    """One request's slot at a :class:`Gate` (module contract). Made by :meth:`Gate.ticket`."""

    __slots__ = ("queue", "kind", "entry", "state", "loop", "_lease", "_task", "__weakref__")

    def __init__(self, gate: "Gate", kind: str):
        self.queue = gate
        self.kind = kind
        self.entry = Entry(next(_SEQ), time.monotonic(), fallback=True)
        self.entry.payload = self
        self.state = TicketState.NEW
        self.loop: asyncio.AbstractEventLoop | None = None
        self._lease: asyncio.TimerHandle | None = None
        self._task: asyncio.Task | None = None  # the waiter, while QUEUED

    running = property(lambda self: self.state is TicketState.RUNNING)
    waiting = property(lambda self: self.state in WAITING_STATES)
    finished = property(lambda self: self.state in FINISHED_STATES)

    async def acquire(self, timeout: float | None = None) -> None:
        """Wait in FIFO order for a unit of the backend's ledger.

        Raises:
            asyncio.TimeoutError / asyncio.CancelledError: the wait ended; nothing is held.
            RuntimeError: the ticket was already used.
        """
        if self.state is not TicketState.NEW:
            raise RuntimeError(f"ticket already {self.state}")
        self.state = TicketState.QUEUED
        self.loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        try:
            await self.queue.ledger.take(timeout)
        except BaseException:
            with _LOCK:
                self.state = TicketState.CANCELLED
            raise
        finally:
            self._task = None
        with _LOCK:
            granted = self.state is TicketState.QUEUED  # else: released while waiting
            if granted:
                self.state = TicketState.RUNNING
                self.queue.in_flight += 1
                self.queue.granted += 1
        if not granted:
            self.queue.ledger.give()
            raise asyncio.CancelledError()
        self.entry.dispatched_at = time.monotonic()
        self._arm()

    def release(self, answer_tokens: int | None = None) -> bool:
        """Give the slot back once (True); later calls, or a ticket still waiting
        (withdrawn: its ``acquire`` raises CancelledError), return False."""
        with _LOCK:
            state = self.state
            if state is TicketState.RUNNING:
                self.state = TicketState.RELEASED
                self.queue.in_flight -= 1
                self.queue.released += 1
            elif state is TicketState.QUEUED:
                self.state = TicketState.CANCELLED
        if state is TicketState.QUEUED:
            task = self._task
            if task is not None:
                self._in_loop(task.cancel)
            return False
        if state is not TicketState.RUNNING:
            return False
        self._in_loop(self._disarm)
        self.queue.ledger.give()
        return True

    async def arelease(self, answer_tokens: int | None = None) -> bool:
        return self.release(answer_tokens)

    def renew(self) -> None:
        """Restart the lease (``lease_ttl_s`` of the gate)."""
        if self.state is TicketState.RUNNING:
            self._in_loop(self._arm)

    def _arm(self) -> None:
        self._disarm()
        ttl = self.queue.lease_ttl_s
        if ttl and self.state is TicketState.RUNNING and self.loop is not None:
            self._lease = self.loop.call_later(ttl, self._expire)

    def _disarm(self) -> None:
        if self._lease is not None:
            self._lease.cancel()
            self._lease = None

    def _expire(self) -> None:
        self._lease = None
        if self.release(None):
            self.queue.expired += 1
            log.warning("last-resort gate: lease expired on backend %s; slot force-released", self.queue.label)

    def _in_loop(self, fn) -> None:
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop or loop.is_closed():
            fn()
        else:
            loop.call_soon_threadsafe(fn)

    async def __aenter__(self) -> "GateTicket":
        await self.acquire()
        return self

    async def __aexit__(self, *exc) -> None:
        self.release()


class Gate:
    """The last-resort gate of one backend: FIFO on the backend's ledger."""

    store = "gate"

    def __init__(self, name: str, ledger: SlotLedger, lease_ttl_s: float | None):
        self.name = name
        self.ledger = ledger
        self.lease_ttl_s = lease_ttl_s
        self.in_flight = 0  # gate tickets holding a slot now
        self.granted = self.released = self.expired = 0  # released counts the lease's too
        try:
            from sjf_core.ext._labels import backend_label

            self.label = backend_label(name)
        except Exception:
            self.label = "backend"

    @property
    def slots(self) -> int:
        return self.ledger.slots

    @property
    def waiting(self) -> int:
        return self.ledger.waiting


class LastResort:
    """The gates and ledgers of one scheduler (one per backend), and their counts.

    Args:
        slots_for: ``slots_for(key) -> int``, the slots of a backend (its queue's).
        lease_ttl_s: the lease of a gate ticket (None: none).
        listeners: objects with an optional ``fail_open(backend, reason)`` (metrics).
    """

    def __init__(self, slots_for: Callable[[str], int], lease_ttl_s: float | None = None,
                 listeners: list | None = None):
        self.slots_for = slots_for
        self.lease_ttl_s = lease_ttl_s
        self.listeners = listeners if listeners is not None else []
        self.counts = dict.fromkeys(KINDS, 0)
        self._ledgers: dict[str, SlotLedger] = {}
        self._gates: dict[str, Gate] = {}
        self._logged: set[str] = set()
        self._lock = threading.Lock()

    def ledger(self, backend: Any) -> SlotLedger:
        """The backend's ledger (made on first use with ``slots_for(key)`` slots)."""
        key = normalise(backend or "default")
        led = self._ledgers.get(key)
        if led is None:
            with self._lock:
                led = self._ledgers.get(key)
                if led is None:
                    try:
                        slots = int(self.slots_for(key))
                    except Exception:
                        slots = 1
                    led = self._ledgers[key] = SlotLedger(key, slots)
        return led

    def resize(self, backend: Any, slots: int) -> None:
        """Set the bound of a backend's ledger (``slots: auto`` resolved)."""
        self.ledger(backend).resize(slots)

    def gate(self, backend: Any) -> Gate:
        """The backend's gate (made on first use)."""
        key = normalise(backend or "default")
        g = self._gates.get(key)
        if g is None:
            led = self.ledger(key)
            with self._lock:
                g = self._gates.setdefault(key, Gate(key, led, self.lease_ttl_s))
        return g

    def ticket(self, backend: Any, fault: BaseException | None = None) -> GateTicket:
        """A gate ticket for one request whose admission failed with ``fault``: counted
        and logged (module contract). Never raises for a bad ``fault``."""
        kind = fault_kind(fault)
        g = self.gate(backend)
        with self._lock:
            self.counts[kind] += 1
            first = kind not in self._logged
            self._logged.add(kind)
        name = type(fault).__name__ if fault is not None else "?"
        if first:
            log.error("admission fault (%s: %s%s) on backend %s: the request waits at the last-resort gate "
                      "(FIFO, %d slot(s) per backend, no predictor, no store); later %s faults are logged at DEBUG",
                      kind, name, _where(fault), g.label, g.slots, kind)
        else:
            log.debug("admission fault (%s: %s%s) on backend %s: last-resort gate", kind, name, _where(fault), g.label)
        for listener in list(self.listeners):
            fn = getattr(listener, "fail_open", None)
            if fn is not None:
                try:
                    fn(g.name, f"gate_{kind}")
                except Exception:
                    pass
        return GateTicket(g, kind)

    async def admit(self, backend: Any, fault: BaseException | None = None, timeout: float | None = None) -> GateTicket:
        """:meth:`ticket`, then wait for its slot (raises as :meth:`GateTicket.acquire`)."""
        t = self.ticket(backend, fault)
        await t.acquire(timeout)
        return t

    def status(self) -> dict:
        """``{"by_kind": {kind: n}, "backends": {key: {"slots", "held", "waiting",
        "gate_in_flight", "gate_granted", "gate_released", "gate_expired"}}}``: numbers only."""
        backends = {}
        for key, led in list(self._ledgers.items()):
            g = self._gates.get(key)
            backends[key] = {**led.status(), **{f"gate_{k}": getattr(g, k, 0) for k in GATE_COUNTS}}
        return {"by_kind": dict(self.counts), "backends": backends}
