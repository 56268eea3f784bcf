"""A contended many-model box in Redis mode: one shared turn for the box across workers.

Contract: in Redis mode each model runner's queue is a Redis queue (its slots shared by every
worker, as any backend's). A box whose runners compete — a box-wide cap, or fewer models held
at once than models in use — also gets a **box queue** in Redis (``box:<backend>``), shared by
every worker: a request takes a ticket on it first, then on its runner's queue.
:class:`BoxedTicket` is that pair with one ticket's face (the runner's, for the adapters):
``acquire`` waits for both (box first; on any raise it holds neither), ``release`` gives back
the runner's slot then the box's.

* The box queue's slots are what the box runs at once: its cap, else the slots of the
  ``max_loaded`` runners with the most slots (one model at a time: that model's slots).
* Its order is **in seconds**: each entry's key is its expected service on its runner (the
  runner's measured speed, this worker's view) plus the load (and the reload of the model it
  would evict) when its model was not loaded at enqueue — the box turn's batch ratio of one
  request. Requests of the loaded model sort before those that need a load, so one model's
  waiters are served together; the store's own starvation guard runs on it as on any queue.
* Every worker reads the same box (its listing) and measures the same runners, so the keys
  agree; the slots and the order are Redis's, shared.

Limits (docs/boxes.md, "Redis mode"): the key is fixed at enqueue (the in-process box turn
recomputes the batch ratio at each grant), so under steady traffic a switch may come a batch
earlier than in one process.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sjf_core.policy.promotion import REQUEST_OVERHEAD_TOKENS
from sjf_core.predict._prediction import Prediction

#: a contended box's loaded set is read again at most this often while requests come (Redis
#: mode: the other workers' starts change it), seconds
REREAD_S = 0.5


class BoxedTicket:
    """A runner's ticket behind the box queue's (module docstring); everything but
    ``acquire``, ``release``, ``arelease``, ``renew``, ``running``, ``waiting``, ``finished``
    is the runner ticket's."""

    __slots__ = ("runner", "box", "on_turn")

    def __init__(self, runner: Any, box: Any, on_turn: Any = None):
        self.runner = runner
        self.box = box
        self.on_turn = on_turn  # called when the box queue's slot is granted

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runner, name)

    @property
    def running(self) -> bool:
        return self.runner.running

    @property
    def waiting(self) -> bool:
        return self.box.waiting or (self.box.running and self.runner.waiting)

    @property
    def finished(self) -> bool:
        return self.runner.finished and self.box.finished

    async def acquire(self, timeout: float | None = None) -> None:
        await self.box.acquire(timeout)
        if self.on_turn is not None:
            self.on_turn()
        try:
            await self.runner.acquire(timeout)
        except BaseException:
            self.box.release(None)
            raise

    def release(self, answer_tokens: int | None = None) -> bool:
        done = self.runner.release(answer_tokens)
        self.box.release(answer_tokens)
        return done

    async def arelease(self, answer_tokens: int | None = None) -> bool:
        done = await self.runner.arelease(answer_tokens)
        await self.box.arelease(answer_tokens)
        return done

    def renew(self) -> None:
        self.runner.renew()
        self.box.renew()


def box_slots(live_box: Any) -> int:
    """What the box runs at once (module docstring)."""
    b = live_box.box
    if b.cap is not None:
        return max(1, int(b.cap))
    slots = sorted((q.slots for q in live_box.queues.values()), reverse=True) or [1]
    slots += [slots[-1]] * max(0, (b.max_loaded or 0) - len(slots))  # runners not used here yet
    return max(1, sum(slots[: b.max_loaded or len(slots)]))


def contended(live_box: Any) -> bool:
    """True when the box's runners compete: a cap, or a number of models held at once that was
    learned (here or by another worker) or set, below the models the box serves."""
    b = live_box.box
    if b.cap is not None:
        return True
    served = max(len(live_box.queues), live_box.n_models)
    return live_box.fit_known and b.max_loaded is not None and b.max_loaded < served


def side_by_side(live_box: Any) -> bool:
    """True when nothing on the box competes and nothing is left to learn: no cap, and its
    last reading listed every model it serves as loaded (a box holding all its models at once
    cannot be one whose models take turns). A reading before a request then changes neither its
    key nor what is known to fit. The tracking's own loaded set does not count: before the fit
    is learned it holds every model that was started."""
    return live_box.box.cap is None and not contended(live_box) and live_box.listed_all


