"""Settings of the LiteLLM plugin: a LiteLLM view of :class:`sjf_core.config.SchedulerConfig`.

LiteLLM's ``litellm_settings`` is not free-form, so the plugin has its own settings, read
(only) by :meth:`sjf_core.config.SchedulerConfig.from_env`. Precedence: built-in defaults <
the file named by ``SJF_CONFIG`` (YAML or JSON) < env vars. This module keeps what is
LiteLLM-specific: the 900 s lease default, queue keys of deployments, "auto" slots, the
disconnect policy, the status port and the scheduler factory.

=========================  ===============================  ==================================================
env var                    file key                         meaning (default)
=========================  ===============================  ==================================================
``SJF_POLICY``             ``policy``                       "sjf-tokens" (expected tokens), "sjf" (P(Long)), "fair", "fcfs"
                                                            ("oracle" needs true lengths: refused, see
                                                            docs/scheduling.md)
``SJF_TAU``                ``tau``                          "off": no starvation guard at all; else the time bound
                                                            of the time-based rules ("strict", "one-in-k",
                                                            "fcfs-bound", "aging"): "3x" (default, × mean Short
                                                            service time) or seconds; "work-bound" ignores it
``SJF_PROMOTION``          ``promotion``                    starvation guard (core default "work-bound"), e.g.
                                                            "work-aging", "fcfs-bound", "strict", "one-in-k"
``SJF_K``                  ``k``                            the k of "one-in-k"
``SJF_SLOWDOWN``           ``slowdown``                     "work-bound" / "work-aging": K, in multiples of a
                                                            request's own expected work (core default 8)
``SJF_WORK_SLACK``         ``work_slack``                   "work-bound": slack over the FCFS start (0.2)
``SJF_MAX_WAIT_S``         ``max_wait_s``                   absolute wait bound in seconds (default: none)
``SJF_SLOTS``              ``slots``                        slots per backend (1: a serial backend), or "auto":
                                                            ask the backend (llama.cpp ``GET /props``
                                                            ``total_slots``), else 1 with a log line
``SJF_BACKEND_SLOTS``      ``backends: {URL: {slots: N}}``  per-backend slots (N or "auto"): JSON ``{"URL": N}`` or
                                                            ``URL=N,URL=N``
(file only)                ``backends: {URL: {queue: Q}}``  name the queue of a backend: every URL with the same
                                                            ``Q`` shares one queue (one machine, several
                                                            deployments or providers)
``SJF_ON_DISCONNECT``      ``on_disconnect`` (also per      what happens to the slot of an answer whose client
                           backend)                         left: "probe" (default: keep it and send the backend
                                                            one 1-token probe; free it when the probe returns,
                                                            i.e. when the backend is really idle), "drain" (read
                                                            an orphaned stream to its end; non-streamed: probe)
                                                            or "release" (free it at once)
``SJF_PROBE_TIMEOUT_S``    ``probe_timeout_s``              600: longest wait for a probe; after it (or an error
                                                            answer) the slot is freed at the orphan's estimated
                                                            end, the probe retried meanwhile
``SJF_LEASE_TTL_S``        ``lease_ttl_s``                  900: a running ticket not released nor renewed in
                                                            this many seconds is force-released (safety net of a
                                                            lost release; longer than a non-streamed answer)
``SJF_DRAIN_MAX_S``        ``drain_max_s``                  600: longest drain of an orphaned stream
``SJF_OVERLOAD``           ``overload`` (also per backend)  overload control: JSON of
                                                            :class:`sjf_core.settings.OverloadConfig` fields, e.g.
                                                            ``{"max_queue_depth": 32}``; refusals become HTTP 429
                                                            with ``Retry-After`` (default: none)
``SJF_RATE_LIMIT``         ``rate_limit`` (also per         dispatch rate limit per backend, e.g. "60/min"
                           backend)                         (default: none)
``SJF_PREDICTOR``          ``predictor``                    "default" (shipped model), a path to an ONNX model,
                                                            or "none" (FCFS order)
``SJF_STATUS_PORT``        ``status_port``                  unset: no status server; N: serve read-only
                                                            ``GET /sjf/status`` (JSON) on 127.0.0.1:N
``SJF_SCHEDULER_FACTORY``  ``scheduler_factory``            "module:callable" returning a ready
                                                            :class:`sjf_core.Scheduler` (overrides the above)
``SJF_DISABLED``           ``disabled``                     "1": pass every request through untouched
``SJF_POOL``               ``pool``                         "on" (default): a model group whose deployments are
                                                            several serial backends gets one queue, and each
                                                            request goes to whichever backend frees a slot
                                                            (docs/pool.md); "off": one queue per backend
``SJF_BOXES``              ``boxes``                        "on" (default): on a box that runs several models
                                                            side by side (Ollama, LM Studio, llama-swap, read
                                                            from the box), a queue per model runner
                                                            (docs/boxes.md); "off": one queue per URL
``SJF_BOX_ORDER``          ``box_order``                    "seconds" (default): a box's models compete in
                                                            expected seconds, loads grouped; "tokens": in
                                                            expected tokens (speed- and load-blind)
``SJF_BACKEND_BOX``        ``backends: {URL: {box: {...}}}``  a box's ``kind`` (ollama, lmstudio, llama-swap,
                                                            llama.cpp-router, serial, plain), ``cap``,
                                                            ``max_loaded``, ``keep_alive_s``, ``models:
                                                            {NAME: {slots}}``; JSON ``{URL: {...}}`` in the env
``SJF_BOX``                ``box``                          the same settings for every backend without its own
                                                            (JSON in the env)
``SJF_FAIRNESS``           ``fairness``                     fair shares across tenants: "key" (LiteLLM API key,
                                                            hashed; default), "team", "user" (the OpenAI
                                                            ``user`` field), "header:NAME", or "off"
``SJF_DEFAULT_PRIORITY``   ``default_priority`` (also per   priority of a request that sends none (0); higher
                           backend and per tenant)          bands are always served first
``SJF_DEFAULT_DEADLINE_S`` ``default_deadline_s`` (also     deadline of a request that sends none (none)
                           per backend and per tenant)
(none)                     ``tenants: {NAME: {weight,       per tenant (NAME: the key, team, user or header
                           default_priority,                value, or its hashed id): share weight (1) and
                           default_deadline_s}}``           defaults
(none)                     ``show_tenant_names``            report tenant names, not hashed ids (false)
=========================  ===============================  ==================================================

``SJF_REDIS_URL`` (or the file key ``redis_url``) shares each backend's queue across proxy
workers and replicas through Redis (:mod:`sjf_core.admission._redis`, ``docs/redis.md``); the
file key ``redis`` maps store options (``fail_mode``, ``redis_lease_ttl_s``,
``waiter_ttl_s``, ``prefix``, ``op_timeout_s``, ``retry_s``), each overridden by its
``SJF_REDIS_*`` environment variable.

Read by :mod:`sjf_core.config` too, for every adapter: ``SJF_MEMORY`` / ``SJF_MEMORY_PATH``
(the length memory), ``SJF_PLUGINS`` (which plugins load), ``SJF_METRICS`` (the default
Prometheus listener), ``SJF_METRICS_PORT`` / ``SJF_METRICS_ADDR`` (the metrics server,
started by the plugin when it builds its scheduler: :func:`sjf_core.start_metrics`).

Backend keys are the deployments' ``api_base`` URLs, normalised by
:func:`sjf_core._scheduler.backend_key` (``localhost`` = ``127.0.0.1`` = ``::1``, default
ports, the API root = ``/v1``, trailing slashes), or the ``queue`` named for them. A bad
setting raises :class:`ValueError` naming it when the plugin is imported, so the proxy
fails at start-up instead of misbehaving later. The retired ``orphan_hold_max_s`` /
``orphan_grace_s`` (an estimate of an orphan's rest, replaced by the probe) are accepted
and ignored, with a warning.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from sjf_core.config import AUTO, DISCONNECT_MODES, SchedulerConfig

__all__ = ["PluginSettings", "load_settings", "AUTO", "DISCONNECT_MODES", "DEFAULT_LEASE_TTL_S"]

#: The plugin's lease of a running ticket when ``lease_ttl_s`` is not set (the core has none).
DEFAULT_LEASE_TTL_S = 900.0


class PluginSettings:
    """The plugin's view of a :class:`~sjf_core.config.SchedulerConfig` (read-only attributes).

    Args:
        config: the config (default: built from ``values`` over the defaults).
        **values: :meth:`SchedulerConfig.create` names (``policy``, ``tau``, ``predictor``,
            ``backend_on_disconnect``, ...), laid over ``config``.

    Raises:
        ValueError: a bad value (the message names the setting).
    """

    def __init__(self, config: SchedulerConfig | None = None, **values: Any):
        config = config if config is not None else SchedulerConfig()
        self.config: SchedulerConfig = config.replace(**values) if values else config

    def __repr__(self) -> str:
        return f"PluginSettings({self.config!r})"

    def validate(self) -> "PluginSettings":
        """Values are checked when the config is built; kept for callers. Returns self."""
        return self

    # ---- the scheduler's settings, as the plugin names them ---------------------------
    policy = property(lambda self: self.config.policy)
    tau = property(lambda self: self.config.tau)
    predictor = property(lambda self: self.config.predictor)
    slots = property(lambda self: self.config.slots)
    overload = property(lambda self: self.config.overload)
    rate_limit = property(lambda self: self.config.rate_limit)
    redis_url = property(lambda self: self.config.redis_url)
    redis = property(lambda self: dataclasses.asdict(self.config.redis))
    warnings = property(lambda self: list(self.config.warnings))
    show_tenant_names = property(lambda self: self.config.fairness.show_names)
    default_priority = property(lambda self: self.config.defaults.priority)
    default_deadline_s = property(lambda self: self.config.defaults.deadline_s)
    promotion = property(lambda self: self.config.promotion.rule)
    k = property(lambda self: self.config.promotion.k)
    slowdown = property(lambda self: self.config.promotion.slowdown)
    work_slack = property(lambda self: self.config.promotion.work_slack)
    max_wait_s = property(lambda self: self.config.promotion.max_wait_s)

    @property
    def lease_ttl_s(self) -> float:
        """Lease of a running ticket, seconds (default 900 for the plugin)."""
        v = self.config.lease_ttl_s
        return DEFAULT_LEASE_TTL_S if v is None else float(v)

    @property
    def fairness(self) -> str:
        """The fairness mode as set: "key", "team", "user", "header:NAME" or "off"."""
        f = self.config.fairness
        return f"header:{f.header}" if f.mode == "header" else f.mode

    def _per_backend(self, name: str) -> dict:
        return {k: getattr(b, name) for k, b in self.config.backends.items() if getattr(b, name) is not None}

    backend_slots = property(lambda self: self._per_backend("slots"))
    backend_overload = property(lambda self: self._per_backend("overload"))
    backend_rate_limits = property(lambda self: self._per_backend("rate_limit"))
    backend_on_disconnect = property(lambda self: self._per_backend("on_disconnect"))
    backend_queues = property(lambda self: dict(self.config.queues))

    # ---- LiteLLM-only settings ----------------------------------------------------------
    on_disconnect = property(lambda self: self.config.adapter.on_disconnect)
    probe_timeout_s = property(lambda self: self.config.adapter.probe_timeout_s)
    drain_max_s = property(lambda self: self.config.adapter.drain_max_s)
    status_port = property(lambda self: self.config.adapter.status_port)
    scheduler_factory = property(lambda self: self.config.adapter.scheduler_factory)
    disabled = property(lambda self: self.config.adapter.disabled)
    pool = property(lambda self: self.config.adapter.pool)
    boxes = property(lambda self: self.config.adapter.boxes)
    retired = property(lambda self: list(self.config.adapter.retired))

    def fairness_config(self):
        """The :class:`sjf_core.settings._tenants.Fairness` of these settings."""
        return self.config.fairness

    def intent_defaults(self):
        """The :class:`sjf_core.settings._tenants.IntentDefaults` of these settings."""
        return self.config.defaults

    def promotion_settings(self):
        """The :class:`sjf_core.settings.PromotionSettings` of these settings."""
        return self.config.promotion

    def queue_key(self, url: Any) -> str:
        """The queue key of a deployment's ``api_base``: the ``queue`` named for it in
        ``backends``, else the normalised URL (:func:`sjf_core._scheduler.backend_key`)."""
        return self.config.queue_key(url)

    def on_disconnect_for(self, backend: str) -> str:
        """The disconnect mode of one backend (a queue key or URL): its own setting, else the global one."""
        return self.config.backend(self._key(backend)).on_disconnect

    def slots_for(self, backend: str) -> Any:
        """The slots setting of one backend (a queue key or URL): int or "auto"."""
        return self.config.backend(self._key(backend)).slots

    def _key(self, backend: str) -> str:
        return backend if str(backend).startswith("queue:") else self.queue_key(backend)

    def scheduler_config(self) -> SchedulerConfig:
        """The config the plugin's scheduler is built from (the plugin's lease default applied)."""
        return self.config.replace(lease_ttl_s=self.lease_ttl_s)


def load_settings(env: Mapping[str, str] | None = None) -> PluginSettings:
    """Read settings from ``SJF_CONFIG`` and the ``SJF_*`` environment variables
    (:meth:`SchedulerConfig.from_env`; ``env`` default ``os.environ``).

    Raises:
        ValueError: an unreadable file or a bad value (the message names the setting).
    """
    return PluginSettings(SchedulerConfig.from_env(env))

