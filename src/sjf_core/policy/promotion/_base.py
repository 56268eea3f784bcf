"""The promotion-strategy contract: how a starvation guard plugs into a pending structure.

A :class:`PromotionStrategy` is stateful and serves exactly one pending structure
(:meth:`attach` raises on a second one). The structure calls it at these points, always
with the structure's own numbers (``now`` in seconds on the queue clock; work in answer
tokens on the served-work clock :attr:`PendingView.served_work`):

* ``on_push(entry)``: a waiter arrives, before it enters the policy order (its
  ``served_at_arrival`` and ``work_tokens`` are already set, the size not yet counted);
* ``order_key(entry) -> tuple``: its key in the policy order, lower is sooner;
* ``due(now) -> Entry | None``: take out the waiter of the top band that the rule says
  must go next, or None (the structure then marks it promoted and counts it);
* ``on_pop(entry, now, by_policy)`` / ``on_remove(entry)``: a waiter left, dispatched
  (``by_policy``: chosen by the policy order, not by a deadline or :meth:`due`) or withdrawn;
* ``clear()``: the structure emptied; ``wire() -> dict``: the rule's parameters for the
  Redis store (:data:`WIRE_DEFAULTS` keys);
* optional: ``observed(entry)`` (a dispatched entry finished), ``rescored(entry)`` (a
  running entry dispatched unscored got its prediction), ``backlog_s(now)`` (seconds);
  ``due_points()`` (read-only, for status pages: when each waiter becomes due).

:class:`PromotionRule` gives the no-op defaults; each rule overrides what it needs and
validates its own parameters (``ValueError`` naming the parameter and the rule).
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Protocol

from sjf_core.settings import PromotionSettings
from sjf_core.policy._entry import Entry
from sjf_core.policy._service import ServiceStats
from sjf_core.policy._tau import TauEstimator

#: Answer tokens charged per request on top of its expected answer (served-work clock): the
#: prompt processing and round trip every request costs.
REQUEST_OVERHEAD_TOKENS = 16.0

#: Expected answer tokens per key unit of a token-keyed policy ("work-aging"): the span of
#: ``sjf-tokens`` keys between a typical Short and a typical Long.
TOKEN_KEY_SPAN = 1040.0

#: Parameters of every rule as the Redis store's scripts take them; a rule's :meth:`wire`
#: overrides its own, the others keep these (unused) values. The rule's name is the
#: ``promotion`` field of every :meth:`wire`, never a default.
WIRE_DEFAULTS: dict[str, Any] = {"k": 1, "key_span": 1.0, "horizon": PromotionSettings.horizon,
                                 "slack": PromotionSettings.slack, "floor": PromotionSettings.floor,
                                 "slowdown": PromotionSettings.slowdown, "work_slack": PromotionSettings.work_slack,
                                 "max_wait_s": None}


def work_tokens(entry: Entry) -> float:
    """Work of one request on the served-work clock, in answer tokens: its expected answer
    tokens (>= 0; 0 when unscored or not finite) plus :data:`REQUEST_OVERHEAD_TOKENS`."""
    t = entry.expected_tokens
    return (t if t > 0 and math.isfinite(t) else 0.0) + REQUEST_OVERHEAD_TOKENS


class PendingView(Protocol):
    """What a strategy reads from the structure it is attached to (read live: a tenant
    sub-structure may get a shared ``tau`` / ``service`` after construction)."""

    tau: TauEstimator
    service: ServiceStats
    slots: int
    served_work: float
    top_band: int | None

    def __len__(self) -> int: ...

    def live_entries(self) -> list[Entry]: ...

    def rebuild(self, entries: list[Entry]) -> None: ...


class PromotionStrategy(Protocol):
    """One promotion rule of a pending structure (module docstring for when each is called)."""

    name: str

    def attach(self, pending: PendingView) -> None: ...

    def on_push(self, entry: Entry) -> None: ...

    def order_key(self, entry: Entry) -> tuple: ...

    def due(self, now: float) -> Entry | None: ...

    def on_pop(self, entry: Entry, now: float, by_policy: bool) -> None: ...

    def on_remove(self, entry: Entry) -> None: ...

    def clear(self) -> None: ...

    def wire(self) -> dict[str, Any]: ...


def check(rule: str, name: str, value, *, low: float = 0.0, strict: bool = False, finite: bool = True) -> float:
    """``value`` as a float if ``value > low`` (``strict``) or ``>= low``, and finite when
    ``finite``; else ValueError naming the parameter and its rule."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    ok = (v > low if strict else v >= low) and not (finite and math.isinf(v))
    if not ok:
        rel = ">" if strict else ">="
        raise ValueError(f"{name} ({rule!r} promotion) must be a {'finite ' if finite else ''}number {rel} {low:g}, "
                         f"got {value!r}")
    return v


