"""The seam the adapters use: request body in, admission ticket out.

:class:`Scheduler` owns the predictor (one ONNX session per process), the policy
configuration, and one :class:`~sjf_core.admission._local.AdmissionQueue` per backend.
Adapters (``litellm_sjf``, ``openai_sjf``) call :meth:`Scheduler.ticket` and never
see features, keys or heaps. Scoring is fail-open (DESIGN.md invariant 5): a body
that cannot be read or a predictor error gives an unscored ticket, placed at the
policy's neutral key, counted and logged without prompt text.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Mapping

from sjf_core.admission._local import AdmissionQueue, QueueEvents, Ticket
from sjf_core.admission._backend_url import normalise
from sjf_core.predict._meta import request_meta
from sjf_core.policy._policies import Policy, make_policy
from sjf_core.predict._prediction import Prediction

log = logging.getLogger("sjf_core._scheduler")


def backend_key(url: Any) -> str:
    """The queue key of a backend base URL: one key per real backend (host aliases,
    default ports, the API root vs ``/v1`` and trailing slashes folded together; see
    :func:`sjf_core.admission._backend_url.normalise`). Never raises."""
    return normalise(url or "default")


class Scheduler:
    """Predictor + policy + per-backend admission queues.

    Args:
        predictor: a Predictor, "default" (the shipped model, loaded lazily), a
            path to an ONNX model, or None (no prediction: every request is
            unscored, i.e. FCFS order).
        policy: policy name ("sjf-tokens" default, "sjf", "fair", "fcfs", ...) or object.
        tau: τ setting, e.g. "3x" (× mean Short service time), 6.0 (seconds), "off".
        slots: default slots per backend (>= 1).
        backend_slots: per-backend slots, keyed by base URL.
        lease_ttl_s: lease time-to-live of a running ticket (seconds) or None.
        policy_options: extra keyword arguments for the policy (e.g. promotion, k).
        listeners: queue event listeners added to every queue. A listener may also
            define ``on_predict(scheduler, latency_s, error)``, called after each
            predictor call (``error`` is the exception type name or None).
        plugins: pluggy plugins (see :mod:`sjf_core.ext._hooks`): None reads ``$SJF_PLUGINS``
            (unset: load the ``clairvoyant_sjf.plugins`` entry points), False for none,
            "auto", a list of plugin objects, or a ``pluggy.PluginManager``.
        overload: overload control for every backend queue
            (:class:`~sjf_core.admission._overload.OverloadConfig` or a mapping of its fields:
            ``max_queue_depth``, ``max_predicted_wait_s``, ``ladder``, ``defer_s``),
            or None. Refused requests raise :class:`~sjf_core._errors.AdmissionRejected`
            from ``Ticket.acquire``.
        backend_overload: per-backend overload settings, keyed by base URL
            (replacing ``overload`` for that backend).
        rate_limit: maximum dispatch rate of every backend (a number per second or
            "60/min", see :class:`~sjf_core.admission._ratelimit.RateLimit`), or None.
        backend_rate_limits: per-backend rate limits, keyed by base URL.
        redis_url: share each backend's queue across processes and hosts through Redis
            (:class:`~sjf_core.admission._redis.RedisAdmissionQueue`), e.g.
            ``"redis://127.0.0.1:6379/0"``. None reads ``$SJF_REDIS_URL`` (unset: in-process
            queues); "" or False: in-process queues.
        redis_options: options of the Redis store (``fail_mode``, ``redis_lease_ttl_s``,
            ``waiter_ttl_s``, ``prefix``, ``op_timeout_s``, ``retry_s``); missing ones are
            read from ``$SJF_REDIS_*`` (see :func:`sjf_core.admission._redis.redis_config`).
        fairness: fair shares across tenants (:class:`sjf_core.policy._tenants.Fairness` or its
            spec: "key" (default), "team", "user", "header:NAME", "off"); also in Redis
            mode (tenant queues and service counts in Redis).
        defaults: :class:`sjf_core.policy._tenants.IntentDefaults` (default priority / deadline,
            global, per backend, per tenant) or None.
        memory: the online length memory (:class:`~sjf_core.memory.LengthMemory`,
            docs/memory.md): consulted at every scoring, fed at every completion with
            answer tokens. None: the default one (off when ``$SJF_MEMORY=off``; shared
            through Redis when ``redis_url`` is set; persisted when ``$SJF_MEMORY_PATH``
            is set); False: none; or a LengthMemory.
    """

    def __init__(
        self,
        predictor: Any = "default",
        policy: str | Policy = "sjf-tokens",
        tau: Any = "3x",
        slots: int = 1,
        backend_slots: Mapping[str, int] | None = None,
        lease_ttl_s: float | None = None,
        policy_options: Mapping[str, Any] | None = None,
        listeners: list[QueueEvents] | None = None,
        plugins: Any = None,
        overload: Any = None,
        backend_overload: Mapping[str, Any] | None = None,
        rate_limit: Any = None,
        backend_rate_limits: Mapping[str, Any] | None = None,
        redis_url: Any = None,
        redis_options: Mapping[str, Any] | None = None,
        fairness: Any = None,
        defaults: Any = None,
        memory: Any = None,
    ):
        opts = dict(policy_options or {})
        if not isinstance(policy, Policy):
            opts.setdefault("tau", tau)
        self.policy_spec = policy
        self.policy_options = opts
        make_policy(policy, **opts)  # validate now: a bad name is a config error
        if int(slots) < 1:
            raise ValueError(f"slots must be >= 1, got {slots!r}")
        self.slots = int(slots)
        self.backend_slots = {backend_key(k): int(v) for k, v in (backend_slots or {}).items()}
        self.lease_ttl_s = lease_ttl_s
        self.listeners = list(listeners or [])
        from sjf_core.admission._overload import OverloadConfig
        from sjf_core.admission._ratelimit import RateLimit

        # validate now: bad limits are config errors
        self.overload = OverloadConfig.parse(overload)
        self.backend_overload = {backend_key(k): OverloadConfig.parse(v) for k, v in (backend_overload or {}).items()}
        self.rate_limit = RateLimit.parse(rate_limit)
        self.backend_rate_limits = {backend_key(k): RateLimit.parse(v) for k, v in (backend_rate_limits or {}).items()}
        self._predictor_spec = predictor
        self._predictor = None
        self._predictor_failed = False
        self._queues: dict[str, AdmissionQueue] = {}
        self._lock = threading.Lock()
        self.predictor_errors = 0
        from sjf_core.admission._redis import redis_config

        # validate now: a policy the Redis store cannot run is a config error
        self.redis_url, self.redis_options = redis_config(redis_url, redis_options, make_policy(policy, **opts))
        self.memory = None
        if memory is None:
            from sjf_core.memory import memory_from_env

            try:
                self.memory = memory_from_env(self.redis_url, self.redis_options)
            except Exception as exc:  # e.g. redis-py missing: scheduling works without the memory
                log.error("length memory disabled (%s)", type(exc).__name__)
        elif memory is not False:
            self.memory = memory
        if self.memory is not None:
            self.listeners.append(_MemoryListener(self))
            import os

            if os.environ.get("SJF_METRICS", "").strip().lower() not in ("off", "0", "false", "none"):
                from sjf_core.memory._prom import ensure_collector

                ensure_collector()
        from sjf_core.ext._hooks import install_plugins

        self.plugins = install_plugins(self, plugins)
        from sjf_core.policy._tenants import Fairness, IntentDefaults

        self.fairness = Fairness.parse(fairness)
        self.defaults = defaults if isinstance(defaults, IntentDefaults) else IntentDefaults.parse(**(defaults or {}))

    # ---- predictor --------------------------------------------------------------------
    @property
    def predictor(self):
        """The loaded predictor, or None if disabled or unloadable (then FCFS order)."""
        if self._predictor is None and not self._predictor_failed and self._predictor_spec is not None:
            with self._lock:
                if self._predictor is None and not self._predictor_failed:
                    spec = self._predictor_spec
                    try:
                        if isinstance(spec, str) or spec is None:
                            from sjf_core.predict._predictor import load_predictor

                            self._predictor = load_predictor(None if spec == "default" else spec)
                        else:
                            self._predictor = spec
                    except Exception as exc:
                        self._predictor_failed = True
                        log.error("predictor could not be loaded (%s); admitting in FCFS order", exc)
        return self._predictor

    def preload(self) -> threading.Thread:
        """Load the predictor in a background (daemon) thread and return it, so the first
        request that has to wait is not the one that pays the model load (~0.3-1 s).
        Never raises; a load failure is logged by :attr:`predictor` (FCFS order)."""
        def load():
            try:
                self.predictor
            except Exception:  # the property logs and fails open itself
                pass

        th = threading.Thread(target=load, name="sjf-predictor-preload", daemon=True)
        th.start()
        return th

    def predict(self, body: Any, endpoint: str = "chat/completions") -> Prediction | None:
        """Predict the answer length of a request body; None when it cannot be scored."""
        try:
            from sjf_core.predict._text import scored_text

            text = scored_text(body, endpoint)
            if text is None:
                return None
            p = self.predictor
            if p is None:
                return None
            t0 = time.perf_counter()
            try:
                prediction = p.predict(text)
            except Exception as exc:
                self._emit_predict(time.perf_counter() - t0, type(exc).__name__)
                raise
            self._emit_predict(time.perf_counter() - t0, None)
            if self.memory is not None:
                prediction = self._remember(p, body, text, prediction, True)
            return prediction
        except Exception as exc:
            self.predictor_errors += 1
            log.warning("request could not be scored (%s); FCFS order for it", type(exc).__name__)
            return None

    def _remember(self, p, body, text, prediction: Prediction, count: bool) -> Prediction:
        """The memory's blend of ``prediction`` (features from the predictor's own layout)."""
        layout = getattr(p, "layout", None)
        features = None
        if layout is not None:
            try:
                features = layout.extract(text)
            except Exception:
                features = None
        info = getattr(p, "info", None)
        sigma0 = getattr(info, "log_sigma", 1.0) if info is not None else 1.0
        return self.memory.score(body, text, features, prediction, sigma0, count)

    def _learn_unscored(self, body: Any, endpoint: str):
        """Evidence of a request that was never scored (lazy: it ran alone), to learn from it."""
        from sjf_core.memory import handle_of
        from sjf_core.predict._text import scored_text

        text = scored_text(body, endpoint)
        p = self.predictor
        if text is None or p is None or self.memory is None:
            return None
        return handle_of(self._remember(p, body, text, p.predict(text), False))

    def memory_status(self) -> dict:
        """The length memory's status (:meth:`~sjf_core.memory.LengthMemory.status`), or
        ``{"enabled": False}``."""
        if self.memory is None:
            return {"enabled": False}
        try:
            return self.memory.status()
        except Exception as exc:
            return {"enabled": True, "error": type(exc).__name__}

    def _emit_predict(self, latency_s: float, error: str | None) -> None:
        for listener in self.listeners:
            fn = getattr(listener, "on_predict", None)
            if fn is not None:
                try:
                    fn(self, latency_s, error)
                except Exception:  # a listener must never break scoring
                    log.exception("listener %s.on_predict failed", type(listener).__name__)

    # ---- queues -----------------------------------------------------------------------
    def queue(self, backend: Any = "default") -> AdmissionQueue:
        """The admission queue of ``backend`` (a base URL), created on first use: an
        :class:`AdmissionQueue`, or a :class:`~sjf_core.admission._redis.RedisAdmissionQueue`
        (same interface) when ``redis_url`` is set."""
        key = backend_key(backend)
        q = self._queues.get(key)
        if q is None:
            with self._lock:
                q = self._queues.get(key)
                if q is None and self.redis_url:
                    from sjf_core.admission._redis import queue_for_scheduler

                    q = queue_for_scheduler(self, key)
                    self._queues[key] = q
                if q is None:
                    q = AdmissionQueue(
                        slots=self.backend_slots.get(key, self.slots),
                        policy=make_policy(self.policy_spec, **self.policy_options),
                        name=key,
                        lease_ttl_s=self.lease_ttl_s,
                        listeners=self.listeners,
                        overload=self.backend_overload.get(key, self.overload),
                        rate_limit=self.backend_rate_limits.get(key, self.rate_limit),
                        fairness=self.fairness,
                    )
                    self._queues[key] = q
        return q

    @property
    def queues(self) -> dict[str, AdmissionQueue]:
        """All queues created so far, by backend key."""
        return dict(self._queues)

    def ticket(
        self,
        backend: Any,
        body: Any,
        endpoint: str = "chat/completions",
        headers: Mapping[str, str] | None = None,
        arrival: float | None = None,
        prediction: Prediction | None = None,
        api_key: Any = None,
        team: Any = None,
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
        """
        if prediction is None:
            prediction = self.predict(body, endpoint)
        t = self.queue(backend).ticket(prediction, self.meta(backend, body, headers, api_key, team), arrival)
        if self.memory is not None:
            from sjf_core.memory import handle_of

            t.entry.evidence = handle_of(prediction)
        return t

    def meta(self, backend: Any, body: Any, headers: Mapping[str, str] | None = None, api_key: Any = None,
             team: Any = None):
        """The request's :class:`~sjf_core.policy._policies.RequestMeta`: what it sent
        (:func:`~sjf_core.predict._meta.request_meta`), its tenant (``fairness``) and the
        configured defaults for what it did not send. Never raises."""
        import dataclasses

        m = request_meta(body, headers)
        try:
            tenant = self.fairness.tenant(body, headers, api_key, team)
            if tenant is not None:
                m = dataclasses.replace(m, tenant=tenant)
            return self.defaults.apply(m, backend_key(backend), tenant, self.fairness)
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
        q = self.queue(backend)
        lazy = _LazyEvidence(self, load, endpoint) if self.memory is not None else None

        def score():
            body, headers = load()
            prediction = self.predict(body, endpoint)
            if lazy is not None:
                from sjf_core.memory import handle_of

                lazy.handle, lazy.scored = handle_of(prediction), True
            return prediction, self.meta(backend, body, headers, api_key)

        t = q.ticket(None, None, arrival, scorer=score)  # a store that needs the class at the door scores at once
        if lazy is not None:
            t.entry.evidence = lazy
        return t


