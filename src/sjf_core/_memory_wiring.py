"""How a :class:`~sjf_core._scheduler.Scheduler` wires in its online length memory.

Contract: :func:`memory_for` builds the memory a config asks for (None when off; shared
through Redis when ``redis_url`` is set; persisted at ``memory_path``); :class:`MemoryListener`
feeds it each completed request's answer tokens; :class:`LazyEvidence` is the evidence of a
request scored only if there was an order to decide. Nothing here raises into a request.
"""

from __future__ import annotations

from typing import Any

from sjf_core.admission._events import QueueEvents
from sjf_core.settings import MEMORY_REDIS_OP_TIMEOUT_S, MEMORY_REDIS_RETRY_S
from sjf_core.memory._core import LengthMemory
from sjf_core.memory._store import RedisStore

__all__ = ["memory_for", "MemoryListener", "LazyEvidence"]


def memory_for(config: Any) -> LengthMemory | None:
    """The memory of a :class:`~sjf_core.config.SchedulerConfig`, or None when ``config.memory`` is off."""
    if not config.memory:
        return None
    store = None
    if config.redis_url:
        store = RedisStore(config.redis_url, prefix=config.redis.prefix, op_timeout_s=MEMORY_REDIS_OP_TIMEOUT_S,
                           retry_s=MEMORY_REDIS_RETRY_S)
    return LengthMemory(store=store, persist_path=config.memory_path or None)


class LazyEvidence:
    """The evidence of a lazily scored request: its handle once scored, else learnt at
    completion from the body (the request ran alone, so nothing scored it)."""

    __slots__ = ("scheduler", "load", "endpoint", "handle", "scored")

    def __init__(self, scheduler: Any, load, endpoint: str):
        self.scheduler, self.load, self.endpoint = scheduler, load, endpoint
        self.handle, self.scored = None, False

    def resolve(self):
        if not self.scored:
            self.scored = True
            body, _ = self.load()
            self.handle = self.scheduler._learn_unscored(body, self.endpoint)
        self.load = None
        return self.handle


class MemoryListener(QueueEvents):
    """Feeds a length memory with each completed request's answer tokens."""

    def __init__(self, memory: LengthMemory):
        self._memory = memory

    def on_complete(self, queue, entry, service_s, answer_tokens) -> None:
        ev = getattr(entry, "evidence", None)
        if ev is None:
            return
        if answer_tokens is None:
            if isinstance(ev, LazyEvidence):
                ev.load = None
            return
        if isinstance(ev, LazyEvidence):
            ev = ev.resolve()
        self._memory.observe(ev, answer_tokens)

    def on_cancel(self, queue, entry) -> None:
        ev = getattr(entry, "evidence", None)
        if isinstance(ev, LazyEvidence):
            ev.load = None
