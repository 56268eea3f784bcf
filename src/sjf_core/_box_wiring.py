"""The :class:`~sjf_core._scheduler.Scheduler`'s registries of pools and many-model boxes
(docs/pool.md, docs/boxes.md): made on first use with their Prometheus views; which queue a
request for a model takes; reading what a box is. A mixin of the composition: the registries
live in :mod:`sjf_core.admission` (``_pool_members``, ``_box_registry``), their metrics in
:mod:`sjf_core.ext`; the scheduler only wires them and exposes them to the adapters."""

from __future__ import annotations

import logging
from typing import Any


def _log() -> logging.Logger:
    return logging.getLogger("sjf_core.admission.boxes")


class BoxWiring:
    """``Scheduler.pool_registry``, ``box_registry``, ``queue_key``, ``read_box``,
    ``box_status``, and the runner queues' wiring."""

    def pool_registry(self):
        """The :class:`~sjf_core.admission._pool_members.PoolRegistry` (made on first use)."""
        from sjf_core.admission._pool_members import PoolRegistry

        with self._lock:
            if self.pools is None:
                PoolRegistry.of(self)
                if self.config.metrics:
                    from sjf_core.ext._pool_metrics import watch_pools

                    watch_pools(self.pools)  # the pools' Prometheus view (read at scrape time)
            return self.pools

    def box_registry(self):
        """The :class:`~sjf_core.admission._box_registry.BoxRegistry` (made on first use; its
        runners are the pool registry's members: one object per queue key)."""
        from sjf_core.admission._box_registry import BoxRegistry

        with self._lock:
            if self.boxes is None:
                shared = None
                if self.config.redis_url:
                    from sjf_core.admission._box_redis import SharedFit

                    shared = SharedFit(self.config.redis_url, self.config.redis.prefix)
                from sjf_core.policy._placement import Placement

                aware = self.config.box_order != "tokens"
                self.boxes = BoxRegistry(self.pool_registry().member, self.config.box_settings, self.slots_for,
                                         self.set_slots, rule=lambda: Placement([], speed_aware=aware), shared=shared)
                if self.config.metrics:
                    from sjf_core.ext._box_metrics import watch_boxes

                    watch_boxes(self.boxes)  # the boxes' Prometheus view (read at scrape time)
            return self.boxes

    @staticmethod
    def base_key(key: str) -> str:
        """The backend key of a queue key (a model runner's: its backend's)."""
        from sjf_core.admission._boxes import split_runner_key

        return split_runner_key(key)[0]

    def stack_ledger(self, key: str, ledger: Any) -> None:
        """A model runner's slot ledger (every path's: its queue, its last-resort gate) holds a
        unit of its box's cap with each of its own (``LastResort.on_ledger``)."""
        from sjf_core.admission._boxes import RUNNER_SEP, split_runner_key

        if RUNNER_SEP in key:
            ledger.stack(self.box_registry().box(split_runner_key(key)[0]).ledger)

    def attach_runner(self, key: str, queue: Any) -> None:
        """A new queue of a model runner's key joins its backend's box (others: nothing)."""
        from sjf_core.admission._boxes import RUNNER_SEP

        if RUNNER_SEP in key:
            self.box_registry().attach(key, queue)

    def box_ticket(self, key: str, ticket: Any, prediction: Any, meta: Any, arrival: Any) -> Any:
        """In Redis mode, a runner ticket of a contended box behind the box's shared queue
        (:mod:`sjf_core.admission._box_redis`); else ``ticket`` itself. Never raises."""
        from sjf_core.admission._boxes import RUNNER_SEP, split_runner_key

        if RUNNER_SEP not in key or not self.config.redis_url or getattr(self, "boxes", None) is None:
            return ticket
        try:
            from sjf_core.admission import _box_redis as R

            b = self.boxes.boxes.get(split_runner_key(key)[0])
            member = getattr(getattr(self.queue(key), "gate", None), "member", None)
            if b is None or member is None:
                return ticket
            self.boxes.refresh(b, every_s=R.REREAD_S)  # the other workers: what the box holds, what fits
            if not R.contended(b):
                return ticket
            bkey, n = "box:" + b.key, R.box_slots(b)
            if bkey not in self.queues:
                self.set_slots(bkey, n)
            bq = self.queue(bkey)
            bq.slots = n
            box_t = bq.ticket(R.seconds_prediction(b, member, prediction, b.clock()), meta, arrival)
            return R.BoxedTicket(ticket, box_t, lambda: b.shared and b.shared.note_current(b.key, member.model))
        except Exception:
            from sjf_core._faults import note_fault

            note_fault(_log(), "box queue unavailable; the request takes its runner's queue alone")
            return ticket

    def queue_key(self, backend: Any, model: Any = None) -> str:
        """The queue of a request for ``model`` on ``backend``: its runner on a box read by
        :meth:`read_box` that serves it side by side, else the backend's own."""
        from sjf_core.settings import normalise as backend_key

        return self.box_registry().queue_key(backend_key(backend), model)

    async def read_box(self, backend: Any, api_base: str, headers: Any = None, hint: str | None = None) -> str:
        """Ask the server at ``api_base`` once what it is (kind, models, the loaded ones;
        concurrent first callers share the answer; later calls return at once); its kind
        ("plain" when it did not say). Never raises."""
        from sjf_core.settings import normalise as backend_key

        reg, key = self.box_registry(), backend_key(backend)
        b = await reg.discover(key, api_base, headers, hint)
        if self.config.redis_url:  # the other workers' starts: what the box holds now
            from sjf_core.admission._box_redis import REREAD_S, side_by_side

            live = reg.boxes.get(key)
            # A box read as holding all its models at once is read again in the background: read
            # inline, a listing round trip delayed each of its requests. Any other box is read
            # before the request: its key needs the loaded set, and what fits is learned there.
            if live is not None and side_by_side(live):
                reg.refresh(live, every_s=REREAD_S)
            else:
                await reg.fresh(key, REREAD_S)
        return b.kind

    def box_status(self) -> list:
        """Every box read or used so far: kind, cap, loaded models, each runner's queue."""
        return self.boxes.status() if getattr(self, "boxes", None) is not None else []