class _LazyEvidence:
    """The evidence of a lazily scored request: its handle once scored, else learnt at
    completion from the body (the request ran alone, so nothing scored it)."""

    __slots__ = ("scheduler", "load", "endpoint", "handle", "scored")

    def __init__(self, scheduler: Scheduler, load, endpoint: str):
        self.scheduler, self.load, self.endpoint = scheduler, load, endpoint
        self.handle, self.scored = None, False

    def resolve(self):
        if not self.scored:
            self.scored = True
            body, _ = self.load()
            self.handle = self.scheduler._learn_unscored(body, self.endpoint)
        self.load = None
        return self.handle


class _MemoryListener(QueueEvents):
    """Feeds the scheduler's length memory with each completed request's answer tokens."""

    def __init__(self, scheduler: Scheduler):
        self._memory = scheduler.memory

    def on_complete(self, queue, entry, service_s, answer_tokens) -> None:
        ev = getattr(entry, "evidence", None)
        if ev is None:
            return
        if answer_tokens is None:
            if isinstance(ev, _LazyEvidence):
                ev.load = None
            return
        if isinstance(ev, _LazyEvidence):
            ev = ev.resolve()
        self._memory.observe(ev, answer_tokens)

    def on_cancel(self, queue, entry) -> None:
        ev = getattr(entry, "evidence", None)
        if isinstance(ev, _LazyEvidence):
            ev.load = None


_default: Scheduler | None = None
_default_lock = threading.Lock()


def default_scheduler() -> Scheduler:
    """The process-wide scheduler shared by adapters that were given none."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Scheduler()
    return _default


def now() -> float:
    """The admission clock (``time.monotonic``), in seconds."""
    return time.monotonic()
