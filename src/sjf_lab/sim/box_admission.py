"""The admission layers the box simulator compares, in front of the same boxes.

* :class:`NoPlugin`: every request goes to the box at once (a pool's member picked at random,
  LiteLLM's ``simple-shuffle``); the box's own FIFO line decides (``none``).
* :class:`PerURL`: the plugin before issue 28: one queue per backend URL with ``url_slots``
  requests in flight, whatever the model; a model on several URLs is one pool of URLs that
  hands the head to a URL with room (``url``).
* :class:`Routed`: one queue per runner behind a router that picks the member of a pool on
  arrival (``routed``; the per-backend queues of a pool before issue 22).
* :class:`PerRunner`: one queue per model runner (box, model), the box's turn and the
  pools' placement by :class:`~sjf_core.policy._placement.Placement` — the rule the live
  queues run (``runner``). ``order="tokens"`` makes the rule speed- and load-blind (tokens
  order across a box's models; the comparison of issue 28's "speeds 10× apart").

A layer's ``dispatch(now)`` returns ``(job, box key, model)`` to send; the engine tells it
``done(job, now, tokens, load_s)``. Jobs are indices into the engine's arrays.
"""

from __future__ import annotations

import math

import numpy as np

from sjf_core.policy._box import Box, Runner
from sjf_core.policy._placement import Demand, Placement


class _Layer:
    """What every layer shares: the jobs (``sim``: the engine) and their entries."""

    def __init__(self, sim, policy):
        self.sim, self.policy = sim, policy
        self.entries: dict = {}

    def entry(self, j: int):
        e = self.policy.make_entry(j, float(self.sim.arrival[j]), self.sim.predictions[j], None)
        e.payload = j
        self.entries[j] = e
        return e

    def next_timer(self, now: float) -> float | None:
        return None

    def violations(self, now: float) -> list:
        """Runners the layer leaves idle while a request it could start there waits."""
        return []


class NoPlugin(_Layer):
    def __init__(self, sim, policy, seed: int = 0):
        super().__init__(sim, policy)
        self.rng = np.random.default_rng(seed)
        self.out: list = []

    def arrive(self, j: int, now: float) -> None:
        boxes = self.sim.boxes_of(self.sim.model[j])
        self.out.append((j, boxes[int(self.rng.integers(len(boxes)))], self.sim.model[j]))

    def dispatch(self, now: float) -> list:
        out, self.out = self.out, []
        return out

    def done(self, j, now, tokens, load_s) -> None:
        pass

    def waiting_for(self, box: str, model: str) -> bool:
        return False


class PerURL(_Layer):
    def __init__(self, sim, policy, url_slots: int = 1):
        super().__init__(sim, policy)
        self.url_slots = url_slots
        self.queues: dict = {}  # tuple of box keys -> pending
        self.in_flight = {b: 0 for b in sim.truth}
        for key in set(tuple(sim.boxes_of(m)) for m in set(sim.model)):
            p = self.queues[key] = policy.new_pending()
            if hasattr(p, "slots"):
                p.slots = url_slots * len(key)

    def arrive(self, j: int, now: float) -> None:
        self.queues[tuple(self.sim.boxes_of(self.sim.model[j]))].push(self.entry(j))

    def dispatch(self, now: float) -> list:
        out = []
        for key, p in self.queues.items():
            while len(p):
                free = [b for b in key if self.in_flight[b] < self.url_slots]
                if not free:
                    break
                e = p.pop(now)
                if e is None:
                    break
                b = min(free, key=lambda x: self.in_flight[x])
                self.in_flight[b] += 1
                e.dispatched_at = now
                out.append((e.payload, b, self.sim.model[e.payload]))
        return out

    def done(self, j, now, tokens, load_s) -> None:
        b = self.sim.sent_to[j]
        self.in_flight[b] -= 1
        e = self.entries[j]
        self.queues[tuple(self.sim.boxes_of(self.sim.model[j]))].observe(e, now - e.dispatched_at, None, tokens)

    def waiting_for(self, box: str, model: str) -> bool:
        return len(self.queues[tuple(self.sim.boxes_of(model))]) > 0


class Routed(_Layer):
    """Per-runner queues behind a router that picks the member on arrival (``random``:
    LiteLLM's ``simple-shuffle``; ``round-robin``): the per-backend queues of a pool before
    issue 22 (with the ``fcfs`` policy: no plugin, each backend's own FIFO)."""

    def __init__(self, sim, policy, route: str = "random", seed: int = 0):
        super().__init__(sim, policy)
        self.route, self.rng, self.rr = route, np.random.default_rng(seed), 0
        self.queues = {(k, m.name): policy.new_pending() for k, tb in sim.truth.items() for m in tb.spec.models}
        self.slots = {(k, m.name): m.slots for k, tb in sim.truth.items() for m in tb.spec.models}
        self.in_flight = dict.fromkeys(self.queues, 0)

    def arrive(self, j: int, now: float) -> None:
        keys = self.sim.boxes_of(self.sim.model[j])
        if self.route == "random":
            k = keys[int(self.rng.integers(len(keys)))]
        else:
            k, self.rr = keys[self.rr % len(keys)], self.rr + 1
        self.queues[(k, self.sim.model[j])].push(self.entry(j))

    def dispatch(self, now: float) -> list:
        out = []
        for key, p in self.queues.items():
            while len(p) and self.in_flight[key] < self.slots[key]:
                e = p.pop(now)
                if e is None:
                    break
                self.in_flight[key] += 1
                e.dispatched_at = now
                out.append((e.payload, key[0], key[1]))
        return out

    def done(self, j, now, tokens, load_s) -> None:
        key = (self.sim.sent_to[j], self.sim.model[j])
        self.in_flight[key] -= 1
        e = self.entries[j]
        self.queues[key].observe(e, now - e.dispatched_at, None, tokens)

    def waiting_for(self, box: str, model: str) -> bool:
        return any(len(self.queues[(k, model)]) for k in self.sim.boxes_of(model))


