"""Pending-request structures: pure, synchronous and clock-agnostic (the façade).

A pending structure holds the :class:`~sjf_core.policy._entry.Entry` objects that wait for
a slot and decides which one goes next. It never reads a clock: the caller passes ``now``
(seconds) to ``pop``; the asyncio admission queue passes ``time.monotonic()``, the
simulator its virtual time, so both run the very same policy code (DESIGN.md).

Two orthogonal parts: the structure keeps the policy order (:class:`HeapPending`: one
heap; :class:`DRRPending`: deficit round robin across classes), and a promotion strategy
(:mod:`sjf_core.policy.promotion`, one class per rule) is the starvation guard. Dispatch
order at each ``pop``:

0. **Strict priority bands.** Only waiters of the top non-empty band are candidates;
   every rule below applies inside that band.
1. **Due deadlines, earliest latest start first (EDF):** deadline (request metadata
   ``sjf_deadline_s``) minus the expected service time
   (:class:`~sjf_core.policy._service.ServiceStats`). Opt-in, trusted metadata: the one
   documented exception to the τ bound of "strict".
2. **The strategy's due waiter:** ``max_wait_s`` (any rule), "work-bound" (the default:
   due on the served-work clock), "fcfs-bound" (due at its FCFS bound), "strict" /
   "one-in-k" / "aged-sjf" (waiters older than τ, paper §3.4).
3. **The policy order:** priority, then the strategy's order key (the policy key, or its
   aged form under "aging" / "work-aging"), then arrival.

Costs: push, pop and remove are O(log n) amortised (lazy deletion); the oldest waiter
for τ is O(1) amortised (DESIGN.md invariant 4).
"""

from sjf_core.policy._drr import DRRPending
from sjf_core.policy._heap import HeapPending
from sjf_core.policy._structure import PendingBase, PendingQueue
from sjf_core.policy.promotion import (DEFAULT_AGING_HORIZON, DEFAULT_FCFS_FLOOR, DEFAULT_FCFS_SLACK, DEFAULT_SLOWDOWN,
                                       DEFAULT_WORK_SLACK, PROMOTIONS, REQUEST_OVERHEAD_TOKENS, TOKEN_KEY_SPAN,
                                       make_promotion, work_tokens)

__all__ = ["PendingQueue", "PendingBase", "HeapPending", "DRRPending", "PROMOTIONS", "make_promotion", "work_tokens",
           "DEFAULT_AGING_HORIZON", "DEFAULT_FCFS_FLOOR", "DEFAULT_FCFS_SLACK", "DEFAULT_SLOWDOWN",
           "DEFAULT_WORK_SLACK", "REQUEST_OVERHEAD_TOKENS", "TOKEN_KEY_SPAN"]
