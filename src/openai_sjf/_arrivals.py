"""Original arrival time of a request across the OpenAI SDK's own retries.

The SDK (``openai._base_client.AsyncAPIClient.request``) retries a request in a
loop inside the caller's task: it rebuilds the ``httpx.Request`` (``httpx2.Request`` in 3.x) each time with
the same body and headers, except ``x-stainless-retry-count`` (0, 1, 2, ...).
It does **not** send its internal idempotency key (``_idempotency_header`` is
None for ``AsyncOpenAI``). So a retry is recognised by:

1. an ``Idempotency-Key`` header, when the caller sets one (``extra_headers``):
   arrivals are remembered per key in a bounded LRU map (:data:`MAX_KEYS`
   entries, oldest evicted first, entries older than :data:`KEY_TTL_S` ignored);
2. otherwise the caller's task context: the first attempt stores
   ``(fingerprint, arrival)`` in a :class:`contextvars.ContextVar`, which the
   SDK's retry, made later in the same task, reads back. The fingerprint is the
   URL and the body bytes (compared only on a retry), so an unrelated request
   never inherits an arrival. Memory: one reference to the last body per task
   context.

A retry (``x-stainless-retry-count`` > 0) that matches neither arrives now.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import OrderedDict

from typing import Any

from sjf_core import note_fault

log = logging.getLogger("openai_sjf")

RETRY_COUNT_HEADER = "x-stainless-retry-count"
IDEMPOTENCY_HEADER = "idempotency-key"
#: Most idempotency keys remembered at once (LRU).
MAX_KEYS = 4096
#: Seconds an idempotency-key arrival is trusted (longer than any SDK retry chain).
KEY_TTL_S = 900.0

_last_attempt: contextvars.ContextVar[tuple[tuple, float] | None] = contextvars.ContextVar(
    "openai_sjf_last_attempt", default=None
)


def _fingerprint(request: Any) -> tuple:
    # The body bytes themselves (a reference, no copy): compared only on a retry,
    # so a first attempt costs no hashing.
    try:
        body = request.content
    except Exception:  # a streaming body that was not read: URL only
        note_fault(log, "request body not read yet; its retry is matched by URL", level=logging.DEBUG)
        body = None
    return (request.url, body)


class ArrivalMemory:
    """Gives each admitted request its arrival time (``time.monotonic`` seconds).

    Args:
        max_keys: LRU capacity for ``Idempotency-Key`` arrivals.
        ttl_s: seconds an idempotency-key arrival stays valid.
        clock: the admission clock (must match the queue's clock).
    """

    def __init__(self, max_keys: int = MAX_KEYS, ttl_s: float = KEY_TTL_S, clock=time.monotonic):
        self.max_keys = int(max_keys)
        self.ttl_s = float(ttl_s)
        self.clock = clock
        self._keys: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()
        self.retries_matched = 0

    def __len__(self) -> int:
        return len(self._keys)

    def arrival(self, request: Any) -> float:
        """Arrival of ``request``: now for a first attempt, the first attempt's for a retry."""
        now = self.clock()
        headers = request.headers
        idem = headers.get(IDEMPOTENCY_HEADER)
        retry = headers.get(RETRY_COUNT_HEADER)
        is_retry = retry is not None and retry.strip() not in ("", "0")
        if idem is not None:
            with self._lock:
                first = self._keys.get(idem)
                if first is not None and now - first <= self.ttl_s:
                    self._keys.move_to_end(idem)
                    self.retries_matched += 1
                    return first
                self._keys[idem] = now
                self._keys.move_to_end(idem)
                while len(self._keys) > self.max_keys:
                    self._keys.popitem(last=False)
            return now
        if not is_retry:
            _last_attempt.set((_fingerprint(request), now))
            return now
        last = _last_attempt.get()
        if last is not None and last[0] == _fingerprint(request):
            self.retries_matched += 1
            return last[1]
        return now
