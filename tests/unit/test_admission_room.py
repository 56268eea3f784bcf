"""The admission room's ownership rules: the ticket is the only writer of its state and each
transition checks itself and emits its event; the door, the grant path and the heartbeat
work alone, against small hosts that implement only their declared interfaces. (The room's
import graph: tests/unit/test_code_size.py.)"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from sjf_core.admission._door import Door
from sjf_core.admission._events import QueueStats
from sjf_core.admission._future_grant import FutureGrants
from sjf_core.admission._overload import OverloadConfig, OverloadControl
from sjf_core.admission._redis_heartbeat import Heartbeat
from sjf_core.admission._redis_wire import RedisQueueStats
from sjf_core.admission._ticket import Ticket, TicketState
from sjf_core.policy._entry import Entry
from sjf_core.policy._policies import make_policy
from sjf_core.policy._service import ServiceStats

SRC = Path(__file__).resolve().parents[2] / "src"


class Queue:
    """The least a ticket needs of its store: events, a name, a grant path, free/refill."""

    name = "b"

    def __init__(self):
        self.events: list[tuple] = []
        self.freed: list[tuple] = []
        self.grants = self

    def _emit(self, name, *args):
        self.events.append((name, *args[1:]) if name != "on_enqueue" else (name,))

    def _free(self, t, tokens, expired):
        self.freed.append((tokens, expired))
        return 1.5

    def _refill(self):
        self.events.append(("refill",))

    def withdraw(self, t):
        self.events.append(("withdraw",))


def ticket(q=None, seq=0) -> Ticket:
    return Ticket(q or Queue(), Entry(seq, 0.0))


# ---- the ticket's transitions ----------------------------------------------------------------
def test_each_transition_checks_itself_and_emits_its_event():
    q = Queue()
    t = ticket(q)
    t.enqueue()
    t.grant(0.25)
    assert t.running and q.events == [("on_enqueue",), ("on_dispatch", 0.25)]
    assert t.release(7) is True and t.release(7) is False  # exactly once
    assert q.freed == [(7, False)] and q.events[-2:] == [("on_complete", 1.5, 7), ("refill",)]
    for illegal in (t.enqueue, lambda: t.grant(0.0), t.defer, t.cancel, t.supersede, lambda: t.reject("x")):
        with pytest.raises(RuntimeError):
            illegal()
    assert t.state is TicketState.RELEASED


def test_expiry_releases_once_and_the_owner_release_then_returns_false():
    q = Queue()
    t = ticket(q)
    t.enqueue()
    t.grant(0.0)
    assert t.expire() is True and t.expire() is False
    assert q.freed == [(None, True)] and t.release() is False


@pytest.mark.parametrize("path, end, event", [
    (("defer", "reject"), TicketState.REJECTED, ("on_reject", "depth")),
    (("defer", "cancel"), TicketState.CANCELLED, ("on_cancel",)),
    (("enqueue", "supersede"), TicketState.SUPERSEDED, ("on_cancel",)),
    (("reject",), TicketState.REJECTED, ("on_reject", "depth")),
    (("defer", "enqueue"), TicketState.QUEUED, ("on_enqueue",)),
])
def test_door_paths(path, end, event):
    q = Queue()
    t = ticket(q)
    for step in path:
        getattr(t, step)(*(("depth",) if step == "reject" else ()))
    assert t.state is end and q.events[-1] == event


def test_a_cancel_with_nothing_to_take_back_emits_nothing():
    q = Queue()
    t = ticket(q)
    t.cancel(event=False)
    assert t.finished and q.events == []


def test_release_while_waiting_withdraws():
    q = Queue()
    t = ticket(q)
    t.enqueue()
    assert t.release() is False and q.events[-1] == ("withdraw",) and t.waiting


# ---- the door, alone -------------------------------------------------------------------------
class DoorHost:
    name = "b"

    def __init__(self, overload=None):
        self.stats = QueueStats()
        self.pending = make_policy("sjf", tau="off").new_pending()
        self.overload = overload
        self.clock = lambda: 0.0
        self.queued: list[Ticket] = []
        self.failed: list[tuple] = []

    def enqueue(self, t):
        self.pending.push(t.entry)
        self.queued.append(t)
        t.enqueue()

    def fail(self, t, exc):
        self.failed.append((t, type(exc).__name__))


def test_door_supersedes_the_older_queued_ticket_of_the_same_key():
    host = DoorHost()
    door = Door(host)
    old, new = ticket(seq=0), ticket(seq=1)
    for t in (old, new):
        t.entry.supersede = "k"
        door.admit(t)
    assert old.state is TicketState.SUPERSEDED and new.state is TicketState.QUEUED
    assert host.failed == [(old, "Superseded")] and host.stats.superseded == 1 and len(host.pending) == 1


def test_door_rejects_over_the_limit_and_defers_with_defer_s():
    control = OverloadControl(OverloadConfig(max_queue_depth=1), ServiceStats(), 1)
    host = DoorHost(control)
    door = Door(host)
    first, second = ticket(seq=0), ticket(seq=1)
    door.admit(first)
    door.admit(second)
    assert first.state is TicketState.QUEUED and second.state is TicketState.REJECTED
    assert host.failed == [(second, "AdmissionRejected")] and host.stats.rejected == 1


async def test_door_defers_then_admits_when_the_queue_drains():
    control = OverloadControl(OverloadConfig(max_queue_depth=1, defer_s=30.0), ServiceStats(), 1)
    host = DoorHost(control)
    door = Door(host)
    first, second = ticket(seq=0), ticket(seq=1)
    for t in (first, second):
        t.loop = asyncio.get_running_loop()
        door.admit(t)
    assert second.state is TicketState.DEFERRED and door.deferred == [second]
    host.pending.remove(first.entry)
    control.left(first.entry)
    door.wake()
    assert second.state is TicketState.QUEUED and door.deferred == [] and host.queued == [first, second]


# ---- the grant path (future), alone ------------------------------------------------------------
class FutureHost:
    lease_ttl_s = None
    in_flight = 0
    waiting = 0

    def __init__(self, grant_at_once: bool):
        self.clock = lambda: 0.0
        self.grant_at_once = grant_at_once
        self.grants: FutureGrants | None = None
        self.left: list[Ticket] = []

    def submit(self, t):
        t.enqueue()
        if self.grant_at_once:
            t.grant(0.0)
            self.grants.wake(t)

    def leave(self, t):  # called again when the cancelled wait unwinds: a no-op then
        if t.waiting:
            self.left.append(t)
            t.cancel()


async def test_future_grant_path_wakes_and_withdraws():
    host = FutureHost(grant_at_once=True)
    host.grants = FutureGrants(host)
    q = Queue()
    q.grants = host.grants
    t = ticket(q)
    await t.acquire()
    assert t.running
    with pytest.raises(RuntimeError):
        await t.acquire()  # used
    host.grant_at_once = False
    w = ticket(q, seq=1)
    task = asyncio.ensure_future(w.acquire())
    await asyncio.sleep(0)
    assert w.state is TicketState.QUEUED
    assert w.release() is False  # withdrawn: the waiter leaves
    with pytest.raises(asyncio.CancelledError):
        await task
    assert host.left == [w] and w.state is TicketState.CANCELLED


# ---- the heartbeat, alone --------------------------------------------------------------------------
class RedisHost:
    name = "b"
    waiter_ttl_s = redis_lease_ttl_s = 3.0
    retry_s = 1.0
    degraded = False
    redis_errors = (ConnectionError,)

    def __init__(self, reply):
        self.stats = RedisQueueStats()
        self.clock = lambda: 0.0
        self.reply = reply
        self.calls: list[list] = []

    async def run(self, ls, name, extra):
        self.calls.append([name, *extra])
        return self.reply

    def summary(self, r, at, ls=None):
        pass

    def mark_up(self):
        pass

    def mark_down(self, exc):
        pass


class Grant:
    def __init__(self, fence):
        self.fence, self.epoch, self.rid, self.dispatched_server, self.work = fence, "e0", "r", "0", "0"
        self.hold_deadline = None


class LoopState:
    def __init__(self):
        self.held: dict = {}
        self.waiting: dict = {}


async def test_heartbeat_counts_lost_leases_and_reasserts():
    host = RedisHost([1, 0, "inf", "", "e1", "ok", "lost", "re"])
    hb = Heartbeat(host)
    ls = LoopState()
    lost, back = ticket(), ticket(seq=1)
    lost.redis, back.redis = Grant("1"), Grant("2")
    ls.held = {"1": lost, "2": back}
    statuses = await hb.beat(ls, ["w1"], [lost, back])
    assert statuses == ["ok", "lost", "re"]
    assert host.calls[0][:4] == ["heartbeat", 1, "w1", 2]
    assert host.stats.lost_leases == 1 and "1" not in ls.held
    assert host.stats.reasserted == 1 and back.redis.epoch == "e1"


# ---- ownership rules, read from the source ---------------------------------------------------------
def _assigns_state(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        if any(isinstance(t, ast.Attribute) and t.attr == "state" for t in targets):
            return True
    return False


def test_only_the_ticket_assigns_ticket_state():
    writers = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if _assigns_state(p))
    assert writers == ["sjf_core/admission/_ticket.py"]
