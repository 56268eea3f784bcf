"""The box's own scheduler: which model runners are loaded, and which request gets one.

Contract (a model of Ollama's ``server/sched.go``, with llama-swap's queue as an option):

* :meth:`Box.enqueue` puts a request for a model in the box's **pending queue** and returns a
  :class:`Pending` whose ``future`` resolves to the model's :class:`Runner` once it is loaded
  and the request is handed to it. The request then waits for one of the runner's own
  ``slots`` (:class:`~sjf_lab.box.fifo.FifoSlots`, FIFO) and calls :meth:`Box.finished` when
  it ends, whatever the outcome. :meth:`Box.withdraw` takes back a request whose client left.
* The queue is served in order. A request for a **ready** runner is handed to it at once. A
  request for a model that is not loaded starts its **load** (``load_s``) when the box has
  room (fewer than ``max_loaded`` models, and their ``size_gb`` within ``memory_gb``); the
  request is attached to the loading runner and handed over when the load ends. Without room
  an **idle** loaded model is unloaded (least recently used, or Ollama's keep-alive-then-name
  order); when every loaded model is busy, one (the same order) is marked to unload once its
  requests end, and the request waits.
* ``pending="fifo"`` (Ollama): a request that cannot be handed over yet (its model is loading,
  or waits for room) holds back every request behind it, even requests for loaded models.
  ``pending="skip"`` (llama-swap): requests behind it whose model is ready pass it, and a
  request joins its model's load; a busy model is not unloaded until it is idle.
* An idle model unloads ``keep_alive_s`` after its last request (a request's own keep-alive
  overrides it for its model; negative: never).
* :meth:`Box.stats` counts per model (requests, in flight, loads) and per box (loads,
  unloads, the most models loaded at once). One event loop; no locks.
"""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass, field
from typing import Callable

from sjf_lab.box.config import BoxConfig, ModelSpec
from sjf_lab.box.fifo import FifoSlots
from sjf_lab.box.speed import SharedSpeed


class BoxBusy(Exception):
    """The pending queue is full (``max_queue``): Ollama answers 503 "server busy"."""


class Runner:
    """One loaded (or loading) model: its slots, its requests, its state."""

    def __init__(self, spec: ModelSpec, slots: int, keep_alive_s: float, now: float):
        self.spec = spec
        self.name = spec.name
        self.phase = "loading"  # "loading" -> "ready" -> "unloading" (listed as its "state")
        self.slots = FifoSlots(slots)
        self.refs = 0  # requests handed (or attached) to it and not finished: Ollama's refCount
        self.evicting = False  # chosen to make room: unloads when its requests end
        self.keep_alive_s = keep_alive_s
        self.load_started = now
        self.ready_at: float | None = None
        self.last_used = now
        self.attached: list[Pending] = []  # requests waiting for its load
        self._expiry: asyncio.TimerHandle | None = None

    def expires_at(self, now: float) -> float | None:
        """When it unloads if no request comes (None: never)."""
        if self.keep_alive_s < 0:
            return None
        base = self.last_used if self.refs == 0 and self.phase == "ready" else now
        return base + self.keep_alive_s


@dataclass(eq=False)
class Pending:
    """A request in the box's pending queue (or attached to its model's load)."""

    spec: ModelSpec
    future: asyncio.Future
    t_in: float
    keep_alive_s: float | None = None
    runner: Runner | None = None  # the loading runner it is attached to
    load_s: float = 0.0  # seconds it waited for its model's load
    triggered_load: bool = False


@dataclass
class _ModelStats:
    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    peak_in_flight: int = 0  # since start (kept by reset)
    loads: int = 0
    load_s: float = 0.0


@dataclass
class _BoxStats:
    loads: int = 0
    unloads: int = 0
    evictions: int = 0  # unloads to make room for another model
    expiries: int = 0  # unloads after keep-alive
    max_loaded: int = 0  # the most models loaded (or loading) at once
    max_pending: int = 0
    refused: int = 0  # 503: the pending queue was full
    models: dict = field(default_factory=dict)


