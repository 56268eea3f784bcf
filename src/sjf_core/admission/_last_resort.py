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

A gated request holds the one :class:`~sjf_core.admission._ticket.Ticket` lifecycle (the
same transitions, exactly-once release, cancellation) on its backend's :class:`Gate`, a
store of the :class:`~sjf_core.admission._base.AdmissionQueue` contract whose grant path
(:class:`LedgerGrants`) waits FIFO on the ledger; its entry is unscored (FCFS) and a lease
(``lease_ttl_s``) is the safety net of a lost release.

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
import math
import threading
import time
import traceback
from typing import Any, Callable

from sjf_core._faults import describe, note_fault
from sjf_core.settings import normalise
from sjf_core.admission._base import AdmissionQueue
from sjf_core.admission._events import QueueStats
from sjf_core.admission._ledger import SlotLedger
from sjf_core.admission._ticket import NEW, QUEUED, Ticket
from sjf_core.settings import backend_label
from sjf_core.policy._entry import Entry

log = logging.getLogger("sjf_core.admission._last_resort")

__all__ = ["LastResort", "Gate", "LedgerGrants", "fault_kind", "KINDS"]

#: Kinds of fault a gated request is counted under.
KINDS = ("store", "predictor", "memory", "internal")
#: A gate's counts in :meth:`LastResort.status` (each as ``gate_<name>``).
GATE_COUNTS = ("in_flight", "granted", "released", "expired")
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
        note_fault(log, "the kind of an admission fault could not be told; counted as internal")
    return "internal"


class LedgerGrants:
    """The gate's grant path (:class:`~sjf_core.admission._ticket.GrantPath`): FIFO on the
    backend's ledger, the wait in a task of its own (so that ``release`` while waiting can
    end it), and the gate's lease."""

    __slots__ = ("gate", "_waits")

    def __init__(self, gate: "Gate"):
        self.gate = gate
        self._waits: dict[Ticket, asyncio.Task] = {}

    async def wait(self, t: Ticket, timeout: float | None) -> None:
        """Wait in FIFO order for a unit of the backend's ledger (see :meth:`Ticket.acquire`)."""
        if t.state is not NEW:
            raise RuntimeError(f"ticket already {t.state}")
        loop = t.loop = asyncio.get_running_loop()
        t.enqueue()
        task = self._waits[t] = loop.create_task(self.gate.ledger.take(timeout))
        try:
            await task
        except BaseException:
            if t.waiting:
                t.cancel(event=False)
            raise
        finally:
            self._waits.pop(t, None)
        if t.state is not QUEUED:  # withdrawn as the unit came: pass it on
            self.gate.ledger.give()
            raise asyncio.CancelledError()
        self.gate.hold(t)
        self.arm(t)

    def withdraw(self, t: Ticket) -> None:
        """Released while waiting: end the wait (``acquire`` raises CancelledError)."""
        t.in_loop(self._end_wait, t)

    def _end_wait(self, t: Ticket) -> None:
        task = self._waits.get(t)
        if task is not None and not task.done():
            task.cancel()
        elif t.waiting:
            t.cancel(event=False)

    def renew(self, t: Ticket) -> None:
        """Restart the lease (``lease_ttl_s`` of the gate)."""
        t.in_loop(self.arm, t)

    async def settled(self, t: Ticket) -> None:
        """Nothing to wait for: the unit is back when ``release`` returns on the ticket's loop."""

    def arm(self, t: Ticket) -> None:
        """(Re)start ``t``'s lease timer."""
        self.disarm(t)
        ttl = self.gate.lease_ttl_s
        if ttl and t.running and t.loop is not None:
            t._lease = t.loop.call_later(ttl, t.expire)

    @staticmethod
    def disarm(t: Ticket) -> None:
        if t._lease is not None:
            t._lease.cancel()
            t._lease = None


