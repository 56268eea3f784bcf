"""The box's turn: which of a many-model box's runners with waiters starts next.

Contract: a mixin of :class:`~sjf_core.policy._placement.Placement` (it uses the rule's
estimates: ``spt``, ``load_cost``, ``startable``, and its options ``speed_aware``,
``return_loads``, ``default_load_s``, ``guard_slowdown``, ``guard_min_s``); pure,
clock-agnostic, never raises on well-typed input. The rule itself is described in
:mod:`sjf_core.policy._placement` ("Box turn") and docs/boxes.md.

:class:`Demand` is what waits for one runner, numbers only: the live queues and the
simulator build it from their waiting entries (:meth:`Demand.of`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sjf_core.policy._box import Box, Runner
from sjf_core.policy.promotion import work_tokens

#: waiters per runner the batch ratio looks at (the shortest ones)
MAX_DEMAND = 64


@dataclass
class Demand:
    """What waits for one runner, numbers only (:meth:`Demand.of`)."""

    tokens: list  # work tokens of the waiters, ascending (at most MAX_DEMAND)
    n: int
    oldest: float  # arrival of the oldest waiter
    oldest_tokens: float
    priority: int = 0  # the highest priority band waiting

    @classmethod
    def of(cls, entries) -> "Demand | None":
        """The demand of live waiting entries (None when there are none)."""
        live = [e for e in entries if not getattr(e, "removed", False)]
        if not live:
            return None
        top = max(e.priority for e in live)
        live = [e for e in live if e.priority == top]
        oldest = min(live, key=lambda e: (e.arrival, e.seq))
        tokens = sorted(work_tokens(e) for e in live)[:MAX_DEMAND]
        return cls(tokens, len(live), oldest.arrival, work_tokens(oldest), top)

    def merged(self, other: "Demand | None") -> "Demand":
        """This demand and ``other`` together (a runner's own queue and a pool's)."""
        if other is None:
            return self
        if other.priority != self.priority:
            return self if self.priority > other.priority else other
        older = self if self.oldest <= other.oldest else other
        return Demand(sorted(self.tokens + other.tokens)[:MAX_DEMAND], self.n + other.n, older.oldest,
                      older.oldest_tokens, self.priority)


class BoxTurn:
    """The box's turn (module docstring); mixed into :class:`~sjf_core.policy._placement.Placement`."""

    def batch_ratio(self, runner: Runner, demand: Demand, now: float, demands: dict | None = None) -> float:
        """``min_k (L + s_1 + … + s_k) / k`` of ``runner``'s waiters (module docstring)."""
        spt = self.spt(runner, runner.box.runners if runner.box is not None else None)
        load = self.load_cost(runner, now)
        box = runner.box
        if load > 0 and self.return_loads and box is not None and demands:
            gone = box.victim(runner, now)
            victim = box.runner(gone) if gone is not None else None
            if victim is not None and demands.get(victim) is not None:
                load += victim.load_s if victim.load_s > 0 else self.default_load_s
        best, acc = math.inf, load
        for k, t in enumerate(demand.tokens, 1):
            acc += t * spt
            best = min(best, acc / k)
        return best

    def due(self, runner: Runner, demand: Demand, now: float) -> bool:
        """The box's starvation guard: ``runner``'s oldest waiter has waited its bound."""
        own = self.load_cost(runner, now) + demand.oldest_tokens * self.spt(runner)
        return now - demand.oldest >= max(self.guard_min_s, self.guard_slowdown * own)

    def box_pick(self, box: Box, demands: dict, now: float, can_start=None) -> Runner | None:
        """Which of ``box``'s runners with waiters (``demands``: runner -> Demand or None)
        starts next, among those that can start now (``can_start(runner)``; default the
        rule's :meth:`startable`); None when none can."""
        ok = can_start if can_start is not None else (lambda r: self.startable(r, now))
        cands = [r for r, d in demands.items() if d is not None and d.n > 0 and r.box is box and ok(r)]
        if len(cands) <= 1:
            return cands[0] if cands else None
        top = max(demands[r].priority for r in cands)
        cands = [r for r in cands if demands[r].priority == top]
        due = [r for r in cands if self.due(r, demands[r], now)]
        if due:
            return min(due, key=lambda r: demands[r].oldest)
        if not self.speed_aware:
            return min(cands, key=lambda r: (min(demands[r].tokens), demands[r].oldest))
        return min(cands, key=lambda r: (self.batch_ratio(r, demands[r], now, demands), demands[r].oldest))


__all__ = ["BoxTurn", "Demand", "MAX_DEMAND"]
