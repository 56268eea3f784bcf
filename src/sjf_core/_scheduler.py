"""The seam the adapters use: request body in, admission ticket out.

Contract: ``Scheduler(config, *, predictor=..., listeners=..., plugins=..., memory=...)``
only composes: one admission queue per backend (made on first use from
:class:`~sjf_core.config.SchedulerConfig`), the predictor (one ONNX session per process,
loaded lazily), the length memory, the default metrics listener and the plugins. It reads
no environment and starts no server (:func:`sjf_core.start_metrics` does that, explicitly).
Adapters (``litellm_sjf``, ``openai_sjf``) call :meth:`Scheduler.ticket` and never see
features, keys or heaps. Scoring is fail-open (DESIGN.md invariant 5): a body that cannot
be read or a predictor error gives an unscored ticket, placed at the policy's neutral key,
counted and logged without prompt text.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any, Callable, Mapping

from sjf_core._memory_wiring import LazyEvidence, MemoryListener, memory_for
from sjf_core.admission._base import AdmissionQueue
from sjf_core._box_wiring import BoxWiring
from sjf_core.admission._events import QueueEvents
from sjf_core.admission._last_resort import LastResort
from sjf_core.admission._ledger import attach_ledger
from sjf_core.admission._stores import make_queue
from sjf_core.admission._ticket import Ticket
from sjf_core.config import SchedulerConfig
from sjf_core.ext._hooks import install_plugins
from sjf_core.ext._metrics import install_default_metrics
from sjf_core.memory._core import handle_of
from sjf_core.memory._prom import ensure_collector
from sjf_core.policy._policies import Policy
from sjf_core.predict._meta import request_meta
from sjf_core.predict._prediction import Prediction
from sjf_core._scoring import Scoring
from sjf_core.settings import AUTO, check_slots, normalise

log = logging.getLogger("sjf_core._scheduler")

#: "take it from the config" (the default of the composition arguments).
FROM_CONFIG: Any = type("FromConfig", (), {"__repr__": lambda self: "FROM_CONFIG"})()


def backend_key(url: Any) -> str:
    """The queue key of a backend base URL: one key per real backend (host aliases,
    default ports, the API root vs ``/v1`` and trailing slashes folded together; see
    :func:`sjf_core.settings._backend_url.normalise`). Never raises."""
    return normalise(url or "default")


class Scheduler(BoxWiring):
    """Predictor + policy + per-backend admission queues, composed from a config.

    Args:
        config: a :class:`~sjf_core.config.SchedulerConfig` (default: the built-in
            defaults; ``SchedulerConfig.from_env()`` for the ``SJF_*`` settings).
        predictor: a predictor object (``.predict(text) -> Prediction``), "default", a path
            to an ONNX model, or None (every request unscored: FCFS order); default
            ``config.predictor``.
        listeners: queue event listeners added to every queue. A listener may also define
            ``on_predict(scheduler, latency_s, error)``, called after each predictor call.
        plugins: pluggy plugins (:func:`~sjf_core.ext._hooks.install_plugins`): default
            ``config.plugins``; False for none, a list of plugin objects or a PluginManager.
        memory: a :class:`~sjf_core.memory.LengthMemory`, False for none, or default: the
            one ``config`` asks for (:func:`~sjf_core._memory_wiring.memory_for`).
        **settings: shorthand for ``config.replace(**settings)`` (the
            :meth:`~sjf_core.config.SchedulerConfig.create` names, e.g. ``policy``, ``tau``,
            ``slots``, ``backend_slots``, ``overload``, ``redis_url``, ``fairness``).

    Raises:
        ValueError: a bad setting (from the config).
    """

    def __init__(self, config: SchedulerConfig | None = None, *, predictor: Any = FROM_CONFIG,
                 listeners: list[QueueEvents] | None = None, plugins: Any = FROM_CONFIG, memory: Any = FROM_CONFIG,
                 **settings: Any):
        config = config if config is not None else SchedulerConfig()
        self.config: SchedulerConfig = config.replace(**settings) if settings else config
        self._queues: dict[str, Any] = {}
        self._slots: dict[str, int] = {}
        self._lock = threading.RLock()
        self._policy_wrappers: list[Callable] = []
        self.pools = self.boxes = None  # PoolRegistry, BoxRegistry: made on first use
        self.listeners: list[QueueEvents] = list(listeners or [])
        install_default_metrics(self.listeners, self.config.metrics)
        #: each backend's in-process slot ledger and last-resort gate (admission/_last_resort.py)
        self.last_resort = LastResort(self.slots_for, self.config.lease_ttl_s, self.listeners)
        self.last_resort.on_ledger = self.stack_ledger  # a model runner's under its box's cap
        self.memory = None
        if memory is FROM_CONFIG:
            try:
                self.memory = memory_for(self.config)
            except Exception as exc:  # e.g. redis-py missing: scheduling works without the memory
                log.error("length memory disabled (%s)", type(exc).__name__)
        elif memory is not False and memory is not None:
            self.memory = memory
        if self.memory is not None:
            self.listeners.append(MemoryListener(self.memory))
            if self.config.metrics:
                ensure_collector()
        spec = self.config.predictor if predictor is FROM_CONFIG else predictor
        self.scoring = Scoring(self, spec, self.memory, self.listeners)
        self.plugins = install_plugins(self, self.config.plugins if plugins is FROM_CONFIG else plugins)

    # ---- composition -------------------------------------------------------------------
    redis_url = property(lambda self: self.config.redis_url, doc="The Redis store's URL, or None (in-process).")
    fairness = property(lambda self: self.config.fairness)
    defaults = property(lambda self: self.config.defaults)

    @property
    def backend_slots(self) -> Mapping[str, int]:
        """Slot counts set for backends so far (config, then :meth:`set_slots`), by queue key."""
        fixed = {k: b.slots for k, b in self.config.backends.items() if isinstance(b.slots, int)}
        return {**fixed, **self._slots}

    def slots_for(self, backend: Any) -> int:
        """The slots a new queue of ``backend`` gets ("auto" not resolved yet: 1)."""
        key = backend_key(backend)
        base = self.base_key(key)  # a model runner's are its backend's (OLLAMA_NUM_PARALLEL)
        n = self._slots.get(key, self._slots.get(base))
        if n is None:
            n = self.config.backend(base).slots
        return 1 if n == AUTO or n is None else int(n)

    def set_slots(self, backend: Any, slots: int) -> bool:
        """Set the slots of ``backend``'s queue before it exists (e.g. "auto" resolved by
        asking the backend). Returns False (and changes nothing) once the queue exists."""
        slots = check_slots(slots)
        key = backend_key(backend)
        with self._lock:
            if key in self._queues:
                return False
            self._slots[key] = int(slots)
        self.last_resort.resize(key, int(slots))
        return True

    def make_policy(self) -> Policy:
        """A fresh policy for a new queue: the config's, wrapped by any extensions."""
        policy = self.config.make_policy()
        for wrap in list(self._policy_wrappers):
            policy = wrap(policy)
        return policy

    def extend(self, *, predictor: Callable | None = None, policy: Callable | None = None,
               listener: QueueEvents | None = None) -> Callable[[], None]:
        """Add parts (what plugins use): ``predictor(base) -> predictor`` wraps the loaded
        predictor (``base`` may be None); ``policy(base) -> policy`` wraps the policy of
        queues made from now on; ``listener`` joins this scheduler and every existing queue.

        Returns:
            ``undo()``: removes exactly these parts (idempotent).
        """
        with self._lock:
            if predictor is not None:
                self.scoring.add_wrapper(predictor)
            if policy is not None:
                self._policy_wrappers.append(policy)
            if listener is not None:
                self.listeners.append(listener)
                for q in self._queues.values():
                    q.listeners.append(listener)
        done = []

        def undo() -> None:
            with self._lock:
                if done:
                    return
                done.append(True)
                if predictor is not None:
                    self.scoring.remove_wrapper(predictor)
                if policy is not None:
                    self._policy_wrappers.remove(policy)
                if listener is not None:
                    for owner in [self.listeners, *(q.listeners for q in self._queues.values())]:
                        if listener in owner:
                            owner.remove(listener)

        return undo

    # ---- scoring (see :class:`~sjf_core._scoring.Scoring`) ------------------------------
    @property
    def predictor(self):
        """The loaded predictor, or None if disabled or unloadable (then FCFS order)."""
        return self.scoring.predictor

    @property
    def predictor_errors(self) -> int:
        """Requests left unscored because the predictor raised."""
        return self.scoring.predictor_errors

    def preload(self) -> threading.Thread:
        """Load the predictor in a daemon thread (returned); never raises."""
        return self.scoring.preload()

    def predict(self, body: Any, endpoint: str = "chat/completions") -> Prediction | None:
        """Predict the answer length of a request body; None when it cannot be scored."""
        return self.scoring.predict(body, endpoint)

    def memory_status(self) -> dict:
        """The length memory's status, or ``{"enabled": False}``."""
        return self.scoring.memory_status()

    def _learn_unscored(self, body: Any, endpoint: str):
        return self.scoring.learn_unscored(body, endpoint)

    # ---- queues -----------------------------------------------------------------------
    def queue(self, backend: Any = "default") -> AdmissionQueue:
        """The admission queue of ``backend`` (a base URL), created on first use by
        :func:`~sjf_core.admission._stores.make_queue`: the in-process store, or the Redis
        store (same :class:`AdmissionQueue` contract) when ``config.redis_url`` is set."""
        key = backend_key(backend)
        q = self._queues.get(key)
        if q is None:
            with self._lock:
                q = self._queues.get(key)
                if q is None:
                    q = self._new_queue(key)
                    attach_ledger(q, self.last_resort.ledger(key))  # one bound with the gate
                    self._queues[key] = q
                    self.attach_runner(key, q)  # a model runner: its box holds it (docs/boxes.md)
        return q

    def _new_queue(self, key: str) -> AdmissionQueue:
        b, c = self.config.backend(self.base_key(key)), self.config
        return make_queue(key, slots=self.slots_for(key), policy=self.make_policy(), lease_ttl_s=c.lease_ttl_s,
                          listeners=self.listeners, overload=b.overload, rate_limit=b.rate_limit,
                          fairness=c.fairness, redis_url=c.redis_url, redis=c.redis)

    @property
    def queues(self) -> dict[str, AdmissionQueue]:
        """All queues created so far, by backend key."""
        return dict(self._queues)

    def pool(self, backends: Any):
        """The pool of these backends (URLs or keys): :mod:`sjf_core.admission._pool` (Redis: ``_pool_redis``)."""
        return self.pool_registry().pool(backend_key(b) for b in backends)

    def ticket(
        self,
        backend: Any,
        body: Any,
        endpoint: str = "chat/completions",
        headers: Mapping[str, str] | None = None,
        arrival: float | None = None,
        prediction: Prediction | None = None,
        api_key: Any = None,
        team: Any = None, request_id: str | None = None,
    ) -> Ticket:
        """Make an admission ticket for one request. Never raises for a bad body.

        Args:
            backend: the backend base URL (queue key).
            body: the parsed JSON request body (dict), or anything else (unscored).
            endpoint: "chat/completions", "completions", "responses", ...
            headers: request headers, for scheduling metadata (see :mod:`sjf_core.predict._meta`).
            arrival: original arrival time (``time.monotonic()`` seconds) for retries.
            prediction: a prediction made earlier (skips scoring).
            api_key, team: the caller's API key and team (for ``fairness`` "key" /
                "team"; hashed, never stored as such).
            request_id: the adapter's id of the request (a hash, never text), for the queue views.
        """
        prediction = self.predict(body, endpoint) if prediction is None else prediction
        key = backend_key(backend)  # once: queue and metadata defaults look it up as is
        meta = self.meta(key, body, headers, api_key, team, request_id)
        t = self.queue(key).ticket(prediction, meta, arrival)
        if self.memory is not None:
            t.entry.evidence = handle_of(prediction)
        return self.box_ticket(key, t, prediction, meta, arrival)  # Redis: a contended box's turn

    def meta(self, backend: Any, body: Any, headers: Mapping[str, str] | None = None, api_key: Any = None,
             team: Any = None, request_id: str | None = None):
        """The request's :class:`~sjf_core.predict._meta.RequestMeta`: what it sent
        (:func:`~sjf_core.predict._meta.request_meta`), its tenant (``fairness``), the
        configured defaults for what it did not send, and ``request_id``. Never raises."""
        m = request_meta(body, headers, request_id)
        try:
            fairness = self.config.fairness
            tenant = fairness.tenant(body, headers, api_key, team)
            if tenant is not None:
                m = dataclasses.replace(m, tenant=tenant)
            return self.config.defaults.apply(m, backend_key(backend), tenant, fairness)
        except Exception:
            log.warning("tenant or defaults could not be applied; request keeps its own metadata")
            return m

    def lazy_ticket(
        self,
        backend: Any,
        load: Callable[[], tuple[Any, Mapping[str, str] | None]],
        endpoint: str = "chat/completions",
        arrival: float | None = None,
        api_key: Any = None,
    ) -> Ticket:
        """Like :meth:`ticket`, but the request is parsed and scored only when there is
        an order to decide (:meth:`AdmissionQueue.ticket` ``scorer``): a request granted
        a slot at once at zero contention skips the parser and the predictor (the
        ``openai_sjf`` wrapper's hot path). Queues that need the class at the door
        (overload control, a rate limit, the Redis store) score at once.

        Args:
            backend: the backend base URL (queue key).
            load: returns ``(body, headers)``: the parsed JSON body (anything else is
                unscored) and the scheduling headers (:mod:`sjf_core.predict._meta`) or None.
                It must not raise.
            endpoint: as in :meth:`ticket`.
            arrival: as in :meth:`ticket`.
        """
        key = backend_key(backend)  # once: queue and metadata defaults look it up as is
        q = self.queue(key)
        lazy = LazyEvidence(self, load, endpoint) if self.memory is not None else None

        def score():
            body, headers = load()
            prediction = self.predict(body, endpoint)
            if lazy is not None:
                lazy.handle, lazy.scored = handle_of(prediction), True
            return prediction, self.meta(key, body, headers, api_key)

        t = q.ticket(None, None, arrival, scorer=score)  # a store that needs the class at the door scores at once
        if lazy is not None:
            t.entry.evidence = lazy
        return t


_default: Scheduler | None = None
_default_lock = threading.Lock()


def default_scheduler() -> Scheduler:
    """The process-wide scheduler shared by adapters that were given none, built from
    :meth:`SchedulerConfig.from_env` (the ``SJF_*`` settings)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                cfg = SchedulerConfig.from_env()
                for w in cfg.warnings:  # e.g. a misspelt SJF_* name: said once, at start-up
                    log.warning("SJF settings: %s", w)
                _default = Scheduler(cfg)
    return _default


def now() -> float:
    """The admission clock (``time.monotonic``), in seconds."""
    return time.monotonic()
