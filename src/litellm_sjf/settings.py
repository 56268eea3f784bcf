"""Settings of the LiteLLM plugin: read from an optional file (``SJF_CONFIG``) and env vars.

LiteLLM's ``litellm_settings`` is not free-form, so the plugin reads its own settings.
Precedence: built-in defaults < the file named by ``SJF_CONFIG`` (YAML or JSON) < env vars.

=========================  ===============================  ==================================================
env var                    file key                         meaning (default)
=========================  ===============================  ==================================================
``SJF_POLICY``             ``policy``                       "sjf-tokens" (expected tokens), "sjf" (P(Long)), "fair", "fcfs"
``SJF_TAU``                ``tau``                          "3x" (× mean Short service time), seconds, or "off"
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
``SJF_PROBE_TIMEOUT_S``    ``probe_timeout_s``              600: longest wait for a probe; after it the slot is
                                                            left to its lease (``lease_ttl_s``)
``SJF_LEASE_TTL_S``        ``lease_ttl_s``                  900: a running ticket not released nor renewed in
                                                            this many seconds is force-released (safety net)
``SJF_DRAIN_MAX_S``        ``drain_max_s``                  600: longest drain of an orphaned stream
``SJF_OVERLOAD``           ``overload`` (also per backend)  overload control: JSON of
                                                            :class:`sjf_core.admission._overload.OverloadConfig` fields, e.g.
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
``SJF_REDIS_*`` environment variable (read by :class:`sjf_core.Scheduler`).

Backend keys are the deployments' ``api_base`` URLs, normalised by
:func:`sjf_core._scheduler.backend_key` (``localhost`` = ``127.0.0.1`` = ``::1``, default
ports, the API root = ``/v1``, trailing slashes), or the ``queue`` named for them. A bad
setting raises :class:`ValueError` naming it when the plugin is imported, so the proxy
fails at start-up instead of misbehaving later. The retired ``orphan_hold_max_s`` /
``orphan_grace_s`` (an estimate of an orphan's rest, replaced by the probe) are accepted
and ignored, with a warning.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from sjf_core._scheduler import backend_key

DISCONNECT_MODES = ("probe", "drain", "release")
AUTO = "auto"
RETIRED = ("orphan_hold_max_s", "orphan_grace_s")


@dataclass
class PluginSettings:
    """Plugin settings (see the module docstring for each field)."""

    policy: str = "sjf-tokens"
    tau: Any = "3x"
    promotion: str | None = None
    k: int | None = None
    slowdown: float | None = None
    work_slack: float | None = None
    max_wait_s: float | None = None
    slots: Any = 1  # int >= 1 or "auto"
    backend_slots: dict = field(default_factory=dict)  # queue key -> int or "auto"
    backend_queues: dict = field(default_factory=dict)  # normalised URL -> queue name
    on_disconnect: str = "probe"
    backend_on_disconnect: dict = field(default_factory=dict)
    probe_timeout_s: float = 600.0
    lease_ttl_s: float = 900.0
    drain_max_s: float = 600.0
    retired: list = field(default_factory=list)  # retired keys that were set (ignored)
    warnings: list = field(default_factory=list)  # conflicts found while reading (logged at start-up)
    predictor: Any = "default"
    overload: Any = None
    backend_overload: dict = field(default_factory=dict)
    rate_limit: Any = None
    backend_rate_limits: dict = field(default_factory=dict)
    status_port: int | None = None
    scheduler_factory: str | None = None
    disabled: bool = False
    redis_url: str | None = None
    redis: dict = field(default_factory=dict)
    fairness: str = "key"
    default_priority: int | None = None
    default_deadline_s: float | None = None
    backend_defaults: dict = field(default_factory=dict)
    tenants: dict = field(default_factory=dict)
    show_tenant_names: bool = False

    def fairness_config(self):
        """The :class:`sjf_core.policy._tenants.Fairness` of these settings (raises ValueError)."""
        from sjf_core.policy._tenants import Fairness

        weights = {name: t["weight"] for name, t in self.tenants.items() if t.get("weight") is not None}
        return Fairness.parse(self.fairness, weights, self.show_tenant_names)

    def intent_defaults(self):
        """The :class:`sjf_core.policy._tenants.IntentDefaults` of these settings (raises ValueError)."""
        from sjf_core.policy._tenants import IntentDefaults

        tenants = {name: {k: v for k, v in t.items() if k != "weight"} for name, t in self.tenants.items()}
        return IntentDefaults.parse(self.default_priority, self.default_deadline_s, self.backend_defaults, tenants)

    def validate(self) -> "PluginSettings":
        """Check values; raises ValueError naming the bad setting."""
        from sjf_core.policy._policies import make_policy

        self.slots = _slots_value(self.slots, "SJF slots")
        for url, n in list(self.backend_slots.items()):
            self.backend_slots[url] = _slots_value(n, f"SJF slots of backend {url}")
        for url, q in self.backend_queues.items():
            if not isinstance(q, str) or not q.strip():
                raise ValueError(f"SJF queue of backend {url} must be a non-empty name, got {q!r}")
        try:
            self.fairness_config()
            self.intent_defaults()
        except ValueError as exc:
            raise ValueError(f"SJF fairness / defaults: {exc}") from None
        for mode in [self.on_disconnect, *self.backend_on_disconnect.values()]:
            if mode not in DISCONNECT_MODES:
                raise ValueError(f"SJF on_disconnect must be one of {DISCONNECT_MODES}, got {mode!r}")
        for name in ("lease_ttl_s", "drain_max_s", "probe_timeout_s"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"SJF {name} must be > 0")
        if self.scheduler_factory is None:
            make_policy(self.policy, **self.policy_options())  # raises ValueError on a bad policy/τ/promotion
            from sjf_core.admission._redis import redis_config

            # bad Redis options, or a policy the Redis store cannot run, fail at start-up
            redis_config(self.redis_url, self.redis, make_policy(self.policy, **self.policy_options()))
            from sjf_core.admission._overload import OverloadConfig
            from sjf_core.admission._ratelimit import RateLimit

            for v in [self.overload, *self.backend_overload.values()]:
                OverloadConfig.parse(v)
            for v in [self.rate_limit, *self.backend_rate_limits.values()]:
                RateLimit.parse(v)
        return self

    def policy_options(self) -> dict:
        """Keyword arguments for :func:`sjf_core.policy._policies.make_policy`."""
        opts: dict[str, Any] = {"tau": self.tau}
        if self.promotion:
            opts["promotion"] = self.promotion
        if self.k is not None:
            opts["k"] = int(self.k)
        for name in ("slowdown", "work_slack", "max_wait_s"):
            if getattr(self, name) is not None:
                opts[name] = float(getattr(self, name))
        return opts

    def queue_key(self, url: Any) -> str:
        """The queue key of a deployment's ``api_base``: the ``queue`` named for it in
        ``backends``, else the normalised URL (:func:`sjf_core._scheduler.backend_key`)."""
        key = backend_key(url)
        name = self.backend_queues.get(key)
        return f"queue:{name.strip()}" if name else key

    def on_disconnect_for(self, backend: str) -> str:
        """The disconnect mode of one backend (a queue key or URL): its own setting, else the global one."""
        return self.backend_on_disconnect.get(self._key(backend), self.on_disconnect)

    def slots_for(self, backend: str) -> Any:
        """The slots setting of one backend (a queue key or URL): int or "auto"."""
        return self.backend_slots.get(self._key(backend), self.slots)

    def _key(self, backend: str) -> str:
        return backend if str(backend).startswith("queue:") else self.queue_key(backend)


def _safe(key: str) -> str:
    """A queue key fit for a log line (no credentials)."""
    from sjf_core.ext._metrics import backend_label

    return backend_label(key)


def _slots_value(v: Any, what: str) -> Any:
    """``"auto"`` or an int >= 1; raises ValueError naming ``what``."""
    if isinstance(v, str) and v.strip().lower() == AUTO:
        return AUTO
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be an integer >= 1 or 'auto', got {v!r}") from None
    if n < 1 or isinstance(v, bool):
        raise ValueError(f"{what} must be >= 1 or 'auto', got {v!r}")
    return n


def _parse_backend_slots(text: str) -> dict:
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"SJF_BACKEND_SLOTS is not valid JSON: {exc.msg}") from None
        if not isinstance(obj, dict):
            raise ValueError("SJF_BACKEND_SLOTS must be a JSON object {URL: slots}")
        return {backend_key(k): _slots_value(v, f"SJF_BACKEND_SLOTS[{k}]") for k, v in obj.items()}
    out = {}
    for item in text.split(","):
        if not item.strip():
            continue
        url, sep, n = item.strip().rpartition("=")
        if not sep or not url:
            raise ValueError(f"SJF_BACKEND_SLOTS item {item!r} is not URL=N")
        out[backend_key(url)] = _slots_value(n, f"SJF_BACKEND_SLOTS item {item!r}")
    return out


def _read_file(path: str) -> dict:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ValueError(f"SJF_CONFIG file {path} cannot be read: {exc.strerror}") from None
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:
        raise ValueError(f"SJF_CONFIG file {path} cannot be parsed: {type(exc).__name__}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"SJF_CONFIG file {path} must hold a mapping")
    return data


def _bool(v: Any) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def load_settings(env: Mapping[str, str] | None = None) -> PluginSettings:
    """Read settings from ``SJF_CONFIG`` and the ``SJF_*`` environment variables.

    Raises:
        ValueError: an unreadable file or a bad value (the message names the setting).
    """
    env = os.environ if env is None else env
    s = PluginSettings()
    data: dict = {}
    if env.get("SJF_CONFIG"):
        data = _read_file(env["SJF_CONFIG"])
    known = {"policy", "tau", "promotion", "k", "slowdown", "work_slack", "max_wait_s", "slots", "backends",
             "on_disconnect", "lease_ttl_s", "drain_max_s", "probe_timeout_s", "predictor", "status_port",
             "scheduler_factory", "disabled", "overload", "rate_limit", "redis_url", "redis", "fairness",
             "default_priority", "default_deadline_s", "tenants", "show_tenant_names", *RETIRED}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"SJF_CONFIG: unknown keys {sorted(unknown)}; known: {sorted(known)}")
    for key in ("policy", "tau", "promotion", "predictor", "scheduler_factory", "on_disconnect", "overload",
                "rate_limit"):
        if key in data:
            setattr(s, key, data[key])
    for key in ("k", "status_port"):
        if data.get(key) is not None:
            setattr(s, key, int(data[key]))
    if data.get("slots") is not None:
        s.slots = data["slots"]
    for key in ("lease_ttl_s", "drain_max_s", "probe_timeout_s", "slowdown", "work_slack", "max_wait_s"):
        if data.get(key) is not None:
            setattr(s, key, float(data[key]))
    s.retired = [k for k in RETIRED if k in data]
    if "disabled" in data:
        s.disabled = _bool(data["disabled"])
    if data.get("fairness") is not None:
        s.fairness = "off" if data["fairness"] is False else str(data["fairness"])
    if "show_tenant_names" in data:
        s.show_tenant_names = _bool(data["show_tenant_names"])
    s.default_priority = data.get("default_priority")
    s.default_deadline_s = data.get("default_deadline_s")
    tenants = data.get("tenants") or {}
    if not isinstance(tenants, dict) or not all(isinstance(v, dict) for v in tenants.values()):
        raise ValueError("SJF_CONFIG: 'tenants' must map NAME -> {weight, default_priority, default_deadline_s}")
    for name, t in tenants.items():
        extra = set(t) - {"weight", "default_priority", "default_deadline_s"}
        if extra:
            raise ValueError(f"SJF_CONFIG: tenant {name}: unknown keys {sorted(extra)}")
    s.tenants = {str(k): dict(v) for k, v in tenants.items()}
    if data.get("redis_url"):
        s.redis_url = str(data["redis_url"])
    if data.get("redis") is not None:
        if not isinstance(data["redis"], dict):
            raise ValueError("SJF_CONFIG: 'redis' must map option -> value (fail_mode, redis_lease_ttl_s, ...)")
        from sjf_core.admission._redis import ENV_OPTIONS

        # an SJF_REDIS_* variable beats the file (the Scheduler reads it for missing options)
        overridden = {name for var, (name, _) in ENV_OPTIONS.items() if str(env.get(var) or "").strip()}
        s.redis = {k: v for k, v in data["redis"].items() if k not in overridden}
    backends = data.get("backends") or {}
    if not isinstance(backends, dict):
        raise ValueError("SJF_CONFIG: 'backends' must map URL -> {slots, on_disconnect, queue, ...}")
    for url, opts in backends.items():  # queue names first: the other options are keyed by queue
        if isinstance(opts, dict) and opts.get("queue") is not None:
            if not isinstance(opts["queue"], str) or not opts["queue"].strip():
                raise ValueError(f"SJF_CONFIG: backend {url}: 'queue' must be a non-empty name")
            s.backend_queues[backend_key(url)] = opts["queue"].strip()
    for url, opts in backends.items():
        if not isinstance(opts, dict):
            raise ValueError(f"SJF_CONFIG: backend {url} must map to {{slots, on_disconnect, queue, ...}}")
        key = s.queue_key(url)
        for name, target in (("slots", s.backend_slots), ("on_disconnect", s.backend_on_disconnect),
                             ("overload", s.backend_overload), ("rate_limit", s.backend_rate_limits)):
            if name not in opts:
                continue
            value = str(opts[name]) if name == "on_disconnect" else opts[name]
            if name == "slots":
                value = _slots_value(value, f"SJF slots of backend {url}")
            if key in target and target[key] != value:
                old = target[key]
                if name == "slots":  # the safe choice: the fewest slots any of them names
                    value = min((v for v in (old, value) if v != AUTO), default=AUTO)
                else:
                    value = old
                s.warnings.append(f"SJF_CONFIG: deployments of one backend ({_safe(key)}) set different {name} "
                                  f"({old!r} and {opts[name]!r}); using {value!r}")
            target[key] = value
        d = {k: opts[k] for k in ("default_priority", "default_deadline_s") if k in opts}
        if d:
            s.backend_defaults[key] = d
        extra = set(opts) - {"slots", "on_disconnect", "overload", "rate_limit", "queue", "default_priority",
                             "default_deadline_s"}
        if extra:
            raise ValueError(f"SJF_CONFIG: backend {url}: unknown keys {sorted(extra)}")

    def get(name):
        v = env.get(name)
        return v if v is not None and str(v).strip() != "" else None

    try:
        if get("SJF_POLICY"):
            s.policy = get("SJF_POLICY").strip()
        if get("SJF_TAU"):
            s.tau = get("SJF_TAU").strip()
        if get("SJF_PROMOTION"):
            s.promotion = get("SJF_PROMOTION").strip()
        if get("SJF_K"):
            s.k = int(get("SJF_K"))
        if get("SJF_SLOTS"):
            s.slots = _slots_value(get("SJF_SLOTS").strip(), "SJF slots (SJF_SLOTS)")
        if get("SJF_BACKEND_SLOTS"):
            s.backend_slots.update({s.queue_key(k): v for k, v in _parse_backend_slots(get("SJF_BACKEND_SLOTS")).items()})
        if get("SJF_ON_DISCONNECT"):
            s.on_disconnect = get("SJF_ON_DISCONNECT").strip().lower()
        for name, attr in (("SJF_LEASE_TTL_S", "lease_ttl_s"), ("SJF_DRAIN_MAX_S", "drain_max_s"),
                           ("SJF_PROBE_TIMEOUT_S", "probe_timeout_s"), ("SJF_SLOWDOWN", "slowdown"),
                           ("SJF_WORK_SLACK", "work_slack"), ("SJF_MAX_WAIT_S", "max_wait_s")):
            if get(name):
                setattr(s, attr, float(get(name)))
        s.retired += [name for name in ("SJF_ORPHAN_HOLD_MAX_S", "SJF_ORPHAN_GRACE_S") if get(name)]
        if get("SJF_OVERLOAD"):
            try:
                s.overload = json.loads(get("SJF_OVERLOAD"))
            except json.JSONDecodeError as exc:
                raise ValueError(f"SJF_OVERLOAD is not valid JSON: {exc.msg}") from None
        if get("SJF_RATE_LIMIT"):
            s.rate_limit = get("SJF_RATE_LIMIT").strip()
        if get("SJF_PREDICTOR"):
            s.predictor = get("SJF_PREDICTOR").strip()
        if get("SJF_STATUS_PORT"):
            s.status_port = int(get("SJF_STATUS_PORT"))
        if get("SJF_SCHEDULER_FACTORY"):
            s.scheduler_factory = get("SJF_SCHEDULER_FACTORY").strip()
        if get("SJF_DISABLED"):
            s.disabled = _bool(get("SJF_DISABLED"))
        if get("SJF_REDIS_URL"):
            s.redis_url = get("SJF_REDIS_URL").strip()
        if get("SJF_FAIRNESS"):
            s.fairness = get("SJF_FAIRNESS").strip()
        if get("SJF_DEFAULT_PRIORITY"):
            s.default_priority = get("SJF_DEFAULT_PRIORITY").strip()
        if get("SJF_DEFAULT_DEADLINE_S"):
            s.default_deadline_s = get("SJF_DEFAULT_DEADLINE_S").strip()
    except ValueError as exc:
        raise ValueError(f"bad SJF_* environment setting: {exc}") from None
    if isinstance(s.predictor, str) and s.predictor.lower() in ("none", "off", "fcfs"):
        s.predictor = None
    return s.validate()
