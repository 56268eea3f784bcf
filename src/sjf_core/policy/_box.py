"""The box model: one backend URL that serves several models, one runner per model.

Contract: pure and clock-agnostic (the caller passes ``now``, seconds), so the live queues
(:mod:`sjf_core.admission`) and the simulator (:mod:`sjf_lab.sim.boxes`) hold the same
state. Nothing here waits or raises on well-typed input. docs/boxes.md has the design.

* A :class:`Runner` is one model on one box (Ollama's "runner", LM Studio's loaded
  instance, a llama-swap upstream): its own ``slots`` (``OLLAMA_NUM_PARALLEL``), what runs
  there, its measured speed (seconds per answer token) and load time. A backend that
  serves one model is a runner with ``model`` None (always loaded).
* A :class:`Box` is what the runners share: a box-wide ``cap`` on answers in flight (None:
  none; 1 for a strictly serial server) and how many models it holds at once
  (``max_loaded``, ``OLLAMA_MAX_LOADED_MODELS``; None: all). Which models are loaded is
  tracked as the box would (a start of an unloaded model loads it, evicting the least
  recently used idle one when full; idle models expire after ``keep_alive_s``) and
  corrected by what the box reports (:meth:`Box.set_loaded`, e.g. Ollama's ``/api/ps``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sjf_core.policy.promotion import REQUEST_OVERHEAD_TOKENS, work_tokens

#: weight of one new observation in a runner's speed and load-time averages
SPEED_ALPHA = 0.2
#: answers shorter than this do not update the speed (fixed costs dominate them)
MIN_SPEED_TOKENS = 32


@dataclass(eq=False)
class Runner:
    """One model's runner on a box (module docstring).

    ``running`` maps each running entry to ``(start, expected service s or NaN)``;
    ``busy_elsewhere`` counts slots taken by requests the rule does not see (the live
    slot ledger sets it); ``promised`` slots wait for reserved requests (kept by
    :class:`~sjf_core.policy._placement.Placement`); ``healthy`` False takes the runner out
    of rotation.
    """

    key: str
    slots: int = 1
    model: str | None = None
    box: "Box | None" = None
    running: dict = field(default_factory=dict)
    s_per_token: float = math.nan
    load_s: float = math.nan
    served: int = 0
    loads: int = 0
    healthy: bool = True
    busy_elsewhere: int = 0
    idle_since: float = 0.0
    #: slots promised to requests that wait for this runner (reservations of any pool)
    promised: int = 0

    def free(self) -> int:
        """Own slots free now (0 while down); the box may still hold it back."""
        if not self.healthy:
            return 0
        return max(0, self.slots - len(self.running) - self.busy_elsewhere)

    @property
    def tokens_per_s(self) -> float:
        """Measured answer tokens per second (NaN until measured)."""
        return 1.0 / self.s_per_token if self.s_per_token > 0 else math.nan

    def expected_s(self, entry) -> float:
        """Expected service seconds of ``entry`` here, load excluded (NaN: speed unknown)."""
        return work_tokens(entry) * self.s_per_token

    def next_free_s(self, now: float) -> float:
        """Expected seconds until a slot frees here: 0 when one is free, inf when unknown
        (a running request with no estimate, or one past its estimate)."""
        if self.free() > 0:
            return 0.0
        best = math.inf
        for start, est in self.running.values():
            left = start + est - now
            if left >= 0 and left < best:  # NaN estimates compare False: unknown
                best = left
        return best

    def observe(self, answer_tokens: float | None, service_s: float, load_s: float = 0.0) -> None:
        """Fold one finished answer into the speed: ``service_s`` minus the ``load_s`` it
        spent waiting for its model, over its tokens plus the per-request overhead
        (the same work :func:`~sjf_core.policy.promotion.work_tokens` charges)."""
        self.served += 1
        gen = service_s - (load_s if load_s > 0 else 0.0)
        if answer_tokens is None or not (answer_tokens >= MIN_SPEED_TOKENS) or not (0 < gen < math.inf):
            return
        spt = gen / (answer_tokens + REQUEST_OVERHEAD_TOKENS)
        old = self.s_per_token
        self.s_per_token = spt if math.isnan(old) else old + SPEED_ALPHA * (spt - old)

    def observe_load(self, load_s: float) -> None:
        """Fold one measured load of this model (seconds) into its load time."""
        if not (0 < load_s < math.inf):
            return
        old = self.load_s
        self.load_s = load_s if math.isnan(old) else old + SPEED_ALPHA * (load_s - old)


@dataclass(eq=False)
class Box:
    """What the runners of one backend URL share (module docstring)."""

    key: str
    cap: int | None = None
    max_loaded: int | None = None
    keep_alive_s: float = math.inf
    #: how much answers run side by side slow each other: each goes at its speed /
    #: (1 + share × (n − 1)) with n running (0: independent, 1: they split the speed).
    #: Informational for the rule (speeds are measured as they come); the simulator runs it.
    share: float = 0.0
    runners: list = field(default_factory=list)
    loaded: dict = field(default_factory=dict)  # model -> last use (box clock)
    loads: int = 0

    def add(self, runner: Runner) -> Runner:
        """Make ``runner`` one of this box's (idempotent)."""
        if runner not in self.runners:
            self.runners.append(runner)
        runner.box = self
        return runner

    def runner(self, model: str | None) -> Runner | None:
        """The runner of ``model`` on this box, or None."""
        for r in self.runners:
            if r.model == model:
                return r
        return None

    # ---- capacity -----------------------------------------------------------------------
    def in_flight(self) -> int:
        """Answers running on the box (every runner, requests outside the rule included)."""
        return sum(len(r.running) + r.busy_elsewhere for r in self.runners)

    def cap_room(self) -> float:
        """Answers the box-wide cap still admits (inf without a cap)."""
        return math.inf if self.cap is None else max(0, self.cap - self.in_flight())

    # ---- the loaded set ----------------------------------------------------------------
    def _busy(self, model: str | None) -> bool:
        r = self.runner(model)
        return r is not None and (len(r.running) + r.busy_elsewhere) > 0

    def _expire(self, now: float) -> None:
        for m, last in list(self.loaded.items()):
            if now - last >= self.keep_alive_s and not self._busy(m):
                del self.loaded[m]

    def is_loaded(self, runner: Runner, now: float) -> bool:
        """True when ``runner``'s model is loaded (a single-model runner always is)."""
        if runner.model is None:
            return True
        self._expire(now)
        return runner.model in self.loaded

    def evictable(self, now: float) -> list:
        """Loaded models with nothing running, least recently used first."""
        self._expire(now)
        idle = [(last, m) for m, last in self.loaded.items() if not self._busy(m)]
        return [m for _, m in sorted(idle, key=lambda x: x[0])]

    def full(self, now: float) -> bool:
        """True when loading one more model needs an eviction."""
        self._expire(now)
        return self.max_loaded is not None and len(self.loaded) >= self.max_loaded

    def can_host(self, runner: Runner, now: float) -> bool:
        """True when ``runner`` can run now as far as the loaded set goes: loaded, room for
        one more model, or an idle loaded model the box would evict."""
        return self.is_loaded(runner, now) or not self.full(now) or bool(self.evictable(now))

    def victim(self, runner: Runner, now: float) -> str | None:
        """The model a start of ``runner`` would evict (None: none)."""
        if self.is_loaded(runner, now) or not self.full(now):
            return None
        idle = self.evictable(now)
        return idle[0] if idle else None

    def allows(self, runner: Runner, now: float) -> bool:
        """True when the box lets ``runner`` start an answer now (cap and loaded set)."""
        return self.cap_room() > 0 and self.can_host(runner, now)

    # ---- events ------------------------------------------------------------------------
    def start(self, runner: Runner, now: float) -> bool:
        """An answer starts on ``runner``: returns True when that loads its model (the
        least recently used idle model is evicted when the box is full)."""
        if runner.model is None:
            return False
        load = not self.is_loaded(runner, now)
        if load:
            gone = self.victim(runner, now)
            if gone is not None:
                del self.loaded[gone]
            runner.loads += 1
            self.loads += 1
        self.loaded[runner.model] = now
        return load

    def touch(self, runner: Runner, now: float) -> None:
        """An answer of ``runner`` ended: its model was used at ``now``."""
        if runner.model is not None and runner.model in self.loaded:
            self.loaded[runner.model] = now

    def set_loaded(self, models, now: float) -> None:
        """What the box reports as loaded (e.g. ``/api/ps``): replaces the tracked set,
        keeping the use times of models that stay. When the report holds fewer models
        than ``max_loaded`` although a load just evicted one, callers may lower
        ``max_loaded`` (what fits is learned from the box)."""
        keep = {m: self.loaded.get(m, now) for m in models}
        self.loaded = keep

    def status(self, now: float) -> dict:
        """Numbers and model names only."""
        self._expire(now)
        return {"box": self.key, "cap": self.cap, "max_loaded": self.max_loaded, "loads": self.loads,
                "in_flight": self.in_flight(), "loaded": sorted(self.loaded)}


__all__ = ["Box", "Runner", "SPEED_ALPHA", "MIN_SPEED_TOKENS"]
