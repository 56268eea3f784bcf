"""Pending-request structures: pure, synchronous and clock-agnostic.

A pending queue holds the :class:`~sjf_core.policy._entry.Entry` objects that wait for a
slot and decides which one goes next. It never reads a clock: the caller passes
``now`` (seconds) to :meth:`pop`. The asyncio admission queue passes
``time.monotonic()``; the simulator passes its virtual time. This is what lets the
live queue and the simulator run the very same policy code (DESIGN.md).

Costs: push, pop and remove are O(log n) amortised (lazy deletion); finding the
oldest waiter for τ is O(1) amortised on a second heap ordered by arrival
(DESIGN.md invariant 4).

Dispatch order at each :meth:`pop` (every structure here):

0. **Strict priority bands.** Only waiters of the top non-empty band (highest
   ``priority``) are candidates; every rule below applies inside that band. Every
   due heap and the τ age index are ordered by ``(-priority, due, seq)``, so each
   heap's top is exactly the candidate of its rule (a lower band's due waiter
   never preempts a higher band).
1. **Due waiters, earliest due time first (EDF).** A waiter is due at its latest
   start time when it has a deadline (request metadata ``sjf_deadline_s``):
   deadline minus its expected service time
   (:class:`~sjf_core.policy._service.ServiceStats`); with ``max_wait_s``, once it has waited
   that long; with ``promotion="fcfs-bound"``, at its FCFS bound
   (:meth:`HeapPending._fcfs_bound`); with ``promotion="work-bound"`` (the default),
   once the served-work clock reaches its due point (:meth:`HeapPending._work_bound`).
   Deadlines are opt-in, trusted metadata; they are the one documented
   exception to the τ bound of "strict".
2. **τ promotion** ("strict", "one-in-k", "aged-sjf"): waiters older than τ
   (paper §3.4); see :class:`HeapPending` for each rule.
3. **The policy order**: priority (higher first), then the policy key, then
   arrival; with ``promotion="aging"`` the key is age-weighted (within a band).
"""

from __future__ import annotations

import heapq
import math
from typing import Protocol, Sequence

from sjf_core.policy._entry import LONG, MEDIUM, SHORT, Entry
from sjf_core.policy._service import ServiceStats
from sjf_core.policy._tau import TauEstimator

#: Promotion rules of the starvation guard (see :class:`HeapPending`).
PROMOTIONS = ("strict", "one-in-k", "aging", "aged-sjf", "fcfs-bound", "work-aging", "work-bound")

#: Defaults of "work-bound" (chosen with ``sjf simulate --scenario guard``,
#: docs/scheduling.md): a waiter is due once the backend has served, since it arrived,
#: ``slowdown`` × its own expected work or ``(1 + work_slack)`` × the work that waited
#: ahead of it (its FCFS start, in served tokens), whichever is more.
DEFAULT_SLOWDOWN = 8.0
DEFAULT_WORK_SLACK = 0.2

#: Answer tokens charged per request on top of its expected answer ("work-aging"): the
#: prompt processing and round trip every request costs, so that served work advances
#: even for requests expected to answer (almost) nothing.
REQUEST_OVERHEAD_TOKENS = 16.0

#: Expected answer tokens per key unit of a token-keyed policy ("work-aging" converts
#: served tokens into key units with ``key_span / TOKEN_KEY_SPAN``); the span of
#: ``sjf-tokens`` keys between a typical Short and a typical Long.
TOKEN_KEY_SPAN = 1040.0

#: Defaults of "fcfs-bound" (chosen with ``sjf simulate --scenario variants``): a
#: waiter is promoted once it has waited longer than τ, than ``(1 + slack)`` × the
#: wait FCFS would have given it, and than ``floor`` × the mean FCFS wait.
DEFAULT_FCFS_SLACK = 0.0
DEFAULT_FCFS_FLOOR = 1.0

