"""Many-model boxes and pools of boxes on a virtual clock (``sjf simulate --scenario boxes``).

:func:`simulate_boxes` sends one workload (each job: an arrival, a model name, its true answer
tokens and the predictor's view) through an admission layer (:mod:`.box_admission`: ``none``,
``url``, ``routed``, ``runner``) to boxes that behave as Ollama's scheduler does (:mod:`.box_truth`:
one FIFO line per box, a runner per model, loads, a cap, shared speed). A model served by
several boxes is a pool. Every request's true work is its answer tokens plus the per-request
overhead, times a per-request jitter (``jitter``: the σ of a log-normal factor), so measured
speeds are as noisy as live ones.

Besides latencies it checks the placement properties at every event, after the layer has
dispatched (docs/boxes.md, "Properties"):

* ``over_slots``: a runner with more of our requests than its slots, or a box above its cap
  (the layer's count); ``max_running`` per runner and ``max_in_box`` are the box's own;
* ``violations``: a runner the rule could start that is left idle while a request it could
  serve waits unreserved (``runner`` layer);
* ``held_at_box``: a request sent that the box itself (:mod:`.box_truth`, not the rule's model
  of it) did not start at once: it waited in the box's line for a model the box could not load
  now, or behind its runner's or the box's cap. The layers without the rule (``none``, ``url``,
  ``routed``) do this by design; for ``runner`` each one is a start the rule allowed on a box
  that could not take it (a wrong loaded set, cap or slot count);
* ``idle_waiting_s``: runner-seconds with nothing running at the box while some request that
  runner could serve had not been sent yet (reservations included).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sjf_core.policy._entry import class_of_tokens
from sjf_core.policy.promotion import REQUEST_OVERHEAD_TOKENS
from sjf_lab.sim.box_admission import LAYERS
from sjf_lab.sim.box_truth import BoxSpec, ModelSpec, TrueBox

__all__ = ["simulate_boxes", "BoxSimResult", "BoxSpec", "ModelSpec"]


@dataclass
class BoxSimResult:
    """Outcome of one run (arrays per job, in arrival order)."""

    arrival: np.ndarray
    sent: np.ndarray
    finish: np.ndarray
    model: list
    klass: np.ndarray
    box: list
    loads: dict
    max_running: dict  # "box#model" -> most answers at once at the box
    max_sent: dict  # "box#model" -> most of our requests in flight there
    max_in_box: dict
    over_slots: list = field(default_factory=list)
    violations: list = field(default_factory=list)
    held_at_box: list = field(default_factory=list)  # (time, "box#model"): sent, not started by the box
    idle_waiting_s: float = 0.0
    makespan: float = 0.0

    @property
    def sojourn(self) -> np.ndarray:
        return self.finish - self.arrival

    @property
    def total_loads(self) -> int:
        return int(sum(self.loads.values()))

    def stat(self, q: float, klass: int | None = None, model: str | None = None) -> float:
        """Percentile ``q`` of the end-to-end latency of true class ``klass`` (None: all) and
        ``model`` (None: all)."""
        m = np.ones(len(self.arrival), dtype=bool)
        if klass is not None:
            m &= self.klass == klass
        if model is not None:
            m &= np.array([x == model for x in self.model])
        v = self.sojourn[m]
        return float(np.percentile(v, q)) if len(v) else math.nan

    def mean(self, model: str | None = None) -> float:
        m = np.array([model is None or x == model for x in self.model])
        return float(np.mean(self.sojourn[m])) if m.any() else math.nan


class _Sim:
    def __init__(self, boxes, arrival, tokens, model, predictions, jitter: float, seed: int, overhead: float):
        self.truth = {b.key: TrueBox(b) for b in boxes}
        self.arrival = np.asarray(arrival, dtype=float)
        self.tokens = np.asarray(tokens, dtype=float)
        self.model = list(model)
        self.predictions = list(predictions)
        rng = np.random.default_rng(seed + 7919)
        factor = np.exp(rng.normal(0.0, jitter, size=len(self.arrival))) if jitter > 0 else np.ones(len(self.arrival))
        self.work = (self.tokens + overhead) * factor
        self._boxes_of = {}
        for name in set(self.model):
            keys = [b.key for b in boxes if any(m.name == name for m in b.models)]
            if not keys:
                raise ValueError(f"no box serves model {name!r}")
            self._boxes_of[name] = keys
        self.sent_to: dict = {}

    def boxes_of(self, model: str) -> list:
        return self._boxes_of[model]


def simulate_boxes(boxes, arrival, tokens, model, predictions, policy, layer: str = "runner",
                   jitter: float = 0.1, seed: int = 0, overhead_tokens: float = REQUEST_OVERHEAD_TOKENS,
                   **layer_kw) -> BoxSimResult:
    """Run one workload through ``layer`` in front of ``boxes`` (module docstring).

    Args:
        boxes: :class:`BoxSpec` list.
        arrival, tokens, model, predictions: per job (arrival order), predictions None = unscored.
        policy: a :class:`~sjf_core.policy._policies.Policy` (fresh pending structures per queue).
        layer: "none", "url", "routed" or "runner".
        jitter: σ of the per-request log-normal work factor (0: exact speeds).
        seed: the random pieces (jitter, the routers).
        overhead_tokens: work of a request beyond its answer tokens (prompt processing).
        **layer_kw: the layer's options (``url_slots``; ``order``, ``boxes`` overrides and the
            :class:`~sjf_core.policy._placement.Placement` options).
    """
    if layer not in LAYERS:
        raise ValueError(f"layer must be one of {tuple(LAYERS)}, got {layer!r}")
    sim = _Sim(boxes, arrival, tokens, model, predictions, jitter, seed, overhead_tokens)
    kw = dict(layer_kw, seed=seed) if layer in ("none", "routed") else layer_kw
    adm = LAYERS[layer](sim, policy, **kw)
    n = len(sim.arrival)
    sent, finish = np.full(n, math.nan), np.full(n, math.nan)
    where: list = [None] * n
    ours = {f"{k}#{m.name}": 0 for k, tb in sim.truth.items() for m in tb.spec.models}
    max_sent = dict(ours)
    loads_s: dict = {}
    res = BoxSimResult(sim.arrival, sent, finish, sim.model, np.array([class_of_tokens(t) for t in sim.tokens]),
                       where, {}, {}, max_sent, {})
    i, now = 0, 0.0
    while True:
        t_arr = float(sim.arrival[i]) if i < n else math.inf
        t_box = min((tb.next_event(now) for tb in sim.truth.values()), default=math.inf)
        timer = adm.next_timer(now)
        t_next = min(t_arr, t_box, timer if timer is not None else math.inf)
        if not math.isfinite(t_next):
            break
        dt = max(0.0, t_next - now)
        res.idle_waiting_s += dt * _idle_waiting(sim, adm)
        for tb in sim.truth.values():
            tb.progress(now, dt)
        now = max(now, t_next)
        for key, tb in sim.truth.items():
            for run in tb.finish(now):
                j = run.job
                finish[j] = now
                ours[f"{key}#{run.runner}"] -= 1
                adm.done(j, now, float(sim.tokens[j]), loads_s.pop(j, 0.0))
        while i < n and sim.arrival[i] <= now:
            adm.arrive(i, now)
            i += 1
        for j, key, name in adm.dispatch(now):
            sent[j], where[j] = now, key
            sim.sent_to[j] = key
            rk = f"{key}#{name}"
            ours[rk] += 1
            max_sent[rk] = max(max_sent[rk], ours[rk])
            started = sim.truth[key].receive(j, name, float(sim.work[j]), now)
            for run in started:
                loads_s[run.job] = run.load_s
            if all(run.job != j for run in started):  # the box's own verdict (module docstring)
                res.held_at_box.append((now, rk))
        for tb in sim.truth.values():  # a finished answer may let the box's line move
            for run in tb.advance(now):
                loads_s[run.job] = run.load_s
        res.violations += [(now, k) for k in adm.violations(now)]
        res.over_slots += [(now, k) for k in getattr(adm, "over_slots", lambda: [])()]
    res.makespan = now
    res.loads = {k: tb.loads for k, tb in sim.truth.items()}
    res.max_running = {f"{k}#{m}": v for k, tb in sim.truth.items() for m, v in tb.max_running.items()}
    res.max_in_box = {k: tb.max_in_box for k, tb in sim.truth.items()}
    return res


def _idle_waiting(sim: _Sim, adm) -> int:
    """Runners with nothing running at their box that the box could start now, while a
    request they could serve has not been sent."""
    idle = 0
    for key, tb in sim.truth.items():
        if tb.line:
            continue
        for m in tb.spec.models:
            busy = any(r.runner == m.name for r in tb.running.values()) or tb.queued[m.name]
            if not busy and tb.could_start(m.name) and adm.waiting_for(key, m.name):
                idle += 1
    return idle
