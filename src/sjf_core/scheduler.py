"""The seam the adapters use: request body in, admission ticket out.

:class:`Scheduler` owns the predictor (one ONNX session per process), the policy
configuration, and one :class:`~sjf_core.admission.AdmissionQueue` per backend.
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

from .admission import AdmissionQueue, QueueEvents, Ticket
from .backend_url import normalise
from .meta import request_meta
from .policies import Policy, make_policy
from .prediction import Prediction

log = logging.getLogger("sjf_core.scheduler")


def backend_key(url: Any) -> str:
    """The queue key of a backend base URL: one key per real backend (host aliases,
    default ports, the API root vs ``/v1`` and trailing slashes folded together; see
    :func:`sjf_core.backend_url.normalise`). Never raises."""
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
        plugins: pluggy plugins (see :mod:`sjf_core.hooks`): None reads ``$SJF_PLUGINS``
            (unset: load the ``clairvoyant_sjf.plugins`` entry points), False for none,
            "auto", a list of plugin objects, or a ``pluggy.PluginManager``.
        overload: overload control for every backend queue
            (:class:`~sjf_core.overload.OverloadConfig` or a mapping of its fields:
            ``max_queue_depth``, ``max_predicted_wait_s``, ``ladder``, ``defer_s``),
            or None. Refused requests raise :class:`~sjf_core.errors.AdmissionRejected`
            from ``Ticket.acquire``.
        backend_overload: per-backend overload settings, keyed by base URL
            (replacing ``overload`` for that backend).
        rate_limit: maximum dispatch rate of every backend (a number per second or
            "60/min", see :class:`~sjf_core.ratelimit.RateLimit`), or None.
        backend_rate_limits: per-backend rate limits, keyed by base URL.
        redis_url: share each backend's queue across processes and hosts through Redis
            (:class:`~sjf_core.redis_queue.RedisAdmissionQueue`), e.g.
            ``"redis://127.0.0.1:6379/0"``. None reads ``$SJF_REDIS_URL`` (unset: in-process
            queues); "" or False: in-process queues.
        redis_options: options of the Redis store (``fail_mode``, ``redis_lease_ttl_s``,
            ``waiter_ttl_s``, ``prefix``, ``op_timeout_s``, ``retry_s``); missing ones are
            read from ``$SJF_REDIS_*`` (see :func:`sjf_core.redis_queue.redis_config`).
        fairness: fair shares across tenants (:class:`sjf_core.tenants.Fairness` or its
            spec: "key" (default), "team", "user", "header:NAME", "off"); also in Redis
            mode (tenant queues and service counts in Redis).
        defaults: :class:`sjf_core.tenants.IntentDefaults` (default priority / deadline,
            global, per backend, per tenant) or None.
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
        from .overload import OverloadConfig
        from .ratelimit import RateLimit

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
        from .redis_queue import redis_config

        # validate now: a policy the Redis store cannot run is a config error
        self.redis_url, self.redis_options = redis_config(redis_url, redis_options, make_policy(policy, **opts))
        from .hooks import install_plugins

        self.plugins = install_plugins(self, plugins)
        from .tenants import Fairness, IntentDefaults

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
                            from .predictor import load_predictor

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
            from .text import scored_text

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
            return prediction
        except Exception as exc:
            self.predictor_errors += 1
            log.warning("request could not be scored (%s); FCFS order for it", type(exc).__name__)
            return None

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
        :class:`AdmissionQueue`, or a :class:`~sjf_core.redis_queue.RedisAdmissionQueue`
        (same interface) when ``redis_url`` is set."""
        key = backend_key(backend)
        q = self._queues.get(key)
        if q is None:
            with self._lock:
                q = self._queues.get(key)
                if q is None and self.redis_url:
                    from .redis_queue import queue_for_scheduler

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
            headers: request headers, for scheduling metadata (see :mod:`sjf_core.meta`).
            arrival: original arrival time (``time.monotonic()`` seconds) for retries.
            prediction: a prediction made earlier (skips scoring).
            api_key, team: the caller's API key and team (for ``fairness`` "key" /
                "team"; hashed, never stored as such).
        """
        if prediction is None:
            prediction = self.predict(body, endpoint)
        return self.queue(backend).ticket(prediction, self.meta(backend, body, headers, api_key, team), arrival)

    def meta(self, backend: Any, body: Any, headers: Mapping[str, str] | None = None, api_key: Any = None,
             team: Any = None):
        """The request's :class:`~sjf_core.policies.RequestMeta`: what it sent
        (:func:`~sjf_core.meta.request_meta`), its tenant (``fairness``) and the
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
                unscored) and the scheduling headers (:mod:`sjf_core.meta`) or None.
                It must not raise.
            endpoint: as in :meth:`ticket`.
            arrival: as in :meth:`ticket`.
        """
        q = self.queue(backend)

        def score():
            body, headers = load()
            return self.predict(body, endpoint), self.meta(backend, body, headers, api_key)

        if isinstance(q, AdmissionQueue) and q.overload is None and q.rate_limit is None:
            return q.ticket(None, None, arrival, scorer=score)
        prediction, meta = score()
        return q.ticket(prediction, meta, arrival)


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