#: Default aging horizon, in multiples of τ: a Long that has waited
#: ``horizon × τ`` ties with a fresh Short ("aging" promotion only).
DEFAULT_AGING_HORIZON = 8.0


class PendingQueue(Protocol):
    """What every pending structure offers (heap, DRR, ...)."""

    tau: TauEstimator

    def push(self, entry: Entry) -> None: ...

    def pop(self, now: float) -> Entry | None: ...

    def remove(self, entry: Entry) -> bool: ...

    def observe(self, entry: Entry, service_s: float, true_class: int | None = None) -> None: ...

    def __len__(self) -> int: ...


class AgeIndex:
    """Waiters ordered by band, then arrival, for τ: O(log n) push, O(1) amortised
    oldest. The top is the oldest waiter of the highest band present."""

    __slots__ = ("_heap",)

    def __init__(self):
        self._heap: list[tuple[int, float, int, Entry]] = []

    def push(self, entry: Entry) -> None:
        heapq.heappush(self._heap, (-entry.priority, entry.arrival, entry.seq, entry))

    def oldest(self) -> Entry | None:
        """The oldest live waiter of the highest band in the index, or None."""
        h = self._heap
        while h and h[0][3].removed:
            heapq.heappop(h)
        return h[0][3] if h else None

    def pop_older_than(self, arrival: float) -> list[Entry]:
        """Remove and return the live waiters of the highest band(s) that arrived before
        ``arrival``, oldest first within a band; stops at the first younger live waiter
        (lower bands are reached once the higher ones are gone)."""
        h = self._heap
        out = []
        while h and (h[0][3].removed or h[0][1] < arrival):
            e = heapq.heappop(h)[3]
            if not e.removed:
                out.append(e)
        return out

    def clear(self) -> None:
        self._heap.clear()


def work_tokens(entry: Entry) -> float:
    """Work of one dispatched request for "work-aging", in answer tokens: its expected
    answer tokens (>= 0; 0 when unscored) plus :data:`REQUEST_OVERHEAD_TOKENS`."""
    t = entry.expected_tokens
    return (t if t > 0 and math.isfinite(t) else 0.0) + REQUEST_OVERHEAD_TOKENS


