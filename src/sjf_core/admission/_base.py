"""The admission queue contract: who grants, who releases, what, and when.

An :class:`AdmissionQueue` admits the requests of one backend, at most ``slots`` at once.
Two stores implement it: the in-process asyncio queue
(:class:`~sjf_core.admission._local.LocalAdmissionQueue`, a future per waiter) and the
Redis store (:class:`~sjf_core.admission._redis.RedisAdmissionQueue`, a ``BLPOP`` per
waiter, shared by every process). They differ only in how a slot is granted; the ticket
lifecycle (:class:`~sjf_core.admission._ticket.Ticket`) is one and the same.

* **acquire** — the caller makes a ticket (``queue.ticket(prediction, meta, arrival,
  scorer)``, nothing waits yet) and awaits ``ticket.acquire(timeout)``. It returns holding
  a slot (``ticket.running``), or raises: ``asyncio.TimeoutError`` /
  ``asyncio.CancelledError`` (the ticket left the queue; a slot granted meanwhile is given
  back by the store), :class:`~sjf_core._errors.AdmissionRejected` (refused at the door),
  :class:`~sjf_core._errors.Superseded`. After any raise the caller owns nothing.
* **release** — whoever holds a running ticket calls ``ticket.release(answer_tokens)``
  exactly once when the backend is done with the request. It is idempotent and
  thread-safe: the first call frees the slot (returns True), later calls return False. On
  a ticket still waiting it withdraws it (returns False; ``acquire`` raises
  ``CancelledError``). ``async with ticket`` releases on exit, on error too.
* **expiry** — a running ticket neither released nor ``renew()``-ed within the queue's
  ``lease_ttl_s`` is force-released by the store (counted in ``stats.expired``); the
  owner's later ``release`` returns False. This is the safety net of a lost release hook.
* **fail-open** — a store that cannot grant (Redis down, ``fail_mode="open"``) delegates
  the ticket to a per-process local queue; the caller sees the same lifecycle. A request
  already admitted is never failed by the store.

Every transition runs on the loop that owns the ticket; a release from another thread
hops there (:meth:`Ticket.in_loop <sjf_core.admission._ticket.Ticket.in_loop>`). Only the
ticket writes its state (:mod:`sjf_core.admission._ticket`); a store calls its transitions.

This module imports no store: :func:`sjf_core.admission._stores.make_queue` chooses one
(what :class:`~sjf_core.Scheduler` uses), or construct
:class:`~sjf_core.admission._local.LocalAdmissionQueue` /
:class:`~sjf_core.admission._redis.RedisAdmissionQueue` directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from sjf_core.admission._events import Emitter, QueueEvents, QueueStats, emit_failed
from sjf_core.admission._ticket import GrantPath, Ticket  # noqa: F401  (GrantPath: re-exported)

if TYPE_CHECKING:
    from sjf_core.policy._policies import Policy, RequestMeta
    from sjf_core.predict._prediction import Prediction


class AdmissionQueue:
    """The contract of one backend's admission queue (see the module docstring).

    Attributes: ``slots`` (int >= 1), ``policy``, ``name`` (the backend key),
    ``lease_ttl_s`` (float or None), ``clock`` (monotonic seconds), ``listeners``
    (:class:`~sjf_core.admission._events.QueueEvents`), ``stats``
    (:class:`~sjf_core.admission._events.QueueStats`), ``store`` ("local" or "redis"),
    ``overload`` and ``rate_limit`` (None unless applied at this queue's door), ``grants``
    (its :class:`GrantPath`).
    """

    store = "?"
    slots: int
    policy: "Policy"
    name: str
    lease_ttl_s: float | None
    clock: Callable[[], float]
    listeners: list[QueueEvents]
    stats: QueueStats
    overload: Any = None
    rate_limit: Any = None
    grants: "GrantPath"
    _emitter: Emitter | None = None  # the listeners' methods per event, made on first use

    def __init__(self, *args: Any, **kwargs: Any):
        raise TypeError("AdmissionQueue is the contract; make a store with LocalAdmissionQueue(...), "
                        "RedisAdmissionQueue(...) or sjf_core.admission._stores.make_queue(...)")

    # ---- what callers use -------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        """Tickets holding a slot now."""
        raise NotImplementedError

    @property
    def waiting(self) -> int:
        """Tickets waiting for a slot now."""
        raise NotImplementedError

    @property
    def tau_s(self) -> float:
        """Current τ in seconds (inf when off)."""
        raise NotImplementedError

    def ticket(self, prediction: "Prediction | None" = None, meta: "RequestMeta | None" = None,
               arrival: float | None = None,
               scorer: "Callable[[], tuple[Prediction | None, RequestMeta | None]] | None" = None) -> "Ticket":
        """Make a ticket for one request (it waits only once acquired).

        Args:
            prediction: the predicted length, or None for an unscored request,
                which is placed at the policy's neutral key (fail-open).
            meta: request metadata (max_tokens, priority, deadline).
            arrival: original arrival on this queue's clock (seconds), e.g. for an
                SDK retry; default now.
            scorer: with ``prediction`` None, a callable returning this request's
                ``(prediction, meta)`` (``meta`` then replaces the argument). A store
                that needs the class at the door (the Redis store; a local queue with
                overload control or a rate limit) calls it at once; the local queue
                otherwise only when there is an order to decide: at submit when the
                request would wait, or when a later request arrives while it runs. A
                request granted a slot at once and alone until its release is never
                scored: its events carry ``entry.scored = False`` (metrics label it
                ``idle``) and it feeds only true-class statistics.
        """
        if scorer is not None and prediction is None:
            if self._scores_at_door():
                prediction, meta = scorer()
                scorer = None
        else:
            scorer = None
        return self._new_ticket(prediction, meta, arrival, scorer)

    def _scores_at_door(self) -> bool:
        """True when this store needs a request's class before it enters the queue."""
        raise NotImplementedError

    def _new_ticket(self, prediction, meta, arrival, scorer) -> "Ticket":
        """The store's ticket; ``scorer`` (or None) is left to the store to call later."""
        raise NotImplementedError

    async def view(self, limit: int = 100) -> dict:
        """A read-only snapshot: who holds a slot and who waits (at most ``limit``), in
        dispatch order, with predicted class and tokens, band, tenant, time waited and when
        the starvation guard promotes each; never prompt text. Changes nothing. Each store
        gives it (the shape: :mod:`sjf_core.admission._view`)."""
        raise NotImplementedError

    # ---- what the ticket asks of its store (called by Ticket only) --------------------
    def _free(self, t: "Ticket", answer_tokens: int | None, expired: bool) -> float:
        """``t`` was just marked RELEASED (once): free its slot, count, learn; return its
        service time (s). The ticket then emits on_complete and calls :meth:`_refill`."""
        raise NotImplementedError

    def _refill(self) -> None:
        """Grant freed slots to waiters (work-conserving; a no-op where the server does it)."""

    def _emit(self, name: str, *args) -> None:
        """Notify the listeners of event ``name`` (one that raises is logged, never raised)."""
        listeners, em = self.listeners, self._emitter
        if em is None:
            em = self._emitter = Emitter(listeners)
        fns = em.by_name.get(name) if listeners is em.listeners and em.seen == listeners else None
        if fns is None:
            fns = em.calls(listeners, name)
        for fn in fns:
            try:
                fn(self, *args)
            except Exception:  # a listener must never break admission
                emit_failed(fn, name)
