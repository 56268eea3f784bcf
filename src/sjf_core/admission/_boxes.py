"""Many-model boxes in this process: a queue per model runner, one box per backend URL.

Contract (docs/boxes.md):

* A request for model ``m`` on the backend whose queue key is ``url`` waits in the queue of
  the **runner** ``runner_key(url, m)`` (``"<url>|<m>"``, :func:`runner_key`), with that
  runner's own ``slots`` and slot ledger (the last-resort gate shares it, as for any key).
* The runners of one URL form a :class:`LiveBox`. A box-wide ``cap`` (a strictly serial
  server, or a server whose kind is not known yet) is a ledger *above* each runner's
  (:meth:`~sjf_core.admission._ledger.SlotLedger.stack`): every path that holds a runner's
  unit holds one of the box's, so the cap holds on every path.
* A runner's queue asks the box before each grant (:meth:`BoxGate.may_start`): the box lets
  it start when its model can run now (cap, loaded set: :meth:`~sjf_core.policy._box.Box.allows`)
  and, when runners of the box compete (a cap, or a model to load on a full box), when it is
  that runner's turn (:meth:`~sjf_core.policy._placement.Placement.box_pick`: the box's
  starvation guard, then seconds and batched loads). A runner the box prefers is woken.
* Each runner is a :class:`~sjf_core.admission._pool_members.LiveMember` (the pools' member
  objects: a runner in a pool and on a box is one object) that follows its queue's events:
  what runs, its speed, the loads it caused and how long they took.

Never raises into a queue's dispatch: a fault of the gate lets the request start (the
ledgers keep every bound) and is counted (:func:`sjf_core.note_fault`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any, Callable

from sjf_core._faults import note_fault
from sjf_core.admission._ledger import SlotLedger
from sjf_core.policy._box import Box
from sjf_core.policy._box_turn import Demand
from sjf_core.policy._placement import Placement

log = logging.getLogger("sjf_core.admission.boxes")

#: separates a backend's queue key from a model name in a runner's queue key
RUNNER_SEP = "|"
#: a box without a cap: its ledger's bound (never reached)
NO_CAP = 1 << 20


def runner_key(backend: str, model: Any) -> str:
    """The queue key of ``model``'s runner on ``backend`` (a normalised queue key); the
    backend's own key when ``model`` is empty."""
    m = str(model).strip() if model is not None else ""
    return f"{backend}{RUNNER_SEP}{m}" if m and RUNNER_SEP not in m else backend


def split_runner_key(key: str) -> tuple[str, str | None]:
    """``(backend key, model or None)`` of a queue key."""
    backend, sep, model = str(key).partition(RUNNER_SEP)
    return (backend, model) if sep and model else (backend, None)


def waiting_entries(queue: Any) -> list:
    """The live waiting entries of a local queue's pending structure (none for a store
    that keeps them elsewhere)."""
    pending = getattr(queue, "pending", None)
    fn = getattr(pending, "live_entries", None)
    try:
        return list(fn()) if fn is not None else []
    except Exception:
        note_fault(log, "a runner queue's waiters unreadable; the box counts it as empty")
        return []