class _PendingBase:
    """Shared machinery: size, lazy deletion, deadlines, τ promotion, aging keys.

    Subclasses implement ``_push_main``, ``_pop_main``, ``_clear_main`` and may hook
    ``_left`` (an entry left by any path) and ``_bypassed`` (an entry was dispatched
    by deadline or τ promotion instead of ``_pop_main``).
    """

    def __init__(
        self,
        tau: TauEstimator | None = None,
        promotion: str = "strict",
        k: int = 2,
        *,
        key_span: float = 1.0,
        horizon: float = DEFAULT_AGING_HORIZON,
        slack: float = DEFAULT_FCFS_SLACK,
        floor: float = DEFAULT_FCFS_FLOOR,
        slots: int = 1,
        service: ServiceStats | None = None,
        slowdown: float = DEFAULT_SLOWDOWN,
        work_slack: float = DEFAULT_WORK_SLACK,
        max_wait_s: float | None = None,
    ):
        if promotion not in PROMOTIONS:
            raise ValueError(f"promotion must be one of {PROMOTIONS}, got {promotion!r}")
        if int(k) < 1:
            raise ValueError("k must be >= 1")
        if not (key_span > 0) or math.isinf(key_span):
            raise ValueError("key_span must be a positive number")
        if not (horizon > 0):
            raise ValueError("horizon must be > 0")
        if not (slack >= 0) or math.isinf(slack):
            raise ValueError("slack must be a finite number >= 0")
        if not (floor >= 0) or math.isinf(floor):
            raise ValueError("floor must be a finite number >= 0")
        if int(slots) < 1:
            raise ValueError("slots must be >= 1")
        if not (slowdown > 0) or math.isinf(slowdown):
            raise ValueError("slowdown must be a positive finite number")
        if not (work_slack >= 0) or math.isinf(work_slack):
            raise ValueError("work_slack must be a finite number >= 0")
        if max_wait_s is not None and not (max_wait_s > 0):
            raise ValueError("max_wait_s must be a positive number of seconds or None")
        self.tau = tau or TauEstimator()
        self.promotion = promotion
        self.k = 1 if promotion == "strict" else int(k)
        self.key_span = float(key_span)
        self.horizon = float(horizon)
        self.slack = float(slack)
        self.floor = float(floor)
        self.slowdown = float(slowdown)
        self.work_slack = float(work_slack)
        self.max_wait_s = None if max_wait_s is None or math.isinf(max_wait_s) else float(max_wait_s)
        #: "work-aging": answer tokens (+ per-request overhead) of every request this
        #: structure dispatched, the virtual clock that waiters age on (never decreases;
        #: does not move while the backend is idle, whatever its speed)
        self.served_work = 0.0
        self._work_scale = self.key_span / TOKEN_KEY_SPAN / self.slowdown
        # "work-bound": due points on the served-work clock, and the work now waiting
        self._work_bounds: list[tuple[float, int, Entry]] = []
        self._waiting_tokens = 0.0
        # work of the waiters that arrived since the last dispatch (same served_work value)
        self._batch_tokens = 0.0
        self.mean_backlog_s = 0.0  # EWMA of the backlog seen by arrivals ("fcfs-bound")
        #: slots of the queue this structure serves (the admission queue sets it);
        #: used by "fcfs-bound" to run its virtual FCFS schedule
        self.slots = int(slots)
        self.service = service or ServiceStats(self.tau.config.initial_short_service_s)
        self._ages = AgeIndex()
        # due times (EDF): user deadlines (latest start), "fcfs-bound" promotion times
        self._deadlines: list[tuple[float, int, Entry]] = []
        self._bounds: list[tuple[float, int, Entry]] = []
        # work bookkeeping ("fcfs-bound"): expected service seconds of waiters and of
        # running entries (with their dispatch time), to estimate the backlog
        self._work: dict[int, float] = {}
        self._waiting_work = 0.0
        self._running: dict[int, tuple[float, float]] = {}
        self._size = 0
        #: live waiters per priority band, and the top non-empty band (None when empty)
        self._bands: dict[int, int] = {}
        self.top_band: int | None = None
        self._since_promotion = 0
        self.promotions = 0
        self.deadline_dispatches = 0
        # aging frame: keys are (arrival - origin) / aging_s, re-anchored when the
        # queue is empty or τ has drifted (so keys keep full float precision)
        self._origin = 0.0
        self._aging_s = math.inf
        self._aged: list[tuple[tuple, Entry]] = []  # "aged-sjf": waiters past τ, in policy order

    # ---- public API ------------------------------------------------------------------
    def __len__(self) -> int:
        return self._size

    def push(self, entry: Entry) -> None:
        """Add a waiter. O(log n)."""
        if self.promotion == "aging":
            self._maybe_reanchor(entry.arrival)
        entry.removed = False
        entry.promoted = False
        entry.served_at_arrival = self.served_work
        entry.work_tokens = work_tokens(entry)
        p = entry.priority
        self._bands[p] = self._bands.get(p, 0) + 1
        if self.top_band is None or p > self.top_band:
            self.top_band = p
        self._push_main(entry)
        if self.promotion in ("strict", "one-in-k", "aged-sjf"):
            self._ages.push(entry)
        if entry.deadline is not None and math.isfinite(entry.deadline):
            latest = entry.deadline - self.service.expected_s(entry.klass, entry.expected_tokens)
            heapq.heappush(self._deadlines, (-p, latest, entry.seq, entry))
        bound = self._fcfs_bound(entry) if self.promotion == "fcfs-bound" else math.inf
        if self.max_wait_s is not None:
            bound = min(bound, entry.arrival + self.max_wait_s)
        if bound < math.inf:
            heapq.heappush(self._bounds, (-p, bound, entry.seq, entry))
        if self.promotion == "work-bound" and not math.isinf(self.tau.tau_s):
            heapq.heappush(self._work_bounds, (-p, self._work_bound(entry), entry.seq, entry))
        self._waiting_tokens += entry.work_tokens
        self._batch_tokens += entry.work_tokens
        if self.promotion == "fcfs-bound":
            work = self.service.expected_s(entry.klass, entry.expected_tokens)
            self._work[id(entry)] = work
            self._waiting_work += work
        self._size += 1

    def remove(self, entry: Entry) -> bool:
        """Withdraw a waiter (cancelled, timed out). Returns False if it was not waiting."""
        if entry.removed:
            return False
        entry.removed = True
        self._size -= 1
        self._waiting_tokens -= entry.work_tokens
        self._left_band(entry)
        if entry.served_at_arrival == self.served_work:
            self._batch_tokens -= entry.work_tokens
        self._left(entry)
        if self._work:
            self._left_work(entry, None)
        if self._size == 0:
            self._clear()
        return True

    def pop(self, now: float) -> Entry | None:
        """Take the next waiter to dispatch at time ``now`` (seconds), or None if empty."""
        if self._size == 0:
            return None
        chosen = self._due_deadline(now)
        if chosen is None:
            chosen = self._promote(now)
        if chosen is not None:
            self._bypassed(chosen)
        else:
            chosen = self._pop_main(now)
            self._since_promotion += 1
            if chosen is None:  # defensive: size and heaps disagree
                self._size = 0
                self._clear()
                return None
        chosen.removed = True
        self.served_work += chosen.work_tokens
        self._waiting_tokens -= chosen.work_tokens
        self._batch_tokens = 0.0  # the clock moved: later arrivals are a new batch
        self._size -= 1
        self._left_band(chosen)
        self._left(chosen)
        if self._work:
            self._left_work(chosen, now)
        if self._size == 0:
            self._clear()
        return chosen

    def observe(self, entry: Entry, service_s: float, true_class: int | None = None,
                answer_tokens: float | None = None) -> None:
        """A dispatched entry finished after holding its slot ``service_s`` seconds.

        Feeds the τ estimate (true class when known, else predicted) and the
        per-class service statistics.
        """
        predicted = entry.klass if entry.scored else None  # never scored: true-class statistics only
        self.tau.observe(predicted if true_class is None else true_class, service_s)
        self.service.observe(predicted, service_s, true_class, answer_tokens)
        if self._running:
            self._running.pop(id(entry), None)

    def rescored(self, entry: Entry) -> None:
        """A running entry that was dispatched before it was scored (zero contention)
        now has its prediction: re-estimate its work ("fcfs-bound" backlog)."""
        r = self._running.get(id(entry))
        if r is not None:
            self._running[id(entry)] = (self.service.expected_s(entry.klass, entry.expected_tokens), r[1])

    # ---- ordering keys -----------------------------------------------------------------
    def order_key(self, entry: Entry) -> tuple:
        """Heap key of ``entry`` in the policy order (lower is sooner).

        With ``promotion="work-aging"`` and τ not off: ``(-priority, key + scale × W,
        seq)`` where W is :attr:`served_work` when the entry arrived (answer tokens the
        backend had been given before it) and ``scale = key_span / (TOKEN_KEY_SPAN ×
        slowdown)`` converts tokens into key units: a waiter of expected length s is
        overtaken only by requests that arrive before the backend has served
        ``slowdown × s`` more tokens (for ``sjf-tokens`` keys exactly; in proportion
        for others). Simultaneous arrivals (a burst) keep pure policy order, however long
        the queue was idle before and however fast the backend is.

        Without aging: ``(-priority, key, seq)`` (:meth:`Entry.sort_key`). With
        ``promotion="aging"`` and finite τ: ``(-priority, key + key_span ×
        age_credit, seq)`` where the age credit is ``arrival / (horizon × τ)``: a
        waiter gains one key span (a Long's P(Long) lead over a Short) per
        ``horizon × τ`` seconds of waiting, so a request is served before every
        request that arrives more than ``horizon × τ × Δkey/key_span`` seconds after
        it (bounded starvation), while simultaneous arrivals (a burst) keep pure
        policy order. Priority is a strict band in front of the aged key.
        """
        if self.promotion == "work-aging" and not math.isinf(self.tau.tau_s):
            return (-entry.priority, entry.key + self._work_scale * entry.served_at_arrival, entry.seq)
        if self.promotion != "aging" or math.isinf(self._aging_s):
            return entry.sort_key()
        credit = (entry.arrival - self._origin) / self._aging_s
        return (-entry.priority, entry.key + self.key_span * credit, entry.seq)

    def _maybe_reanchor(self, arrival: float) -> None:
        tau_s = self.tau.tau_s
        target = self.horizon * tau_s
        if self._size == 0:
            self._origin = arrival
            self._aging_s = target
            return
        if math.isinf(target) != math.isinf(self._aging_s):
            drift = math.inf
        elif math.isinf(target):
            drift = 0.0
        else:
            drift = abs(target - self._aging_s) / self._aging_s
        if drift > 0.10:  # τ moved by >10%: rebuild with the new rate, O(n log n), rare
            live = self._live_entries()
            self._clear_main()
            self._origin = min([e.arrival for e in live] + [arrival])
            self._aging_s = target
            for e in live:
                self._push_main(e)

    # ---- deadlines and τ ---------------------------------------------------------------
    def backlog_s(self, now: float) -> float:
        """Estimated unfinished work per slot at ``now`` (seconds): expected service of
        the waiters plus the expected remainder of running entries ("fcfs-bound" only).

        Under any work-conserving order this is the wait FCFS would give a request
        arriving now (exact for one slot when estimates are exact).
        """
        running = 0.0
        stale = []
        for key, (w, t0) in self._running.items():
            left = w - (now - t0)
            if left > 0:
                running += left
            elif now - t0 > 3 * w + 60:  # never observed (lost release): forget it
                stale.append(key)
        for key in stale:
            del self._running[key]
        return (self._waiting_work + running) / self.slots

    def _fcfs_bound(self, entry: Entry) -> float:
        """FCFS bound of ``entry`` under "fcfs-bound" (seconds, queue clock):
        ``arrival + max(τ, (1 + slack) × U)`` where U is the backlog at its arrival
        (:meth:`backlog_s`, the wait FCFS would give it). Also updates Ū, the running
        mean of U over arrivals (EWMA, weight 0.02), i.e. the mean FCFS wait: a
        waiter is due only once it has also waited ``floor × Ū`` (checked at pop)."""
        tau_s = self.tau.tau_s
        if math.isinf(tau_s):
            return math.inf
        u = self.backlog_s(entry.arrival)
        self.mean_backlog_s += 0.02 * (u - self.mean_backlog_s)
        return entry.arrival + max(tau_s, (1.0 + self.slack) * u)

    def _work_bound(self, entry: Entry) -> float:
        """Due point of ``entry`` under "work-bound", on the served-work clock (tokens):
        ``W + max(slowdown × w, (1 + work_slack) × A)`` where W is :attr:`served_work`
        at its arrival, w its own work (:func:`work_tokens`) and A the work waiting
        ahead of it (FCFS would start it once A more tokens had been served), counting
        only waiters that arrived before the last dispatch: requests that arrive
        together, with no dispatch between them (a burst), are not "ahead" of each
        other, so a burst keeps pure policy order instead of its arrival order."""
        ahead = max(0.0, self._waiting_tokens - self._batch_tokens)
        return entry.served_at_arrival + max(self.slowdown * entry.work_tokens, (1.0 + self.work_slack) * ahead)

    def _left_work(self, entry: Entry, dispatched_at: float | None) -> None:
        work = self._work.pop(id(entry), None)
        if work is None:
            return
        self._waiting_work = max(0.0, self._waiting_work - work)
        if dispatched_at is not None:
            self._running[id(entry)] = (work, dispatched_at)

    def _left_band(self, entry: Entry) -> None:
        p = entry.priority
        n = self._bands.get(p, 0) - 1
        if n > 0:
            self._bands[p] = n
            return
        self._bands.pop(p, None)
        if p == self.top_band:
            self.top_band = max(self._bands) if self._bands else None

    @staticmethod
    def _band_top(h: list, band: int | None):
        """The live top ``(-priority, due, seq, entry)`` of a due heap if it belongs to
        ``band`` (pops removed entries first), else None."""
        while h and h[0][3].removed:
            heapq.heappop(h)
        if h and h[0][3].priority == band:
            return h[0]
        return None

    def _due_deadline(self, now: float) -> Entry | None:
        band = self.top_band
        top = self._band_top(self._deadlines, band)
        if top is not None and top[1] <= now:
            self.deadline_dispatches += 1
            return heapq.heappop(self._deadlines)[3]
        top = self._band_top(self._bounds, band)
        if top is not None and top[1] <= now and now - top[3].arrival >= self.floor * self.mean_backlog_s:
            e = heapq.heappop(self._bounds)[3]
            e.promoted = True
            self.promotions += 1
            return e
        top = self._band_top(self._work_bounds, band)
        if top is not None and top[1] <= self.served_work:
            e = heapq.heappop(self._work_bounds)[3]
            e.promoted = True
            self.promotions += 1
            return e
        return None

    def _promote(self, now: float) -> Entry | None:
        if self.promotion in ("aging", "fcfs-bound", "work-aging", "work-bound"):
            return None
        if self.promotion == "aged-sjf":
            return self._promote_aged_sjf(now)
        tau_s = self.tau.tau_s
        if math.isinf(tau_s) or self._since_promotion + 1 < self.k:
            return None
        oldest = self._ages.oldest()  # the oldest of the top band
        if oldest is not None and oldest.priority == self.top_band and now - oldest.arrival > tau_s:
            oldest.promoted = True
            self.promotions += 1
            self._since_promotion = 0
            return oldest
        return None

    def _promote_aged_sjf(self, now: float) -> Entry | None:
        tau_s = self.tau.tau_s
        if math.isinf(tau_s):
            return None
        for e in self._ages.pop_older_than(now - tau_s):
            heapq.heappush(self._aged, (e.sort_key(), e))
        h = self._aged
        while h and h[0][1].removed:
            heapq.heappop(h)
        if h and h[0][1].priority == self.top_band:  # keyed by sort_key: band first
            e = heapq.heappop(h)[1]
            e.promoted = True
            self.promotions += 1
            return e
        return None

    def _clear(self) -> None:
        self._clear_main()
        self._ages.clear()
        self._deadlines.clear()
        self._bounds.clear()
        self._work_bounds.clear()
        self._bands.clear()
        self.top_band = None
        self._waiting_tokens = 0.0
        self._batch_tokens = 0.0
        self._aged.clear()

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


