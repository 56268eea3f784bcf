"""The many-model boxes of one scheduler: which queue a request for a model takes, and what
each box is (docs/boxes.md).

Contract:

* :meth:`BoxRegistry.discover` reads a backend once (:func:`~sjf_core.admission._box_read.read_box`,
  awaited by the first request of that backend; concurrent first requests share it) and
  configures its :class:`~sjf_core.admission._boxes.LiveBox`: kind, catalogue, loaded set,
  the runners' slots where the box says them, and the defaults of its kind
  (:data:`KIND_DEFAULTS`). Operator settings (``settings(backend)``) win over all of it.
* :meth:`BoxRegistry.queue_key` is the queue key of a request for ``model`` on ``backend``:
  the model's **runner** (``"<backend>|<model>"``) when the box runs models side by side and
  serves that model (its catalogue, or the operator said what the box is), else the
  backend's own key — one queue for the URL, as for a server that serves one model.
* :meth:`BoxRegistry.refresh` re-reads a box's loaded set in the background, shortly after a
  request that loads a model was sent and after it ended: what the box holds corrects the
  tracking; a model asked for that the box does not load (it waits for room) or an eviction
  the tracking did not expect teaches how many models fit.

Never raises into a request: a box that cannot be read is a plain backend.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any, Callable

from sjf_core._faults import note_fault
from sjf_core.admission._box_read import ollama_names, read_box, read_loaded
from sjf_core.admission._boxes import RUNNER_SEP, LiveBox, runner_key, split_runner_key
from sjf_core.policy._placement import Placement

log = logging.getLogger("sjf_core.admission.boxes")

#: what a box of each kind is, unless settings say otherwise: (cap, max_loaded, keep_alive_s).
#: "ollama": OLLAMA_NUM_PARALLEL per runner (the runner queue's slots), OLLAMA_MAX_LOADED_MODELS 3,
#: keep_alive 5 min; "lmstudio": JIT loading with auto-evict (one JIT model at a time), idle
#: TTL 60 min; "llama-swap": one model at a time unless its groups say otherwise, no TTL;
#: "llama.cpp-router": --models-max 4 (LRU); "serial" (settings only: llama-cpp-python's
#: --config_file server): one model at a time, one answer at a time; "unknown" / "plain": one
#: queue per URL as before (a box-wide cap of the URL's slots).
KIND_DEFAULTS = {"ollama": (None, 3, 300.0), "lmstudio": (None, 1, 3600.0), "llama-swap": (None, 1, math.inf),
                 "llama.cpp-router": (None, 4, math.inf), "serial": (1, 1, math.inf)}
#: kinds whose runners run side by side (a runner queue per model)
MANY_MODEL_KINDS = tuple(KIND_DEFAULTS)
#: a box's loaded set is read again this long after a request that loads a model was sent,
#: seconds (time for the box to start the load, or to show it waits for room)
REFRESH_DELAY_S = 0.3


class BoxRegistry:
    """The boxes of one scheduler (module docstring).

    Args:
        member: ``member(runner key) -> LiveMember`` (the pools' registry: one object per key).
        settings: ``settings(backend key) -> dict`` with any of ``kind``, ``cap``,
            ``max_loaded``, ``keep_alive_s``, ``models`` (``{name: {"slots": n}}``) set
            for that backend by the operator.
        url_slots: ``url_slots(backend key) -> int``: the backend's ``slots``, the cap of a
            box whose kind is not known.
        set_slots: ``set_slots(runner key, n)``: a runner's slots as the box says them.
        rule: ``() -> Placement`` for a new box.
        shared: Redis mode's :class:`~sjf_core.admission._box_redis.SharedFit` (None: this
            process learns alone).
    """

    def __init__(self, member: Callable[[str], Any], settings: Callable[[str], dict] | None = None,
                 url_slots: Callable[[str], int] | None = None, set_slots: Callable[[str, int], Any] | None = None,
                 rule: Callable[[], Placement] | None = None, shared: Any = None):
        self._member = member
        self.shared = shared  # Redis mode: what fits, as any worker learned it (_box_redis.SharedFit)
        self._settings = settings or (lambda key: {})
        self._url_slots = url_slots or (lambda key: 1)
        self._set_slots = set_slots or (lambda key, n: None)
        self._rule = rule or (lambda: Placement([]))
        self.boxes: dict[str, LiveBox] = {}
        self._reads: dict[str, asyncio.Future] = {}

    # ---- boxes ------------------------------------------------------------------------------
    def box(self, backend: str) -> LiveBox:
        """The box of ``backend`` (made on first use, configured by settings and kind)."""
        b = self.boxes.get(backend)
        if b is None:
            b = self.boxes[backend] = LiveBox(backend, rule=self._rule())
            b.refresher, b.shared = self.refresh, self.shared
            self.configure(b, None)
        return b

    def configure(self, b: LiveBox, kind: str | None) -> None:
        """Set ``b``'s kind, cap, loaded-set limit and keep-alive: the operator's settings,
        else its kind's defaults (:data:`KIND_DEFAULTS`)."""
        cfg = dict(self._settings(b.key) or {})
        b.kind = cfg.get("kind") or kind or b.kind
        cap, max_loaded, keep = KIND_DEFAULTS.get(b.kind, (self._url_slots(b.key), None, math.inf))
        b.box.keep_alive_s = cfg.get("keep_alive_s", keep)
        for model, n in (cfg.get("models") or {}).items():  # the operator's slots of a model's runner
            self._set_slots(runner_key(b.key, model), n)
        b.set_max_loaded(cfg.get("max_loaded", max_loaded), known="max_loaded" in cfg or "kind" in cfg)
        b.set_cap(cfg.get("cap", cap))

    async def discover(self, backend: str, api_base: str, headers: Any = None, hint: str | None = None) -> LiveBox:
        """Read ``backend`` once (module docstring); its box. Never raises."""
        fut = self._reads.get(backend)
        if fut is None:
            fut = self._reads[backend] = asyncio.get_running_loop().create_future()
            b = self.box(backend)
            b.source = (api_base, dict(headers or {}))
            forced = (self._settings(backend) or {}).get("kind")
            rep = None
            if forced not in ("plain", "serial"):  # those list nothing: what the operator said is all
                try:
                    rep = await read_box(api_base, headers, hint=forced or hint)
                except Exception:
                    note_fault(log, "box listing failed; the backend is one queue")
            self._learn(b, rep)
            await self._shared_fit(b)
            log.info("%s", self.describe(b, api_base))
            fut.set_result(True)
        await asyncio.shield(fut)
        return self.boxes[backend]

    async def _shared_fit(self, b: LiveBox) -> None:
        """Take what the other workers learned about ``b`` (Redis mode): what fits, and each
        runner's speed and load time where this worker has not measured them."""
        if self.shared is None or b.kind not in MANY_MODEL_KINDS:
            return
        import math

        known = await self.shared.runners()
        for r in b.box.runners:
            spt, load = known.get(r.key, (math.nan, math.nan))
            if spt > 0 and not r.s_per_token > 0:
                r.s_per_token = spt
            if load > 0 and not r.load_s > 0:
                r.load_s = load
        if self._fixed(b):
            return
        n = await self.shared.get(b.key)
        if n is not None and n >= 1 and (b.box.max_loaded is None or n < b.box.max_loaded):
            b.set_max_loaded(n, known=True)

    def describe(self, b: LiveBox, api_base: str) -> str:
        """The line logged when ``b`` is first read: what it is and how it is admitted
        (URLs without credentials, model names and numbers only)."""
        from sjf_core.settings import backend_label

        url, key = backend_label(str(api_base).rstrip("/")), backend_label(b.key)
        name = url if url == key else f"{url} (on the status page: {key})"
        if b.kind not in MANY_MODEL_KINDS:
            return f"box {name} read: it lists no models ({b.kind}): one queue for the URL"
        box, cfg = b.box, self._settings(b.key) or {}
        why = ("set" if "max_loaded" in cfg else f"the set kind {b.kind}'s" if "kind" in cfg else "learned"
               if b.fit_known else f"{b.kind}'s default until the box shows fewer fit")
        held = "all its models" if box.max_loaded is None else f"{box.max_loaded} model(s)"
        return (f"box {name} read: kind {b.kind}, holds {held} at once ({why}), box-wide cap "
                f"{'none' if box.cap is None else box.cap}, loaded now: {', '.join(sorted(box.loaded)) or '-'}; "
                f"a queue per model runner")

    def _fixed(self, b: LiveBox) -> bool:
        return (self._settings(b.key) or {}).get("max_loaded") is not None

    async def fresh(self, backend: str, max_age_s: float) -> None:
        """Redis mode: read a box's loaded set now when the last reading is older than
        ``max_age_s`` (the other workers' starts change it; a request's key in the box queue is
        fixed when it enters). Never raises."""
        b = self.boxes.get(backend)
        if self.shared is None or b is None or b.source is None or b.kind not in MANY_MODEL_KINDS:
            return
        if b.fit_known and b.box.max_loaded == 1:  # what runs now: the box queue's last grant
            cur = await self.shared.current(b.key)
            if cur is not None and b.box.runner(cur) is not None and not b.box.is_loaded(b.box.runner(cur), b.clock()):
                b.box.set_loaded([cur], b.clock())
        if b.reading or b.clock() - b.read_at < max_age_s:
            return
        b.reading = True
        try:
            loaded = await read_loaded(b.source[0], b.kind, b.source[1])
            if loaded is not None:
                self._loaded(b, loaded, set())
            await self._shared_fit(b)
        except Exception:
            note_fault(log, "box loaded set unreadable; the tracking goes on")
        finally:
            b.read_at = b.clock()
            b.reading = False

    def _learn(self, b: LiveBox, rep: Any) -> None:
        if rep is None:
            self.configure(b, "plain")
            return
        b.catalogue = set(rep.catalogue)
        b.n_models = len({n[:-7] if n.endswith(":latest") else n for n in rep.catalogue})
        self.configure(b, rep.kind)
        b.box.set_loaded(self.one_name_each(b, rep.loaded), b.clock())
        b.listed_all = len(b.box.loaded) >= max(1, b.n_models)
        b.read_at = b.clock()
        for model, n in rep.slots.items():
            self._set_slots(runner_key(b.key, model), n)

    def serves(self, b: LiveBox, model: str) -> bool:
        """True when ``model`` is one of ``b``'s runners (module docstring)."""
        if b.kind not in MANY_MODEL_KINDS:
            return False
        if (self._settings(b.key) or {}).get("kind"):
            return True  # the operator said what the box is: every model is a runner
        names = ollama_names(model) if b.kind == "ollama" else {model}
        return bool(names & b.catalogue)

    def queue_key(self, backend: str, model: Any) -> str:
        """The queue key of a request for ``model`` on ``backend`` (module docstring); the
        backend's own until the box has been read."""
        b = self.boxes.get(backend)
        m = str(model).strip() if model is not None else ""
        if b is None or not m or RUNNER_SEP in m or not self.serves(b, m):
            return backend
        return runner_key(backend, m)

    def attach(self, key: str, queue: Any) -> LiveBox:
        """Make ``queue`` (of runner ``key``) a runner of its backend's box."""
        backend, model = split_runner_key(key)
        b = self.box(backend)
        m = self._member(key)
        m.model = model
        b.attach(m, queue)
        if b.box.loaded:  # a model read as loaded before its runner existed: under the runner's name
            b.box.set_loaded(self.one_name_each(b, b.box.loaded), b.clock())
        return b

    def one_name_each(self, b: LiveBox, names) -> set:
        """``names`` as the box's runners spell them: on Ollama a model and its ``:latest``
        tag are one model (the runner's name where one serves it, else the name without
        the tag), so one loaded model never counts twice: a second name would look like an
        idle model to evict beside a busy one, letting another model start a load there."""
        if b.kind != "ollama":
            return set(names)
        out = set()
        for n in names:
            same = ollama_names(n)
            r = next((r.model for r in b.box.runners if r.model in same), None)
            out.add(r if r is not None else (n[:-7] if n.endswith(":latest") else n))
        return out

    # ---- the loaded set, again --------------------------------------------------------------
    def refresh(self, b: LiveBox, expect: str | None = None, every_s: float | None = None) -> None:
        """Re-read ``b``'s loaded set in the background, :data:`REFRESH_DELAY_S` from now
        (``expect``: a model a request just started to load; ``every_s``: not if read that
        recently). Module docstring."""
        if b.source is None or b.kind not in MANY_MODEL_KINDS:
            return
        if every_s is not None and (b.reading or b.clock() - b.read_at < every_s):
            return
        if expect is not None:
            b.expect.add(expect)
        if b.reading:
            b.again = True
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        b.reading = True
        loop.create_task(self._refresh(b))

    async def _refresh(self, b: LiveBox) -> None:
        try:
            while True:
                b.again = False
                await asyncio.sleep(REFRESH_DELAY_S)
                expect, b.expect = set(b.expect), set()
                loaded = await read_loaded(b.source[0], b.kind, b.source[1])
                if loaded is not None:
                    self._loaded(b, loaded, expect)
                await self._shared_fit(b)
                if not b.again:
                    break
        except Exception:
            note_fault(log, "box loaded set unreadable; the tracking goes on")
        finally:
            b.read_at = b.clock()
            b.reading = False

    def _loaded(self, b: LiveBox, loaded: set, expect: set) -> None:
        """What the box holds: the tracking follows; a model that was asked for and is not
        there (the box waits for room) or one evicted although the tracking had room teach
        how many models fit, unless the operator set ``max_loaded``."""
        box = b.box
        before = set(box.loaded)
        box.set_loaded(self.one_name_each(b, loaded), b.clock())
        b.listed_all = len(box.loaded) >= max(1, b.n_models)
        fixed = self._fixed(b)
        held = len(box.loaded)
        missing = {m for m in expect if m not in box.loaded}
        waiting = bool(missing & b.suspect)  # missing at two readings in a row: it waits for room
        b.suspect = missing
        if missing and not waiting:
            b.expect |= missing
            b.again = True  # read once more before learning anything from it
        evicted = bool(before - set(box.loaded)) and len(before) > held
        if not fixed and held >= 1 and (waiting or evicted) and (box.max_loaded is None or held < box.max_loaded):
            log.warning("box %s holds %d model(s) at once (learned from its listing)", b.key, held)
            b.set_max_loaded(held, known=True)
            if self.shared is not None:
                asyncio.get_running_loop().create_task(self.shared.put(b.key, held))
        b.wake_all()

    def status(self) -> list[dict]:
        return [b.status() for b in list(self.boxes.values())]


__all__ = ["BoxRegistry", "KIND_DEFAULTS", "MANY_MODEL_KINDS", "REFRESH_DELAY_S"]
