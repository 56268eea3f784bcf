"""The shared machinery of every pending structure: size, lazy deletion, strict priority
bands, deadlines (EDF), the served-work clock, and the hand-off to a promotion strategy.

Pure, synchronous and clock-agnostic: the caller passes ``now`` (seconds) to :meth:`pop`.
Subclasses (:class:`~sjf_core.policy._heap.HeapPending`, :class:`~sjf_core.policy._drr.DRRPending`)
only keep the policy order: ``_push_main``, ``_pop_main``, ``_clear_main``,
``_live_entries`` and optionally ``_left`` (an entry left by any path) and ``_bypassed``
(it was dispatched by a deadline or the strategy instead of ``_pop_main``). The starvation
guard is a :class:`~sjf_core.policy.promotion.PromotionStrategy`, orthogonal to the order.
"""

from __future__ import annotations

import heapq
import math
from typing import Protocol

from sjf_core.policy._entry import Entry
from sjf_core.policy._service import ServiceStats
from sjf_core.policy._tau import TauEstimator
from sjf_core.settings import PromotionSettings
from sjf_core.policy.promotion import PromotionStrategy, make_promotion
from sjf_core.policy.promotion._base import REQUEST_OVERHEAD_TOKENS, PromotionRule, band_top, compact


def _hook(strategy, name: str):
    """The bound optional hook ``name`` of ``strategy``, or None when it has none or keeps
    :class:`~sjf_core.policy.promotion._base.PromotionRule`'s no-op."""
    fn = getattr(strategy, name, None)
    if fn is None or getattr(fn, "__func__", None) is getattr(PromotionRule, name, None):
        return None
    return fn


class PendingQueue(Protocol):
    """What every pending structure offers (heap, DRR, per-tenant, ...)."""

    tau: TauEstimator

    def push(self, entry: Entry) -> None: ...

    def pop(self, now: float) -> Entry | None: ...

    def remove(self, entry: Entry) -> bool: ...

    def observe(self, entry: Entry, service_s: float, true_class: int | None = None,
                answer_tokens: float | None = None) -> None: ...

    def __len__(self) -> int: ...