class HeapPending(_PendingBase):
    """Min-heap on the policy key with a τ starvation guard (paper §3.4).

    Args:
        tau: the τ estimator of this queue.
        promotion: how waiters that have waited long are promoted:

            * ``"strict"``: the paper's rule and DESIGN.md invariant 4: before every
              dispatch, the oldest waiter older than τ goes first. In a burst
              every waiter soon exceeds τ and the order collapses to FCFS.
            * ``"one-in-k"``: at most one aged waiter is promoted per ``k``
              dispatches; the others follow the policy key. Starvation stays
              bounded (an aged waiter waits at most k-1 extra dispatches per
              older aged waiter) while short requests keep their advantage.
            * ``"aged-sjf"``: waiters older than τ go first, but in policy order
              among themselves (our reading of how the paper's simulator must
              have promoted, see ``sjf simulate --scenario table10``). Not a
              starvation bound: a waiter past τ can be overtaken by every shorter
              one that passes τ after it.
            * ``"work-bound"`` (the default of :class:`~sjf_core.policy._policies.Policy`):
              a waiter is due once the backend has served, since it arrived,
              ``slowdown`` × its own expected work or ``(1 + work_slack)`` × the
              work waiting ahead of it, whichever is more (:meth:`_work_bound`,
              on :attr:`served_work`, in tokens); due waiters go first, earliest
              due point first. Measured in served tokens, so neither an idle
              period nor a change of backend speed changes the rule: a burst
              is pure policy order (docs/scheduling.md).
            * ``"work-aging"``: no threshold; the key is credited with the
              served work at arrival (see :meth:`order_key`).
            * ``"fcfs-bound"`` (the previous default): a waiter becomes due once it has waited longer than τ, than
              ``(1 + slack)`` × the wait FCFS would have given it (the backlog at
              its arrival, from observed per-class service times) and than
              ``floor`` × the current mean FCFS wait; due waiters go first,
              earliest FCFS bound first (only that one is checked against the floor). So no request waits much longer than under FCFS (the τ bound
              scales with load instead of being a fixed few seconds), while in a
              burst the bounds are spread over the FCFS schedule and short
              requests keep their advantage. O(log n) per operation.
            * ``"aging"``: no threshold; the heap key is age-weighted (see
              :meth:`order_key`): waiting ``horizon × τ`` seconds is worth one key
              span. A burst keeps pure policy order; under steady load a request
              is overtaken only by requests that arrive within
              ``horizon × τ × Δkey/key_span`` seconds after it.
        k: the k of ``"one-in-k"`` (>= 1; k = 1 is ``"strict"``).
        slack, floor: ``"fcfs-bound"`` parameters (>= 0).
        slowdown, work_slack: ``"work-bound"`` / ``"work-aging"`` parameters
            (slowdown > 0, work_slack >= 0).
        max_wait_s: with any rule, a waiter that has waited this many seconds is
            due (an absolute bound; None: none).
        slots: slots of the queue (for the backlog of ``"fcfs-bound"``).
        key_span: key distance between a typical Short and a typical Long (1.0 for
            P(Long) keys, ~1040 for token keys); used by ``"aging"``.
        horizon: ``"aging"`` horizon in multiples of τ.
        service: shared service statistics (a fresh one by default).

    Raises:
        ValueError: unknown promotion, k < 1, key_span, horizon or slowdown not
            positive, slack or work_slack negative, max_wait_s not positive.
    """

    def __init__(self, tau: TauEstimator | None = None, promotion: str = "strict", k: int = 2, **kw):
        super().__init__(tau, promotion, k, **kw)
        self._heap: list[tuple[tuple, Entry]] = []

    def _push_main(self, entry: Entry) -> None:
        heapq.heappush(self._heap, (self.order_key(entry), entry))

    def _pop_main(self, now: float) -> Entry | None:
        h = self._heap
        while h:
            e = heapq.heappop(h)[1]
            if not e.removed:
                return e
        return None

    def _clear_main(self) -> None:
        self._heap.clear()

    def _live_entries(self) -> list[Entry]:
        return [e for _, e in self._heap if not e.removed]