def seconds_prediction(live_box: Any, member: Any, prediction: Any, now: float) -> Prediction:
    """``prediction`` with its expected tokens turned into the request's expected seconds on
    ``member`` (load included) at the reference speed: the box queue's key (module docstring)."""
    rule = live_box.rule
    tokens = getattr(prediction, "expected_tokens", 0.0) or 0.0
    work = tokens + REQUEST_OVERHEAD_TOKENS
    seconds = work * rule.spt(member) + rule.load_cost(member, now)
    if rule.load_cost(member, now) > 0 and rule.return_loads:
        gone = live_box.box.victim(member, now)  # its waiters are in Redis, out of sight: assume some
        victim = live_box.box.runner(gone) if gone is not None else None
        if victim is not None:
            seconds += victim.load_s if victim.load_s > 0 else rule.default_load_s
    from sjf_core.policy._placement import DEFAULT_S_PER_TOKEN

    ref = max(0.0, seconds / DEFAULT_S_PER_TOKEN - REQUEST_OVERHEAD_TOKENS)
    probs = (prediction.p_short, prediction.p_medium, prediction.p_long) if prediction is not None else (1.0, 0.0, 0.0)
    return Prediction.from_probs(probs, ref)




class SharedFit:
    """What the workers learned about each box, shared in Redis so that every worker's box
    turn starts from the same view: how many models it holds at once (hash
    ``<prefix>:boxes:max_loaded``, box key → the smallest count learned) and each runner's
    measured seconds per token and load time (hash ``<prefix>:boxes:runners``, runner key →
    ``"spt,load_s"``, the last worker's EWMA, written at most once a second per runner), and
    the model of each box queue's last grant (hash ``<prefix>:boxes:current``): what a new
    request's key must count as loaded.
    Never raises (no answer: None / nothing stored)."""

    def __init__(self, url: str, prefix: str = "sjf"):
        self.url = url
        self.key = f"{prefix}:boxes:max_loaded"
        self.runners_key = f"{prefix}:boxes:runners"
        self.current_key = f"{prefix}:boxes:current"
        self._written: dict = {}

    async def _call(self, fn):
        try:
            import redis.asyncio as ra

            c = ra.Redis.from_url(self.url, socket_timeout=2.0, socket_connect_timeout=2.0)
            try:
                return await fn(c)
            finally:
                await c.aclose()
        except Exception as exc:  # the shared view is an optimisation: each worker still learns
            _log().debug("shared box view unavailable (%s)", type(exc).__name__)
            return None

    async def get(self, box: str) -> int | None:
        v = await self._call(lambda c: c.hget(self.key, box))
        return int(v) if v is not None else None

    async def put(self, box: str, n: int) -> None:
        async def put(c):
            old = await c.hget(self.key, box)
            if old is None or int(old) > n:
                await c.hset(self.key, box, int(n))
        await self._call(put)

    async def current(self, box: str) -> str | None:
        """The model of the box queue's last grant (what the box runs or just ran), or None."""
        v = await self._call(lambda c: c.hget(self.current_key, box))
        return v.decode() if isinstance(v, bytes) else v

    def note_current(self, box: str, model: str) -> None:
        """A worker's request of ``model`` got the box queue's slot (in the background)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.create_task(self._call(lambda c: c.hset(self.current_key, box, model)))

    async def runners(self) -> dict:
        """``{runner key: (spt, load_s)}`` as stored (NaN: unknown)."""
        raw = await self._call(lambda c: c.hgetall(self.runners_key)) or {}
        out = {}
        for k, v in raw.items():
            try:
                spt, load = (float(x) for x in (v.decode() if isinstance(v, bytes) else v).split(","))
                out[k.decode() if isinstance(k, bytes) else k] = (spt, load)
            except (ValueError, AttributeError):
                continue
        return out

    def note_runner(self, key: str, spt: float, load_s: float, now: float) -> None:
        """Store a runner's speed and load time (in the background, at most once a second)."""
        if now - self._written.get(key, -1e9) < 1.0 or not (spt > 0 or load_s > 0):
            return
        self._written[key] = now
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.create_task(self._call(lambda c: c.hset(self.runners_key, key, f"{spt},{load_s}")))


def _log():
    import logging

    return logging.getLogger("sjf_core.admission.boxes")


__all__ = ["BoxedTicket", "SharedFit", "box_slots", "contended", "seconds_prediction", "side_by_side"]