class PerRunner(_Layer):
    """Per-runner queues, the box's turn and pools, all by one :class:`Placement` rule."""

    def __init__(self, sim, policy, order: str = "seconds", boxes: dict | None = None, **rule_kw):
        super().__init__(sim, policy)
        aware = order != "tokens"
        self.rule_kw = dict(rule_kw, speed_aware=aware)
        self.boxes: dict = {}
        self.runners: dict = {}  # (box key, model) -> Runner
        for key, tb in sim.truth.items():
            spec = tb.spec
            over = (boxes or {}).get(key, {})
            box = self.boxes[key] = Box(key, cap=over.get("cap", spec.cap), max_loaded=over.get("max_loaded", spec.max_loaded),
                                        share=spec.share)
            for name in spec.preloaded:
                box.loaded[name] = 0.0
            for m in spec.models:
                self.runners[(key, m.name)] = box.add(Runner(f"{key}#{m.name}", slots=m.slots, model=m.name))
        self.turn = Placement([], **self.rule_kw)
        self.own = {r: policy.new_pending() for r in self.runners.values()}
        self.pools: dict = {}  # model on several boxes -> (pending, Placement)
        for name in set(sim.model):
            keys = sim.boxes_of(name)
            if len(keys) > 1:
                members = [self.runners[(k, name)] for k in keys]
                pend = policy.new_pending()
                if hasattr(pend, "slots"):
                    pend.slots = sum(m.slots for m in members)
                self.pools[name] = (pend, Placement(members, **self.rule_kw))
        self.where: dict = {}

    def arrive(self, j: int, now: float) -> None:
        name = self.sim.model[j]
        e = self.entry(j)
        if name in self.pools:
            self.pools[name][0].push(e)
        else:
            self.own[self.runners[(self.sim.boxes_of(name)[0], name)]].push(e)

    # ---- dispatch -----------------------------------------------------------------------
    def _demands(self, box: Box) -> dict:
        out = {}
        for r in box.runners:
            d = Demand.of(self.own[r].live_entries()) if len(self.own[r]) else None
            pool = self.pools.get(r.model)
            if pool is not None and len(pool[0]):
                pd = Demand.of(pool[0].live_entries())
                d = pd if d is None else d.merged(pd)
            out[r] = d
        return out

    def _start(self, e, r: Runner, now: float, out: list) -> None:
        # the simulator starts only a runner that is free: a rule that hands out a busy one
        # (or one its box holds back) is a bug the properties must catch, not a request to run
        if not r.healthy or r.free() <= 0 or (r.box is not None and not r.box.allows(r, now)):
            raise RuntimeError(f"the rule handed request {e.payload} to {r.key}, which cannot start it now")
        rule = self.pools[r.model][1] if r.model in self.pools else self.turn
        rule.started(r, e, now)
        e.dispatched_at = now
        self.where[e.payload] = r
        out.append((e.payload, r.box.key, r.model))

    def dispatch(self, now: float) -> list:
        out: list = []
        progress = True
        while progress:
            progress = False
            for pend, rule in self.pools.values():
                while (go := rule.ready(now)) is not None:
                    self._start(*go, now, out)
            for box in self.boxes.values():
                r = self.turn.box_pick(box, self._demands(box), now)
                if r is None:
                    continue
                progress = True
                own = self.own[r]
                pool = self.pools.get(r.model)
                use_own = len(own) > 0 and (pool is None or not len(pool[0]) or
                                            min(Demand.of(own.live_entries()).tokens) <= min(Demand.of(pool[0].live_entries()).tokens))
                if use_own:
                    self._start(own.pop(now), r, now, out)
                else:
                    e = pool[0].pop(now)
                    placed = pool[1].place(e, now)
                    if placed is not None:
                        self._start(e, placed, now, out)
        return out

    def done(self, j, now, tokens, load_s) -> None:
        r = self.where.pop(j)
        e = self.entries[j]
        Placement.finished(r, e, now, tokens, load_s)
        pend = self.pools[r.model][0] if r.model in self.pools else self.own[r]
        pend.observe(e, now - e.dispatched_at, None, tokens)

    def next_timer(self, now: float) -> float | None:
        ts = [t for _, rule in self.pools.values() if (t := rule.next_expiry(now)) is not None]
        return min(ts) if ts else None

    # ---- properties ---------------------------------------------------------------------
    def waiting_for(self, box: str, model: str) -> bool:
        r = self.runners[(box, model)]
        pool = self.pools.get(model)
        return len(self.own[r]) > 0 or (pool is not None and (len(pool[0]) > 0 or bool(pool[1].waiting)))

    def violations(self, now: float) -> list:
        bad = []
        for r in self.runners.values():
            pool = self.pools.get(r.model)
            waits = len(self.own[r]) > 0 or (pool is not None and len(pool[0]) > 0)
            if waits and self.turn.startable(r, now):
                bad.append(r.key)
        return bad

    def over_slots(self) -> list:
        """Runners running more than their slots, boxes above their cap (by the rule's count)."""
        bad = [r.key for r in self.runners.values() if len(r.running) > r.slots]
        bad += [b.key for b in self.boxes.values() if b.cap is not None and b.in_flight() > b.cap]
        return bad


LAYERS = {"none": NoPlugin, "url": PerURL, "routed": Routed, "runner": PerRunner}
INF = math.inf
