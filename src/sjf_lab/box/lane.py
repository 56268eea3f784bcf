"""The path one request takes to the generator: a *lane* (the emulator's seam for boxes).

Contract: the emulator asks its lane to ``acquire`` (wait for the right to generate; the
client may leave meanwhile), then opens a ``pace`` (tokens due over time), then ``release``s,
and calls ``done`` when its handler returns, on every path. Two lanes:

* :class:`SerialLane`: the one-model emulator's FIFO of ``slots`` at a constant speed
  (unchanged behaviour);
* :class:`BoxLane`: one request for one model of a :class:`~sjf_lab.box.scheduler.Box`:
  the box's pending queue and the model's load, then the model runner's own slots; answers
  share the box's speed (:mod:`sjf_lab.box.speed`). ``record()`` adds ``model``,
  ``t_sched`` (handed to its loaded runner), ``load_s`` (seconds it waited for its model's
  load) and ``load`` (it started that load) to the request's record.

``wait`` is the emulator's queued wait: ``await wait(request, future, withdraw)`` returns
True once the future resolves, or a response when the client left first (after calling
``withdraw``).
"""

from __future__ import annotations

import time

from sjf_lab.box.scheduler import Box, BoxBusy, Pending, Runner
from sjf_lab.box.speed import ConstantPace


class SerialLane:
    """The one-model emulator's ``slots`` (FIFO), constant speed."""

    def __init__(self, slots, tokens_per_s: float):
        self.slots = slots
        self.tokens_per_s = tokens_per_s

    async def acquire(self, request, wait):
        fut = self.slots.try_acquire()
        if fut is None:
            return True
        return await wait(request, fut, lambda: self.slots.withdraw(fut))

    def pace(self, t0: float) -> ConstantPace:
        return ConstantPace(self.tokens_per_s, t0)

    def release(self) -> None:
        self.slots.release()

    def done(self) -> None:
        pass

    def record(self) -> dict:
        return {}


class BoxLane:
    """One request for one model of a box (module docstring)."""

    def __init__(self, box: Box, spec, keep_alive_s: float | None = None, probe: bool = False):
        self.box = box
        self.spec = spec
        self.keep_alive_s = keep_alive_s
        self.probe = probe  # our idle probe: served like any request, counted apart (not in flight)
        self.runner: Runner | None = None
        self._pending: Pending | None = None
        self._t_sched: float | None = None
        self._slot = False
        if not probe:
            box.arrive(spec)

    async def acquire(self, request, wait):
        from aiohttp import web

        try:
            p = self._pending = self.box.enqueue(self.spec, self.keep_alive_s)
        except BoxBusy as exc:
            return web.json_response({"error": str(exc)}, status=503)
        got = await wait(request, p.future, lambda: self.box.withdraw(p))
        if got is not True:
            return got
        self.runner = runner = p.future.result()
        self._t_sched = time.monotonic()
        fut = runner.slots.try_acquire()
        if fut is not None:
            def give_up():
                runner.slots.withdraw(fut)
                self.box.finished(runner)
            got = await wait(request, fut, give_up)
            if got is not True:
                return got
        self._slot = True
        return True

    def pace(self, t0: float):
        return self.box.speed.start(self.box.speed_of(self.spec), runner=self.spec.name)

    def release(self) -> None:
        if self._slot and self.runner is not None:
            self._slot = False
            self.runner.slots.release()
            self.box.finished(self.runner)

    def done(self) -> None:
        if not self.probe:
            self.box.leave(self.spec)

    def record(self) -> dict:
        p = self._pending
        return {"model": self.spec.name, "t_sched": round(self._t_sched, 4) if self._t_sched else None,
                "load_s": round(p.load_s, 4) if p else 0.0, "load": bool(p and p.triggered_load)}


__all__ = ["SerialLane", "BoxLane"]