class DRRPending(_PendingBase):
    """Adaptive deficit round robin across Short / Medium / Long (seed 003, allocation layer).

    Each predicted class has its own heap in the policy order (ordering layer). A
    round visits the classes in turn; a backlogged class earns a quantum of
    ``weight[c] × max_c(mean service time of class c)`` seconds and dispatches
    while its deficit covers the cost of its head, the *observed* mean service
    time of its class (:class:`~sjf_core.policy._service.ServiceStats`, by predicted
    class). So backlogged classes share the server's time by weight (equal by
    default: a Long per round against ~15 Shorts with paper Table 1 times), and
    quanta adapt as service times are observed. An empty class forfeits its
    deficit (work-conserving). A waiter dispatched by deadline or τ promotion is
    charged to its class's deficit.

    Args:
        weights: time-share weights of Short, Medium, Long (each > 0).
        others: as :class:`HeapPending`.

    Raises:
        ValueError: as :class:`HeapPending`, or a weight not positive.
    """

    def __init__(self, tau: TauEstimator | None = None, promotion: str = "strict", k: int = 2,
                 weights: Sequence[float] = (1.0, 1.0, 1.0), **kw):
        super().__init__(tau, promotion, k, **kw)
        weights = tuple(float(w) for w in weights)
        if len(weights) != 3 or not all(w > 0 and math.isfinite(w) for w in weights):
            raise ValueError("weights must be three positive numbers (Short, Medium, Long)")
        self.weights = weights
        self._queues: list[list[tuple[tuple, Entry]]] = [[], [], []]
        self._live = [0, 0, 0]
        self.deficit = [0.0, 0.0, 0.0]
        self._cur = SHORT
        self._credited = False

    @staticmethod
    def _class(entry: Entry) -> int:
        return entry.klass if entry.klass in (SHORT, MEDIUM, LONG) else MEDIUM

    def quantum(self, c: int) -> float:
        """Quantum of class ``c`` in seconds: weight × the largest observed class mean."""
        return self.weights[c] * max(self.service.by_predicted)

    def cost(self, c: int) -> float:
        """Cost of dispatching one request of class ``c``: its observed mean service seconds."""
        return self.service.by_predicted[c]

    def _push_main(self, entry: Entry) -> None:
        c = self._class(entry)
        heapq.heappush(self._queues[c], (self.order_key(entry), entry))
        self._live[c] += 1

    def _left(self, entry: Entry) -> None:
        c = self._class(entry)
        self._live[c] -= 1
        if self._live[c] == 0:
            self._queues[c].clear()
            self.deficit[c] = 0.0

    def _bypassed(self, entry: Entry) -> None:
        c = self._class(entry)
        self.deficit[c] -= self.cost(c)

    def _next(self) -> None:
        self._cur = (self._cur + 1) % 3
        self._credited = False

    def _head(self, c: int) -> Entry | None:
        q = self._queues[c]
        while q and q[0][1].removed:
            heapq.heappop(q)
        return q[0][1] if q else None

    def _pop_main(self, now: float) -> Entry | None:
        for _ in range(3000):  # weights >= 0.001 of the largest need at most ~1000 rounds
            c = self._cur
            if self._live[c] == 0:
                self.deficit[c] = 0.0
                self._next()
                continue
            head = self._head(c)
            if head is None or head.priority != self.top_band:  # strict bands: not competing now
                self._next()
                continue
            if not self._credited:
                self.deficit[c] += self.quantum(c)
                self._credited = True
            if self.deficit[c] >= self.cost(c) - 1e-12:
                self.deficit[c] -= self.cost(c)
                head = self._head(c)
                heapq.heappop(self._queues[c])
                return head
            self._next()
        # unreachable with sane weights; serve the fullest class of the top band rather than stall
        c = max(range(3), key=lambda i: (self._live[i] > 0 and getattr(self._head(i), "priority", None) == self.top_band,
                                         self._live[i]))
        head = self._head(c)
        if head is not None:
            heapq.heappop(self._queues[c])
        return head

    def _clear_main(self) -> None:
        for q in self._queues:
            q.clear()
        self._live = [0, 0, 0]  # deficits survive a rebuild; `_left` resets an emptied class

    def _live_entries(self) -> list[Entry]:
        return [e for q in self._queues for _, e in q if not e.removed]
