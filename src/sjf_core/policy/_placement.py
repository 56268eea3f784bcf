"""Where and when a waiting request runs: one rule for pools of boxes and for many-model boxes.

Contract: pure and clock-agnostic like the pending structures (the caller passes ``now``,
seconds), so the live queues (:mod:`sjf_core.admission`) and the simulator
(:mod:`sjf_lab.sim.boxes`) run this one implementation. Nothing here waits or raises on
well-typed input. The design and the measurements behind each default: docs/boxes.md.

Everything is in **seconds**: a request's expected service on a runner is its expected work
(answer tokens plus a fixed overhead, :func:`~sjf_core.policy.promotion.work_tokens`) at that
runner's measured seconds per token, plus the runner's load time when its model is not loaded.
Unmeasured speeds count as the median of the measured peers (all unmeasured: equal, at
:data:`DEFAULT_S_PER_TOKEN`).

**Placement** (:meth:`Placement.place`, a pool's head): the request goes to the *startable*
runner where it is expected to finish first (a runner is startable when it has a free slot and
its box lets it start: cap and loaded set, :meth:`~sjf_core.policy._box.Box.allows`; finishes
within :data:`TIE` of the best count as equal, then the fewest running, then idle longest).
It waits for a busy runner only when that one is expected to finish it earlier **by a clear
margin**: ``finish_busy < finish_free − max(margin × finish_free, margin_s)``; then it
*reserves* that runner and the next request is placed the same way, so the free runner is not
left idle. A reservation is re-checked at every event (:meth:`Placement.ready`): it goes to
its runner when that frees, and to the best free runner as soon as waiting stops paying (the
runner overran its estimate, went down, or the break-even start ``expires`` passed).

**Box turn** (:meth:`Placement.box_pick`): when several runners of one box have waiters and
can start, which goes first. Due waiters first (the box's starvation guard: a request whose
model has not had its turn for ``guard_slowdown`` × its own expected seconds, load included,
and at least ``guard_min_s``), else the runner whose waiting work has the lowest **batch
ratio** ``min_k (L + s_1 + … + s_k) / k`` (s ascending: its waiters' expected seconds; L: the
load when its model is not loaded, plus the reload of the model it would evict when that one
still has waiters). A loaded runner's ratio is its head's expected seconds, so a contended box
orders in seconds; a load is paid once per batch, so one model's requests are grouped while a
switch costs a load (Smith's rule for batches with set-up times).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sjf_core.policy._box import Runner
from sjf_core.policy._box_turn import BoxTurn, Demand
from sjf_core.policy.promotion import work_tokens

#: waiting for a busy runner must save this share of the finish time on the free one ...
DEFAULT_MARGIN = 0.5
#: ... and at least this many seconds (docs/boxes.md, "Choosing the margins")
DEFAULT_MARGIN_S = 2.0
#: free runners whose expected finishes are within this share of the best count as equal
#: (measured speeds are noisy); then the fewest running, then the one idle longest
TIE = 0.1
#: load time assumed for a model whose loads were not measured yet, seconds
DEFAULT_LOAD_S = 5.0
#: the box's starvation guard: a waiter is due after this many times its own expected seconds ...
GUARD_SLOWDOWN = 8.0
#: ... and never before this many seconds
GUARD_MIN_S = 30.0
#: a reservation is re-checked this long after its runner's expected free time
RECHECK_S = 0.05
#: seconds per work token assumed while no runner in sight has a measured speed (40 tokens/s,
#: a 7B model on one GPU): what puts a load's seconds and an answer's on one scale
DEFAULT_S_PER_TOKEN = 1.0 / 40.0


@dataclass(eq=False)
class Reservation:
    """One request waiting for a particular busy runner (``target``), or for any (None)."""

    entry: object
    target: Runner | None
    made: float
    expires: float


class Placement(BoxTurn):
    """The rule over the runners of one pool (``members``; empty for a box's turn alone).

    Args:
        members: the pool's runners (shared objects: a runner in several pools is one object).
        margin, margin_s: the clear margin a wait must save (module docstring).
        speed_aware: False ignores speeds and loads (any free runner; a simulator baseline).
        reserve: False never waits for a busy runner.
        wait_min_tokens: only a request of at least this much work (tokens, overhead
            included) may wait for a busy runner.
        default_load_s: load time of a model not measured yet.
        guard_slowdown, guard_min_s: the box's starvation guard.
        return_loads: the batch ratio charges the reload of an evicted model that still has
            waiters (False: only the load itself).

    The caller loop, at every event (arrival, release, a runner up or down, a box change,
    :meth:`next_expiry`)::

        while (go := rule.ready(now)) is not None: start(*go)
        while pending and rule.any_free(now):
            entry = pending.pop(now)
            runner = rule.place(entry, now)    # None: it waits (reserved)
            if runner is not None: start(entry, runner)

    with ``Placement.started(...)`` / ``Placement.finished(...)`` around each service.
    """

    def __init__(self, members: list | None = None, margin: float = DEFAULT_MARGIN,
                 margin_s: float = DEFAULT_MARGIN_S, speed_aware: bool = True, reserve: bool = True,
                 wait_min_tokens: float = 0.0, default_load_s: float = DEFAULT_LOAD_S,
                 guard_slowdown: float = GUARD_SLOWDOWN, guard_min_s: float = GUARD_MIN_S,
                 return_loads: bool = True):
        self.members = list(members or [])
        self.margin = float(margin)
        self.margin_s = float(margin_s)
        self.speed_aware = bool(speed_aware)
        self.reserve = bool(reserve) and self.speed_aware
        self.wait_min_tokens = float(wait_min_tokens)
        self.default_load_s = float(default_load_s)
        self.guard_slowdown = float(guard_slowdown)
        self.guard_min_s = float(guard_min_s)
        self.return_loads = bool(return_loads)
        self.waiting: list[Reservation] = []

    # ---- estimates ------------------------------------------------------------------------
    def spt(self, runner: Runner, peers=None) -> float:
        """Seconds per work token of ``runner``: measured, else the median of the measured
        ``peers`` (default: the members, or the runner's box), else :data:`DEFAULT_S_PER_TOKEN`."""
        if runner.s_per_token > 0:
            return runner.s_per_token
        if peers is None:
            peers = self.members or (runner.box.runners if runner.box is not None else ())
        known = sorted(p.s_per_token for p in peers if p.s_per_token > 0)
        return known[len(known) // 2] if known else DEFAULT_S_PER_TOKEN

    def load_cost(self, runner: Runner, now: float) -> float:
        """Seconds a start on ``runner`` spends loading its model (0 when loaded)."""
        box = runner.box
        if box is None or not self.speed_aware or box.is_loaded(runner, now):
            return 0.0
        return runner.load_s if runner.load_s > 0 else self.default_load_s

    def service_s(self, entry, runner: Runner) -> float:
        """Expected service seconds of ``entry`` on ``runner``, load excluded."""
        return work_tokens(entry) * self.spt(runner)

    def finish_s(self, entry, runner: Runner, now: float) -> float:
        """Expected seconds from ``now`` until ``entry`` ends if it goes to ``runner`` next
        (inf: the runner's next free slot is unknown)."""
        wait = 0.0 if self.startable(runner, now) else runner.next_free_s(now)
        return wait + self.load_cost(runner, now) + self.service_s(entry, runner)

    def clear_margin(self, finish_free: float) -> float:
        """Seconds a wait must save over ``finish_free`` to be worth it."""
        return max(self.margin * finish_free, self.margin_s)

    # ---- capacity -------------------------------------------------------------------------
    @staticmethod
    def _promised(runner: Runner) -> int:
        return runner.promised

    def _wait(self, entry, target: Runner | None, now: float, expires: float) -> None:
        self.waiting.append(Reservation(entry, target, now, expires))
        if target is not None:
            target.promised += 1

    def _unwait(self, r: Reservation) -> None:
        self.waiting.remove(r)
        if r.target is not None:
            r.target.promised = max(0, r.target.promised - 1)

    def _retarget(self, r: Reservation, target: Runner | None, expires: float) -> None:
        if r.target is not None:
            r.target.promised = max(0, r.target.promised - 1)
        r.target, r.expires = target, expires
        if target is not None:
            target.promised += 1

    def startable(self, runner: Runner, now: float) -> bool:
        """True when ``runner`` can start one more request now: healthy, a slot free beyond
        those promised to reservations, and its box allows it."""
        if not runner.healthy or runner.free() <= self._promised(runner):
            return False
        return runner.box is None or runner.box.allows(runner, now)

    def any_free(self, now: float = 0.0) -> bool:
        """True when some member can start a request now."""
        return any(self.startable(m, now) for m in self.members)

    def next_expiry(self, now: float) -> float | None:
        """When the caller must call :meth:`ready` again without an event (a reservation's
        break-even start, or its runner's expected free time passing), or None."""
        due = []
        for r in self.waiting:
            if r.target is None:
                continue
            due.append(r.expires)
            left = r.target.next_free_s(now)
            if math.isfinite(left):
                due.append(now + left + RECHECK_S)
        later = [d for d in due if d > now]
        return min(later) if later else None

    # ---- placement --------------------------------------------------------------------------
    def _best_free(self, entry, now: float) -> Runner | None:
        free = [m for m in self.members if self.startable(m, now)]
        if not free:
            return None
        if not self.speed_aware:
            return min(free, key=lambda m: (len(m.running) + m.busy_elsewhere, m.idle_since))
        fin = {m: self.load_cost(m, now) + self.service_s(entry, m) for m in free}
        best = min(fin.values())
        near = [m for m in free if fin[m] <= best * (1.0 + TIE) + 1e-9]
        return min(near, key=lambda m: (len(m.running) + m.busy_elsewhere, m.idle_since))

    def _best_busy(self, entry, now: float, free: set) -> tuple[Runner | None, float]:
        target, best = None, math.inf
        for m in self.members:
            if m in free or not m.healthy or self._promised(m) >= m.slots:
                continue
            nf = m.next_free_s(now)
            if not math.isfinite(nf):
                continue
            f = nf + self.load_cost(m, now) + self.service_s(entry, m)
            if f < best:
                target, best = m, f
        return target, best

    def place(self, entry, now: float) -> Runner | None:
        """Where ``entry`` (the head of the queue) goes now: a startable runner, or None
        (it waits, reserved; :meth:`ready` hands it out later). Call when :meth:`any_free`."""
        best = self._best_free(entry, now)
        if best is None:
            self._wait(entry, None, now, now)
            return None
        if self.reserve and work_tokens(entry) >= self.wait_min_tokens:
            f_free = self.load_cost(best, now) + self.service_s(entry, best)
            free = {m for m in self.members if self.startable(m, now)}
            target, f_t = self._best_busy(entry, now, free)
            if target is not None and f_t < f_free - self.clear_margin(f_free):
                run_t = self.load_cost(target, now) + self.service_s(entry, target)
                self._wait(entry, target, now, now + f_free - run_t)
                return None
        return best

    def _still_pays(self, r: Reservation, free: Runner, now: float) -> bool:
        t = r.target
        nf = t.next_free_s(now)
        if now >= r.expires or not math.isfinite(nf):
            return False
        f_t = nf + self.load_cost(t, now) + self.service_s(r.entry, t)
        f_f = self.load_cost(free, now) + self.service_s(r.entry, free)
        return f_t < f_f - self.clear_margin(f_f)

    def ready(self, now: float) -> tuple | None:
        """The first reservation that goes now, with its runner, or None. One at a time: the
        caller starts it (its runner's and box's state change) before asking again."""
        for r in list(self.waiting):
            t = r.target
            if t is not None and t.healthy and t.free() > 0 and (t.box is None or t.box.allows(t, now)):
                chosen = t  # its own promised slot
            else:
                chosen = self._best_free(r.entry, now)
                if chosen is None:
                    if t is not None and not t.healthy:
                        self._retarget(r, None, now)  # its runner went down: first free one
                    continue
                if t is not None and t.healthy and self._still_pays(r, chosen, now):
                    continue
            self._unwait(r)
            return r.entry, chosen
        return None

    def cancel(self, entry) -> bool:
        """Drop ``entry``'s reservation (its caller left). True if it had one."""
        for r in self.waiting:
            if r.entry is entry:
                self._unwait(r)
                return True
        return False

    # ---- bookkeeping ------------------------------------------------------------------------
    def started(self, runner: Runner, entry, now: float) -> bool:
        """``entry`` now runs on ``runner``; True when that loads its model."""
        load_s = self.load_cost(runner, now)
        loaded = runner.box.start(runner, now) if runner.box is not None else False
        runner.running[entry] = (now, (load_s if loaded else 0.0) + runner.expected_s(entry))
        return loaded

    @staticmethod
    def finished(runner: Runner, entry, now: float, answer_tokens: float | None, load_s: float = 0.0) -> None:
        """``entry`` ended on ``runner`` (its slot is free again); ``load_s``: the part of
        its service spent loading the model (measured, or 0)."""
        start, _ = runner.running.pop(entry, (now, math.nan))
        runner.observe(answer_tokens, now - start, load_s)
        if load_s > 0:
            runner.observe_load(load_s)
        if runner.box is not None:
            runner.box.touch(runner, now)
        if not runner.running:
            runner.idle_since = now


__all__ = ["Placement", "Reservation", "Demand", "DEFAULT_MARGIN", "DEFAULT_MARGIN_S", "DEFAULT_LOAD_S", "TIE",
           "GUARD_SLOWDOWN", "GUARD_MIN_S", "DEFAULT_S_PER_TOKEN"]