class PendingBase:
    """Base of the pending structures.

    Args:
        tau: the τ estimator of this queue (a fresh one by default).
        promotion: a :class:`~sjf_core.policy.promotion.PromotionStrategy` (fresh, not
            attached elsewhere), or :class:`~sjf_core.settings.PromotionSettings` or a rule
            name (None: the default rule) that :func:`~sjf_core.policy.promotion.make_promotion`
            builds one from.
        slots: slots of the queue this structure serves (the admission queue sets it, checked there).
        service: shared service statistics (a fresh one by default).

    Raises:
        ValueError: as ``make_promotion``.
    """

    def __init__(self, tau: TauEstimator | None = None, promotion: "PromotionStrategy | PromotionSettings | str | None" = None,
                 *, slots: int = 1, service: ServiceStats | None = None):
        if promotion is None or isinstance(promotion, (str, PromotionSettings)):
            promotion = make_promotion(promotion)
        self.tau = tau or TauEstimator()
        self.slots = int(slots)
        self.service = service or ServiceStats(self.tau.config.initial_short_service_s)
        #: answer tokens (+ per-request overhead) of every request dispatched: the clock
        #: of the served-work rules (never decreases; does not move while idle)
        self.served_work = 0.0
        self._size = 0
        #: live waiters per priority band, and the top non-empty band (None when empty)
        self._bands: dict[int, int] = {}
        self.top_band: int | None = None
        self._deadlines: list[tuple[int, float, int, Entry]] = []  # latest start times (EDF)
        self.promotions = 0
        self.deadline_dispatches = 0
        self.strategy: PromotionStrategy = promotion
        promotion.attach(self)
        self._observed = _hook(promotion, "observed")  # optional hooks of a strategy (None: a no-op)
        # the subclass hooks, None when they are the no-op defaults (skipped on the hot path)
        self._left_hook = None if type(self)._left is PendingBase._left else self._left
        self._bypassed_hook = None if type(self)._bypassed is PendingBase._bypassed else self._bypassed

    # ---- introspection -----------------------------------------------------------------
    @property
    def promotion(self) -> str:
        """Name of the promotion rule."""
        return self.strategy.name

    @property
    def k(self) -> int:
        """The k of "one-in-k" (1 for "strict" and the rules without one)."""
        return int(getattr(self.strategy, "k", 1))

    def __len__(self) -> int:
        return self._size

    def backlog_s(self, now: float) -> float:
        """Estimated unfinished work per slot at ``now`` (seconds; "fcfs-bound" only, else 0)."""
        fn = getattr(self.strategy, "backlog_s", None)
        return float(fn(now)) if fn is not None else 0.0

    # ---- public API --------------------------------------------------------------------
    def push(self, entry: Entry) -> None:
        """Add a waiter. O(log n)."""
        entry.removed = False
        entry.promoted = False
        entry.served_at_arrival = self.served_work
        t = entry.expected_tokens  # work_tokens(entry), inlined (hot path)
        entry.work_tokens = (t if t > 0 and math.isfinite(t) else 0.0) + REQUEST_OVERHEAD_TOKENS
        self.strategy.on_push(entry)
        p = entry.priority
        self._bands[p] = self._bands.get(p, 0) + 1
        if self.top_band is None or p > self.top_band:
            self.top_band = p
        self._push_main(entry)
        if entry.deadline is not None and math.isfinite(entry.deadline):
            latest = entry.deadline - self.service.expected_s(entry.klass, entry.expected_tokens)
            compact(self._deadlines, self._size)
            heapq.heappush(self._deadlines, (-p, latest, entry.seq, entry))
        self._size += 1

    def remove(self, entry: Entry) -> bool:
        """Withdraw a waiter (cancelled, timed out). Returns False if it was not waiting."""
        if entry.removed:
            return False
        entry.removed = True
        self._size -= 1
        self._left_band(entry)
        if self._left_hook is not None:
            self._left_hook(entry)
        self.strategy.on_remove(entry)
        if self._size == 0:
            self._clear()
        return True

    def pop(self, now: float) -> Entry | None:
        """Take the next waiter to dispatch at time ``now`` (seconds), or None if empty:
        a due deadline of the top band (EDF), else the strategy's due waiter, else the
        policy order."""
        if self._size == 0:
            return None
        chosen = self._due_deadline(now) if self._deadlines else None
        if chosen is None:
            chosen = self.strategy.due(now)
            if chosen is not None:
                chosen.promoted = True
                self.promotions += 1
        by_policy = chosen is None
        if chosen is not None:
            if self._bypassed_hook is not None:
                self._bypassed_hook(chosen)
        else:
            chosen = self._pop_main(now)
            if chosen is None:  # defensive: size and heaps disagree
                self._size = 0
                self._clear()
                return None
        chosen.removed = True
        self.served_work += chosen.work_tokens
        self._size -= 1
        p = chosen.priority
        n = self._bands.get(p, 0) - 1
        if n > 0:  # self._left_band(chosen), its common case inlined (hot path)
            self._bands[p] = n
        else:
            self._left_band(chosen)
        if self._left_hook is not None:
            self._left_hook(chosen)
        self.strategy.on_pop(chosen, now, by_policy)
        if self._size == 0:
            self._clear()
        return chosen

    def observe(self, entry: Entry, service_s: float, true_class: int | None = None,
                answer_tokens: float | None = None) -> None:
        """A dispatched entry finished after holding its slot ``service_s`` seconds: feeds
        τ (true class when known, else predicted) and the per-class service statistics."""
        predicted = entry.klass if entry.scored else None  # never scored: true-class statistics only
        self.tau.observe(predicted if true_class is None else true_class, service_s)
        self.service.observe(predicted, service_s, true_class, answer_tokens)
        if self._observed is not None:
            self._observed(entry)

    def rescored(self, entry: Entry) -> None:
        """A running entry that was dispatched before it was scored now has its prediction."""
        fn = getattr(self.strategy, "rescored", None)
        if fn is not None:
            fn(entry)

    def order_key(self, entry: Entry) -> tuple:
        """Key of ``entry`` in the policy order (lower is sooner): the strategy's."""
        return self.strategy.order_key(entry)

    # ---- for the strategy (PendingView) ----------------------------------------------------
    def live_entries(self) -> list[Entry]:
        return self._live_entries()

    def rebuild(self, entries: list[Entry]) -> None:
        """Re-key the policy order: empty it and push ``entries`` again."""
        self._clear_main()
        for e in entries:
            self._push_main(e)

    # ---- internals ---------------------------------------------------------------------
    def _left_band(self, entry: Entry) -> None:
        p = entry.priority
        n = self._bands.get(p, 0) - 1
        if n > 0:
            self._bands[p] = n
            return
        self._bands.pop(p, None)
        if p == self.top_band:
            self.top_band = max(self._bands) if self._bands else None

    def _due_deadline(self, now: float) -> Entry | None:
        top = band_top(self._deadlines, self.top_band)
        if top is not None and top[1] <= now:
            self.deadline_dispatches += 1
            return heapq.heappop(self._deadlines)[3]
        return None

    def _clear(self) -> None:
        self._clear_main()
        self._deadlines.clear()
        self._bands.clear()
        self.top_band = None
        self.strategy.clear()

    # ---- subclass hooks ----------------------------------------------------------------
    def _push_main(self, entry: Entry) -> None:
        raise NotImplementedError

    def _pop_main(self, now: float) -> Entry | None:
        raise NotImplementedError

    def _clear_main(self) -> None:
        raise NotImplementedError

    def _live_entries(self) -> list[Entry]:
        raise NotImplementedError

    def _left(self, entry: Entry) -> None:
        pass

    def _bypassed(self, entry: Entry) -> None:
        pass