class LiveBox:
    """One backend URL's box (module docstring).

    Args:
        key: the backend's queue key.
        cap: answers in flight across the box (None: no box-wide cap).
        max_loaded: models held at once (None: all).
        keep_alive_s: an idle model is unloaded after this (Ollama: 300 s).
        rule: the :class:`Placement` whose box turn decides (options: margins, guard).
        clock: monotonic seconds.
    """

    def __init__(self, key: str, cap: int | None = None, max_loaded: int | None = None,
                 keep_alive_s: float = math.inf, rule: Placement | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.key = key
        self.box = Box(key, cap=cap, max_loaded=max_loaded, keep_alive_s=keep_alive_s)
        self.rule = rule if rule is not None else Placement([])
        self.clock = clock
        self.ledger = SlotLedger(f"box:{key}", cap if cap is not None else NO_CAP)
        self.queues: dict = {}  # LiveMember -> its runner queue
        self.kind = "unknown"  # what the box said it is ("ollama", "lmstudio", "llama-swap", "plain")
        self.catalogue: set = set()  # the models it serves, as it listed them
        self.n_models = 0  # how many models it listed
        self.fit_known = False  # max_loaded was learned from the box (or set), not assumed
        self.listed_all = False  # the last reading listed every model the box serves as loaded
        self.shared: Any = None  # Redis mode: the workers' shared view (_box_redis.SharedFit)
        self.source: tuple | None = None  # (api_base, headers) to read it again
        self.read_at = -math.inf  # when its loaded set was last read
        self.reading = False
        self.again = False  # asked to read again while reading
        self.expect: set = set()  # models sent to load since the last reading
        self.suspect: set = set()  # models sent to load that the last reading did not show
        self.refresher: Callable[..., None] | None = None  # re-reads the loaded set (its registry)

    @property
    def loads(self) -> int:
        """Loads this process's requests started, as it tracks the box (``Box.loads``, the one
        count: the status's ``loads``)."""
        return self.box.loads

    # ---- runners ------------------------------------------------------------------------
    def attach(self, member: Any, queue: Any) -> None:
        """``member`` (a LiveMember for ``queue``) becomes one of this box's runners."""
        self.box.add(member)
        member.live_box = self
        self.queues[member] = queue
        led = getattr(queue, "ledger", None)
        if led is not None:
            led.stack(self.ledger)
        queue.gate = BoxGate(self, member)

    def refresh(self, expect: str | None = None) -> None:
        """Re-read what the box holds, in the background (``expect``: a model a request was
        just sent to load)."""
        if self.refresher is not None:
            self.refresher(self, expect)

    def set_cap(self, cap: int | None) -> None:
        """The box-wide cap (None: none): the box's ledger follows."""
        self.box.cap = cap
        self.ledger.resize(cap if cap is not None else NO_CAP)
        self.wake_all()

    def set_max_loaded(self, n: int | None, known: bool = False) -> None:
        """How many models the box holds at once (None: all); ``known``: learned or set."""
        self.box.max_loaded = n
        self.fit_known = self.fit_known or known
        self.wake_all()

    # ---- the turn -----------------------------------------------------------------------
    def _can_start(self, member: Any, now: float) -> bool:
        q = self.queues.get(member)
        if q is None or not member.healthy or q.in_flight >= q.slots:
            return False
        led = getattr(q, "ledger", None)
        if led is not None and led.used >= led.slots:
            return False
        return self.box.allows(member, now)

    def contended(self, now: float) -> bool:
        """True when the box's runners compete: a cap, or a model to load on a full box."""
        if self.box.cap is not None:
            return True
        if self.box.max_loaded is None or len(self.queues) <= 1:
            return False
        return any(len(getattr(q, "pending", ())) and not self.box.is_loaded(m, now) for m, q in self.queues.items())

    def demands(self) -> dict:
        """Each runner's waiters as :class:`Demand` (None: none)."""
        return {m: Demand.of(waiting_entries(q)) if getattr(q, "waiting", 0) else None for m, q in self.queues.items()}

    def pick(self, now: float) -> Any:
        """The runner whose waiters go next (None: none can start)."""
        return self.rule.box_pick(self.box, self.demands(), now, can_start=lambda m: self._can_start(m, now))

    def wake_all(self, but: Any = None) -> None:
        """Every runner queue of the box with waiters dispatches again (soon, on its loop)."""
        for m, q in list(self.queues.items()):
            if m is not but and getattr(q, "waiting", 0):
                soon(q)

    def status(self) -> dict:
        """Numbers and model names only (the status page, the metrics)."""
        now = self.clock()
        out = self.box.status(now)
        out.update({"kind": self.kind, "default_load_s": self.rule.default_load_s, "runners": [
            {"model": m.model, "queue": m.key, "loaded": self.box.is_loaded(m, now), "slots": q.slots, "in_flight": q.in_flight,
             "waiting": q.waiting, "loads": m.loads,
             "tokens_per_s": None if math.isnan(m.tokens_per_s) else round(m.tokens_per_s, 1),
             "load_s": None if math.isnan(m.load_s) else round(m.load_s, 2)}
            for m, q in self.queues.items()]})
        return out


class BoxGate:
    """What a runner's queue asks before it grants (module docstring)."""

    __slots__ = ("box", "member")

    def __init__(self, box: LiveBox, member: Any):
        self.box = box
        self.member = member

    def may_start(self, queue: Any) -> bool:
        """True when the runner may start its next waiter now. Never raises (a fault: True)."""
        try:
            b, m = self.box, self.member
            now = b.clock()
            if not b.box.allows(m, now):
                return False
            if not b.contended(now):
                return True
            pick = b.pick(now)
            if pick is m or pick is None:
                return pick is m
            q = b.queues.get(pick)
            if q is not None:
                soon(q)  # the box prefers another runner: it dispatches
            return False
        except Exception:
            note_fault(log, "box turn failed; the runner starts its request (the ledgers keep the bounds)")
            return True


def soon(queue: Any) -> None:
    """Let a local queue dispatch on its own loop (``wake``), soon."""
    loop = getattr(queue, "loop", None)
    wake = getattr(queue, "wake", None)
    if wake is None:
        return
    try:
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.call_soon(wake)
        else:
            loop.call_soon_threadsafe(wake)
    except RuntimeError:
        pass


__all__ = ["LiveBox", "BoxGate", "soon", "runner_key", "split_runner_key", "RUNNER_SEP", "waiting_entries"]
