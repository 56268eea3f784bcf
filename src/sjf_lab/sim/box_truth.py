"""What a many-model box does with the requests it is sent (the simulator's ground truth).

The box behaves as Ollama's scheduler does (docs/boxes.md, "What the boxes do"): requests
it receives wait in **one FIFO line** of the box; the head goes to its model's runner when the
model is loaded, or when the box can load it (fewer than ``max_loaded`` models, or an idle
loaded model to evict, least recently used first); otherwise the whole line waits (head of
line). Each runner serves its own FIFO with ``slots`` answers at once; a box-wide ``cap``
(a strictly serial server: 1) bounds answers in flight across runners. A load takes the
model's ``load_s``, during which its runner's answers do not progress. Answers that generate
side by side share the box's speed: each runs at ``tokens_per_s / (1 + share × (n − 1))``
with ``n`` answers generating on the box (processor sharing; the event loop re-plans
completions whenever ``n`` changes).

Jobs are indices; the caller (:mod:`sjf_lab.sim.box_engine`) owns arrival and completion
times. Never raises on well-formed specs.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelSpec:
    """One model on a box: its speed alone on the box, load time and runner slots."""

    name: str
    tokens_per_s: float = 40.0
    load_s: float = 0.0
    slots: int = 1


@dataclass(frozen=True)
class BoxSpec:
    """One backend URL: its models, box-wide cap, models held at once, speed sharing,
    and the models loaded when the run starts."""

    key: str
    models: tuple = ()
    cap: int | None = None
    max_loaded: int | None = None
    share: float = 0.0
    preloaded: tuple = ()

    def model(self, name: str) -> ModelSpec:
        for m in self.models:
            if m.name == name:
                return m
        raise KeyError(name)


@dataclass
class _Run:
    job: int
    runner: str
    work: float  # tokens still to generate
    ready_at: float  # generation starts here (after a load)
    load_s: float


@dataclass
class TrueBox:
    """The state of one box (module docstring)."""

    spec: BoxSpec
    line: collections.deque = field(default_factory=collections.deque)  # (seq, job, model, work)
    queued: dict = field(default_factory=dict)  # model -> deque of (seq, job, work)
    running: dict = field(default_factory=dict)  # job -> _Run
    loaded: dict = field(default_factory=dict)  # model -> last use
    loading_until: dict = field(default_factory=dict)  # model -> time its load ends
    loads: int = 0
    max_running: dict = field(default_factory=dict)  # model -> most answers at once
    max_in_box: int = 0
    _seq: int = 0

    def __post_init__(self):
        for name in self.spec.preloaded:
            self.loaded[name] = 0.0
        for m in self.spec.models:
            self.queued[m.name] = collections.deque()
            self.max_running[m.name] = 0

    # ---- arrivals and the line -----------------------------------------------------------
    def receive(self, job: int, model: str, work: float, now: float) -> list:
        """A request reaches the box; returns jobs that started generating now or later."""
        self._seq += 1
        self.line.append((self._seq, job, model, work))
        return self.advance(now)

    def _count(self, model: str) -> int:
        return sum(1 for r in self.running.values() if r.runner == model)

    def _busy(self, model: str) -> bool:
        return self._count(model) > 0 or bool(self.queued[model])

    def _place(self, model: str, now: float) -> bool:
        if model in self.loaded:
            return True
        cap = self.spec.max_loaded
        if cap is not None and len(self.loaded) >= cap:
            idle = sorted((t, m) for m, t in self.loaded.items() if not self._busy(m))
            if not idle:
                return False
            del self.loaded[idle[0][1]]
        self.loaded[model] = now
        self.loads += 1
        self.loading_until[model] = now + self.spec.model(model).load_s
        return True

    def advance(self, now: float) -> list:
        """Move the line's head to runners and start what fits; returns new runs."""
        while self.line:
            seq, job, model, work = self.line[0]
            if not self._place(model, now):
                break
            self.line.popleft()
            self.queued[model].append((seq, job, work))
        started = []
        while self.spec.cap is None or len(self.running) < self.spec.cap:
            heads = [(q[0][0], m) for m in self.spec.models
                     if (q := self.queued[m.name]) and self._count(m.name) < m.slots]
            if not heads:
                break
            _, m = min(heads, key=lambda h: h[0])  # first received first (a serial box's one line)
            _, job, work = self.queued[m.name].popleft()
            until = self.loading_until.get(m.name, 0.0)
            run = self.running[job] = _Run(job, m.name, work, max(now, until), max(0.0, until - now))
            self.loaded[m.name] = now
            self.max_running[m.name] = max(self.max_running[m.name], self._count(m.name))
            self.max_in_box = max(self.max_in_box, len(self.running))
            started.append(run)
        return started

    def could_start(self, model: str) -> bool:
        """True when an answer of ``model`` sent now would start at once (cap room, and the
        model loaded or loadable without waiting)."""
        spec = self.spec.model(model)
        if self.spec.cap is not None and len(self.running) >= self.spec.cap:
            return False
        if self._count(model) >= spec.slots:
            return False
        if model in self.loaded or self.spec.max_loaded is None or len(self.loaded) < self.spec.max_loaded:
            return True
        return any(not self._busy(m) for m in self.loaded)

    # ---- generation ---------------------------------------------------------------------
    def rates(self, now: float) -> dict:
        """Tokens per second of each generating job now."""
        gen = [r for r in self.running.values() if r.ready_at <= now + 1e-12]
        n = len(gen)
        slow = 1.0 + self.spec.share * (n - 1) if n > 1 else 1.0
        return {r.job: self.spec.model(r.runner).tokens_per_s / slow for r in gen}

    def next_event(self, now: float) -> float:
        """When a job of this box completes or a load ends, at the current rates."""
        t = math.inf
        for job, rate in self.rates(now).items():
            t = min(t, now + self.running[job].work / rate)
        for r in self.running.values():
            if r.ready_at > now + 1e-12:
                t = min(t, r.ready_at)
        return t

    def progress(self, now: float, dt: float) -> None:
        """Generate for ``dt`` seconds at the rates of ``now``."""
        for job, rate in self.rates(now).items():
            self.running[job].work -= rate * dt

    def finish(self, now: float) -> list:
        """Jobs done at ``now`` (removed; their model's use time updated)."""
        done = [r for r in self.running.values() if r.ready_at <= now + 1e-12 and r.work <= 1e-9]
        for r in done:
            del self.running[r.job]
            self.loaded[r.runner] = now
        return done