class Box:
    """The box's models, runners and pending queue (module docstring)."""

    def __init__(self, config: BoxConfig, default_tokens_per_s: float = 200.0, default_slots: int = 1,
                 clock: Callable[[], float] = time.monotonic):
        self.config = config
        self.default_tokens_per_s = float(default_tokens_per_s)
        self.default_slots = int(default_slots)
        self.clock = clock
        self.speed = SharedSpeed(config.share, config.share_by, clock)
        self.runners: dict[str, Runner] = {}
        self.pending: collections.deque[Pending] = collections.deque()
        self._stats = self._fresh_stats()
        self._peaks = {m.name: 0 for m in config.models}
        self._draining = self._again = False

    # ---- the models ---------------------------------------------------------------------
    def find(self, name) -> ModelSpec | None:
        """The model a request names (exact, or with Ollama's ``:latest`` tag added or dropped)."""
        return self.config.find(name)

    def speed_of(self, spec: ModelSpec) -> float:
        return spec.speed(self.default_tokens_per_s)

    def slots_of(self, spec: ModelSpec) -> int:
        return spec.runner_slots(self.default_slots)

    def preload(self) -> None:
        """Load ``config.preload`` at once (no load time, no load counted)."""
        now = self.clock()
        for name in self.config.preload:
            spec = self.find(name)
            if spec.name not in self.runners:
                r = Runner(spec, self.slots_of(spec), self.config.keep_alive_s, now)
                r.phase, r.ready_at = "ready", now
                self.runners[spec.name] = r
                self._arm_expiry(r)
        self._stats.max_loaded = max(self._stats.max_loaded, len(self.runners))

    # ---- a request's life ---------------------------------------------------------------
    def arrive(self, spec: ModelSpec) -> None:
        """Count a request for ``spec`` (in flight until :meth:`leave`)."""
        m = self._stats.models[spec.name]
        m.requests += 1
        m.in_flight += 1
        m.max_in_flight = max(m.max_in_flight, m.in_flight)
        self._peaks[spec.name] = max(self._peaks[spec.name], m.in_flight)

    def leave(self, spec: ModelSpec) -> None:
        self._stats.models[spec.name].in_flight -= 1

    def enqueue(self, spec: ModelSpec, keep_alive_s: float | None = None) -> Pending:
        """Queue a request for ``spec``. Raises :class:`BoxBusy` when the queue is full."""
        if len(self.pending) >= self.config.max_queue:
            self._stats.refused += 1
            raise BoxBusy("server busy, please try again. maximum pending requests exceeded")
        p = Pending(spec, asyncio.get_running_loop().create_future(), self.clock(), keep_alive_s)
        self.pending.append(p)
        self._stats.max_pending = max(self._stats.max_pending, len(self.pending))
        self._drain()
        return p

    def withdraw(self, p: Pending) -> None:
        """The client of ``p`` left before it got its runner (a runner it got meanwhile is
        given back)."""
        if p.future.done() and not p.future.cancelled():
            self.finished(p.future.result())
            return
        p.future.cancel()
        if p.runner is not None:  # attached to a load: the load goes on, as in Ollama
            if p in p.runner.attached:
                p.runner.attached.remove(p)
            self.finished(p.runner)
            return
        try:
            self.pending.remove(p)
        except ValueError:
            pass
        self._drain()

    def finished(self, runner: Runner) -> None:
        """A request handed to ``runner`` ended (any outcome)."""
        runner.refs -= 1
        runner.last_used = self.clock()
        if runner.refs <= 0 and runner.phase == "ready":
            if runner.evicting:
                self._unload(runner, evicted=True)
            else:
                self._arm_expiry(runner)
        self._drain()

    # ---- the pending queue --------------------------------------------------------------
    def _drain(self) -> None:
        """Serve the pending queue in order (module docstring). Not re-entrant: a change made
        while draining (an unload that frees room) drains once more afterwards."""
        if self._draining:
            self._again = True
            return
        self._draining = True
        try:
            self._again = True
            while self._again:
                self._again = False
                self._drain_once()
        finally:
            self._draining = False

    def _drain_once(self) -> None:
        i = 0
        while i < len(self.pending):
            p = self.pending[i]
            if p.future.done():
                del self.pending[i]
                continue
            if self._place(p):
                del self.pending[i]
                continue
            if self.config.pending == "fifo":
                return
            i += 1

    def _place(self, p: Pending) -> bool:
        """Hand ``p`` to its runner, attach it to a load, or say it must wait (False)."""
        r = self.runners.get(p.spec.name)
        if r is not None:
            if r.phase == "ready" and not r.evicting:
                self._hand(r, p)
                return True
            if r.phase == "loading" and self.config.pending == "skip":
                self._attach(r, p)  # llama-swap: joins the swap in flight
                return True
            return False  # loading (Ollama holds the queue behind it), or on its way out
        while not self._fits(p.spec):
            victim = self._victim(p.spec)
            if victim is None:
                return False
            if victim.refs > 0:
                if self.config.pending == "fifo":
                    victim.evicting = True  # Ollama: expire it as soon as its requests end
                return False
            self._unload(victim, evicted=True)
            if victim.name in self.runners:  # unload_s > 0: the room frees later
                return False
        self._attach(self._load(p.spec), p)
        p.triggered_load = True
        return True

    def _fits(self, spec: ModelSpec) -> bool:
        if len(self.runners) >= self.config.max_loaded:
            return False
        mem = self.config.memory_gb
        return mem is None or sum(r.spec.size_gb for r in self.runners.values()) + spec.size_gb <= mem + 1e-9

    def _victim(self, spec: ModelSpec) -> Runner | None:
        """The loaded model that makes room: an idle one first, in eviction order; else (the
        pending queue being FIFO) a busy one; None while one is already on its way out or
        only loads are in flight."""
        if any(r.evicting or r.phase == "unloading" for r in self.runners.values()):
            return None
        cands = [r for r in self.runners.values() if r.phase == "ready" and r.name != spec.name]
        if self.config.evict == "name":
            cands.sort(key=lambda r: (r.keep_alive_s if r.keep_alive_s >= 0 else float("inf"), r.name))
        else:
            cands.sort(key=lambda r: r.last_used)
        idle = [r for r in cands if r.refs == 0]
        if idle:
            return idle[0]
        return cands[0] if cands and self.config.pending == "fifo" else None

    # ---- loads and unloads --------------------------------------------------------------
    def _load(self, spec: ModelSpec) -> Runner:
        now = self.clock()
        r = Runner(spec, self.slots_of(spec), self.config.keep_alive_s, now)
        self.runners[spec.name] = r
        s = self._stats
        s.loads += 1
        s.models[spec.name].loads += 1
        s.models[spec.name].load_s += spec.load_s
        s.max_loaded = max(s.max_loaded, len(self.runners))
        if spec.load_s > 0:
            asyncio.get_running_loop().call_later(spec.load_s, self._ready, r)
        else:
            asyncio.get_running_loop().call_soon(self._ready, r)
        return r

    def _ready(self, r: Runner) -> None:
        if self.runners.get(r.name) is not r:
            return
        now = self.clock()
        r.phase, r.ready_at = "ready", now
        attached, r.attached = r.attached, []
        for p in attached:
            p.load_s = now - max(p.t_in, r.load_started)
            p.runner = None
            self._resolve(r, p)
        if r.refs <= 0:
            self._arm_expiry(r)
        self._drain()

    def _attach(self, r: Runner, p: Pending) -> None:
        r.refs += 1
        self._disarm(r)
        if p.keep_alive_s is not None:
            r.keep_alive_s = p.keep_alive_s
        p.runner = r
        r.attached.append(p)

    def _hand(self, r: Runner, p: Pending) -> None:
        r.refs += 1
        self._disarm(r)
        if p.keep_alive_s is not None:
            r.keep_alive_s = p.keep_alive_s
        self._resolve(r, p)

    def _resolve(self, r: Runner, p: Pending) -> None:
        r.last_used = self.clock()
        if not p.future.done():
            p.future.set_result(r)
        else:  # its client left at the very moment: give the reference back
            r.refs -= 1

    def _unload(self, r: Runner, evicted: bool = False, expired: bool = False) -> None:
        self._disarm(r)
        r.phase = "unloading"
        s = self._stats
        s.evictions += int(evicted)
        s.expiries += int(expired)
        if self.config.unload_s > 0:
            asyncio.get_running_loop().call_later(self.config.unload_s, self._gone, r)
        else:
            self._gone(r)

    def _gone(self, r: Runner) -> None:
        if self.runners.get(r.name) is r:
            del self.runners[r.name]
            self._stats.unloads += 1
        self._drain()

    def _arm_expiry(self, r: Runner) -> None:
        self._disarm(r)
        if r.keep_alive_s == 0:
            self._unload(r, expired=True)
        elif r.keep_alive_s > 0:
            r._expiry = asyncio.get_running_loop().call_later(r.keep_alive_s, self._expire, r)

    def _disarm(self, r: Runner) -> None:
        if r._expiry is not None:
            r._expiry.cancel()
            r._expiry = None

    def _expire(self, r: Runner) -> None:
        r._expiry = None
        if self.runners.get(r.name) is r and r.refs <= 0 and r.phase == "ready":
            self._unload(r, expired=True)
            self._drain()

    def unload_all(self) -> int:
        """Unload every idle model now; busy ones unload when their requests end (llama-swap's
        ``/unload``, Ollama's ``keep_alive: 0``). Returns how many were unloaded at once."""
        n = 0
        for r in list(self.runners.values()):
            if r.phase != "ready":
                continue
            if r.refs <= 0:
                self._unload(r)
                n += 1
            else:
                r.evicting = True
        self._drain()
        return n

    # ---- counters -----------------------------------------------------------------------
    def _fresh_stats(self, keep: _BoxStats | None = None) -> _BoxStats:
        s = _BoxStats(models={m.name: _ModelStats() for m in self.config.models})
        if keep is not None:  # gauges of requests still open survive a reset
            for name, m in keep.models.items():
                s.models[name].in_flight = m.in_flight
                s.models[name].max_in_flight = m.in_flight
            s.max_loaded = len(self.runners)
        return s

    def reset(self) -> None:
        """Zero the counters (open requests and the since-start peaks are kept)."""
        self._stats = self._fresh_stats(self._stats)

    def stats(self) -> dict:
        """Per box: ``loads``, ``unloads``, ``evictions``, ``expiries``, ``max_loaded``,
        ``loaded`` (names now), ``pending``, ``max_pending``, ``refused``, the settings; per
        model (``models[name]``): ``requests``, ``in_flight``, ``max_in_flight``,
        ``peak_in_flight`` (since start), ``loads``, ``load_s``, ``state`` ("not-loaded",
        "loading", "ready", "unloading"), ``refs``, ``slots``, ``tokens_per_s``,
        ``load_time_s``, ``kind``, ``size_gb``."""
        s = self._stats
        models = {}
        for spec in self.config.models:
            m, r = s.models[spec.name], self.runners.get(spec.name)
            models[spec.name] = {
                "requests": m.requests, "in_flight": m.in_flight, "max_in_flight": m.max_in_flight,
                "peak_in_flight": self._peaks[spec.name], "loads": m.loads, "load_s": round(m.load_s, 4),
                "state": r.phase if r is not None else "not-loaded", "refs": r.refs if r is not None else 0,
                "waiting_slot": r.slots.waiting if r is not None else 0,
                "slots": self.slots_of(spec), "tokens_per_s": self.speed_of(spec), "load_time_s": spec.load_s,
                "kind": spec.kind, "size_gb": spec.size_gb}
        c = self.config
        return {"loads": s.loads, "unloads": s.unloads, "evictions": s.evictions, "expiries": s.expiries,
                "max_loaded": s.max_loaded, "loaded": sorted(self.runners), "pending": len(self.pending),
                "max_pending": s.max_pending, "refused": s.refused, "running_answers": self.speed.running(),
                "settings": {"max_loaded": c.max_loaded, "memory_gb": c.memory_gb, "share": c.share,
                             "share_by": c.share_by, "keep_alive_s": c.keep_alive_s, "pending": c.pending,
                             "evict": c.evict, "max_queue": c.max_queue, "unload_s": c.unload_s},
                "models": models}


__all__ = ["Box", "BoxBusy", "Runner", "Pending"]