class Gate(AdmissionQueue):
    """The last-resort gate of one backend: an :class:`~sjf_core.admission._base.AdmissionQueue`
    whose tickets (the one :class:`~sjf_core.admission._ticket.Ticket` lifecycle) wait FIFO
    on the backend's ledger; unscored, no store, no listeners.

    Attributes: ``in_flight`` (gate tickets holding a slot now), ``granted`` / ``released``
    (slots granted and released, the lease's too), ``expired`` (leases that ran out),
    ``label`` (the backend as a metrics label).
    """

    store = "gate"
    policy = None

    def __init__(self, name: str, ledger: SlotLedger, lease_ttl_s: float | None):
        self.name = name
        self.ledger = ledger
        self.lease_ttl_s = lease_ttl_s
        self.clock = time.monotonic
        self.listeners: list = []
        self.stats = QueueStats()
        self._in_flight = 0
        self.granted = self.released = self.expired = 0  # released counts the lease's too
        self.grants = LedgerGrants(self)
        self.label = backend_label(name)

    @property
    def slots(self) -> int:
        return self.ledger.slots

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> int:
        return self.ledger.waiting

    @property
    def tau_s(self) -> float:
        return math.inf  # FIFO: no starvation guard

    def hold(self, t: Ticket) -> None:
        """``t`` took a unit of the ledger: it holds a slot now."""
        t.entry.dispatched_at = time.monotonic()
        self._in_flight += 1
        self.granted += 1
        t.grant(t.entry.dispatched_at - t.entry.arrival)

    def _scores_at_door(self) -> bool:
        return False

    def _new_ticket(self, prediction, meta, arrival, scorer) -> Ticket:
        return Ticket(self, Entry(next(_SEQ), time.monotonic(), fallback=True))

    def _free(self, t: Ticket, answer_tokens: int | None, expired: bool) -> float:
        self.grants.disarm(t)
        self._in_flight -= 1
        self.released += 1
        if expired:
            self.expired += 1
        self.ledger.give()
        return time.monotonic() - t.entry.dispatched_at


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
        #: called with ``(key, ledger)`` when a ledger is made: a model runner's is stacked
        #: under its box's cap there (the composition sets it; docs/boxes.md)
        self.on_ledger: Callable[[str, SlotLedger], None] | None = None

    def ledger(self, backend: Any) -> SlotLedger:
        """The backend's ledger (made on first use with ``slots_for(key)`` slots; ``on_ledger``
        is told)."""
        key = normalise(backend or "default")
        led, made = self._ledgers.get(key), False
        if led is None:
            with self._lock:
                led = self._ledgers.get(key)
                if led is None:
                    try:
                        slots = int(self.slots_for(key))
                    except Exception:
                        note_fault(log, f"slots of backend {backend_label(key)} unknown; its gate holds 1")
                        slots = 1
                    led = self._ledgers[key] = SlotLedger(key, slots)
                    made = True
        if made and self.on_ledger is not None:
            try:
                self.on_ledger(key, led)
            except Exception:
                note_fault(log, f"ledger of {backend_label(key)} not stacked under its box; its own slots hold")
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

    def ticket(self, backend: Any, fault: BaseException | None = None) -> Ticket:
        """A gate ticket for one request whose admission failed with ``fault``: counted
        and logged (module contract). Never raises for a bad ``fault``."""
        kind = fault_kind(fault)
        g = self.gate(backend)
        with self._lock:
            self.counts[kind] += 1
            first = kind not in self._logged
            self._logged.add(kind)
        where = describe(fault)
        if first:
            log.error("admission fault (%s: %s) on backend %s: the request waits at the last-resort gate "
                      "(FIFO, %d slot(s) per backend, no predictor, no store); later %s faults are logged at DEBUG",
                      kind, where, g.label, g.slots, kind)
        else:
            log.debug("admission fault (%s: %s) on backend %s: last-resort gate", kind, where, g.label)
        for listener in list(self.listeners):
            fn = getattr(listener, "fail_open", None)
            if fn is not None:
                try:
                    fn(g.name, f"gate_{kind}")
                except Exception:  # a metrics listener must never stop the gate
                    note_fault(log, "a fail-open counter of the gate failed")
        return g.ticket()

    async def admit(self, backend: Any, fault: BaseException | None = None, timeout: float | None = None) -> Ticket:
        """:meth:`ticket`, then wait for its slot (raises as :meth:`Ticket.acquire
        <sjf_core.admission._ticket.Ticket.acquire>`)."""
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
