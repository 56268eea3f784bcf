"""The :class:`~sjf_core._scheduler.Scheduler`'s many-model boxes (docs/boxes.md): which queue
a request for a model takes, and reading what a box is. A mixin: the registry lives in
:mod:`sjf_core.admission._box_registry`, the scheduler only exposes it to the adapters."""

from __future__ import annotations

from typing import Any


class BoxWiring:
    """``Scheduler.queue_key``, ``read_box``, ``box_status``, and the runner queues' wiring."""

    @staticmethod
    def base_key(key: str) -> str:
        """The backend key of a queue key (a model runner's: its backend's)."""
        from sjf_core.admission._boxes import split_runner_key

        return split_runner_key(key)[0]

    def attach_runner(self, key: str, queue: Any) -> None:
        """A new queue of a model runner's key joins its backend's box (others: nothing)."""
        from sjf_core.admission._box_registry import BoxRegistry
        from sjf_core.admission._boxes import RUNNER_SEP

        if RUNNER_SEP in key:
            BoxRegistry.of(self).attach(key, queue)

    def queue_key(self, backend: Any, model: Any = None) -> str:
        """The queue of a request for ``model`` on ``backend``: its runner on a box read by
        :meth:`read_box` that serves it side by side, else the backend's own."""
        from sjf_core._scheduler import backend_key
        from sjf_core.admission._box_registry import BoxRegistry

        return BoxRegistry.of(self).queue_key(backend_key(backend), model)

    async def read_box(self, backend: Any, api_base: str, headers: Any = None, hint: str | None = None) -> dict:
        """Ask the server at ``api_base`` once what it is (kind, models, the loaded ones;
        concurrent first callers share the answer); the box's status. Never raises."""
        from sjf_core._scheduler import backend_key
        from sjf_core.admission._box_registry import BoxRegistry

        return (await BoxRegistry.of(self).discover(backend_key(backend), api_base, headers, hint)).status()

    def box_status(self) -> list:
        """Every box read or used so far: kind, cap, loaded models, each runner's queue."""
        return self.boxes.status() if getattr(self, "boxes", None) is not None else []