def band_top(heap: list, band: int | None):
    """The live top ``(-priority, due, seq, entry)`` of a due heap if it belongs to ``band``
    (drops withdrawn entries first), else None."""
    while heap and heap[0][3].removed:
        heapq.heappop(heap)
    if heap and heap[0][3].priority == band:
        return heap[0]
    return None


def compact(heap: list, live: int) -> None:
    """Drop the withdrawn or dispatched items (``item[-1].removed``) of a lazily deleted
    heap once they outnumber the ``live`` ones (plus a margin): O(n) now and then, O(1)
    amortised per removal, and the heap stays O(live) long (items popped elsewhere, e.g.
    by a promotion, would otherwise linger until they surface)."""
    if len(heap) > 2 * live + 64:
        heap[:] = [item for item in heap if not item[-1].removed]
        heapq.heapify(heap)


class PromotionRule:
    """Base of the rules: no-op hooks, the policy order unchanged, nothing ever due."""

    name = "none"
    #: whether the rule reads τ's value (the served-work rules use τ only as their off switch)
    uses_tau = True

    def __init__(self):
        self.q: PendingView | None = None

    def attach(self, pending: PendingView) -> None:
        if self.q is not None and self.q is not pending:
            raise ValueError(f"this {self.name!r} promotion strategy already serves a pending structure; "
                             "make one per structure")
        self.q = pending

    def on_push(self, entry: Entry) -> None:
        pass

    def order_key(self, entry: Entry) -> tuple:
        return (-entry.priority, entry.key, entry.seq)  # entry.sort_key(), inlined (hot path)

    def due(self, now: float) -> Entry | None:
        return None

    def on_pop(self, entry: Entry, now: float, by_policy: bool) -> None:
        pass

    def on_remove(self, entry: Entry) -> None:
        pass

    def clear(self) -> None:
        pass

    def observed(self, entry: Entry) -> None:
        """A dispatched entry finished (its service time was observed)."""

    def rescored(self, entry: Entry) -> None:
        """A running entry dispatched unscored got its prediction."""

    def backlog_s(self, now: float) -> float:
        """Estimated unfinished work per slot (seconds); only "fcfs-bound" keeps it."""
        return 0.0

    def due_points(self) -> dict[int, dict[str, float]]:
        """When each live waiter becomes due under this rule, by ``seq``: ``{"work": W}``
        (due once the served-work clock reaches W tokens) and/or ``{"time": t}`` (due at
        ``t`` seconds on the queue clock). A waiter without a point (a rule with no
        threshold, τ off) is absent. Read-only, O(n); for status pages, never the hot path."""
        return {}

    def _tau_points(self) -> dict[int, dict[str, float]]:
        """``arrival + τ`` of every live waiter (the τ-threshold rules), {} with τ off."""
        tau_s = self.q.tau.tau_s if self.q is not None else math.inf
        if math.isinf(tau_s):
            return {}
        return {e.seq: {"time": e.arrival + tau_s} for e in self.q.live_entries()}

    def wire(self) -> dict[str, Any]:
        return dict(WIRE_DEFAULTS, promotion=self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.wire()})"
