"""One waiting request as the scheduling layer sees it: no prompt text, only numbers.

The length classes an entry carries (Short, Medium, Long) are the predictor's vocabulary,
defined in :mod:`sjf_core.predict._classes` and re-exported here.

The same :class:`Entry` is used by the live asyncio queue, the Redis store and the
discrete-event simulator, so that a policy never needs to know which one drives it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sjf_core.predict._classes import (CLASS_NAMES, LONG, LONG_MIN_TOKENS, MEDIUM, SHORT, SHORT_MAX_TOKENS,
                                      class_of_tokens)

__all__ = ["Entry", "SHORT", "MEDIUM", "LONG", "CLASS_NAMES", "SHORT_MAX_TOKENS", "LONG_MIN_TOKENS", "class_of_tokens"]


@dataclass(eq=False, slots=True)
class Entry:
    """A request waiting for (or holding) a slot.

    Attributes:
        seq: monotonic arrival sequence number; the final tie-break (FCFS).
        arrival: arrival time in seconds on the owning queue's clock. An SDK
            retry keeps its first arrival, so τ still protects it.
        key: the policy's ordering key; lower is served sooner. For ``sjf`` it is
            P(Long) (paper §3.4); for ``sjf-tokens`` expected answer tokens.
        klass: predicted length class (0 Short, 1 Medium, 2 Long).
        expected_tokens: predicted answer tokens (float, >= 0), used by
            token-aware policies and overload control.
        priority: caller priority from request metadata; higher is served first.
        deadline: absolute deadline on the queue clock (seconds), or None.
        fallback: True when the request could not be scored and was placed
            at a neutral key (fail-open, DESIGN.md invariant 5).
        scored: False while a lazily scored request has not been predicted
            (:meth:`~sjf_core.admission._local.AdmissionQueue.ticket` ``scorer``): it
            was granted a slot at once, with no order to decide; ``key``,
            ``klass`` and ``expected_tokens`` are then placeholders.
        tenant: tenant id (hashed) for fair shares, or None (the shared tenant).
        supersede: supersede key (see :class:`~sjf_core.predict._meta.RequestMeta`), or None.
        payload: adapter- or simulator-owned object (a future, a simulated job).
        evidence: the length memory's handle of this request (digests and numbers,
            no text; :mod:`sjf_core.memory`), fed with the answer tokens at completion.
    """

    seq: int
    arrival: float
    key: float = 0.0
    klass: int = MEDIUM
    expected_tokens: float = 0.0
    priority: int = 0
    deadline: float | None = None
    fallback: bool = False
    scored: bool = True
    tenant: str | None = None
    supersede: str | None = None
    payload: Any = None
    evidence: Any = field(default=None, repr=False)
    # bookkeeping owned by the pending queue / admission queue
    removed: bool = field(default=False, repr=False)
    promoted: bool = field(default=False, repr=False)
    dispatched_at: float = field(default=math.nan, repr=False)
    #: served work (answer tokens) of the queue when this entry arrived (the served-work
    #: rules "work-bound" and "work-aging", :mod:`sjf_core.policy.promotion`)
    served_at_arrival: float = field(default=0.0, repr=False)
    #: work charged for this entry on the served-work clock (tokens; set at push)
    work_tokens: float = field(default=0.0, repr=False)

    def sort_key(self) -> tuple:
        """Heap key: priority first (higher sooner), then ``key``, then arrival order."""
        return (-self.priority, self.key, self.seq)
