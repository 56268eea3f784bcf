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
``SJF_SLOTS``              ``slots``                        slots per backend (1: a serial backend)
``SJF_BACKEND_SLOTS``      ``backends: {URL: {slots: N}}``  per-backend slots: JSON ``{"URL": N}`` or ``URL=N,URL=N``
``SJF_ON_DISCONNECT``      ``on_disconnect`` (also per      "drain" (keep the slot until the backend is done with
                           backend)                         an orphaned answer) or "release" (free it at once)
``SJF_LEASE_TTL_S``        ``lease_ttl_s``                  900: a running ticket not released nor renewed in
                                                            this many seconds is force-released (safety net)
``SJF_DRAIN_MAX_S``        ``drain_max_s``                  600: longest drain of an orphaned stream
``SJF_ORPHAN_HOLD_MAX_S``  ``orphan_hold_max_s``            120: longest hold after an orphaned non-stream call
``SJF_ORPHAN_GRACE_S``     ``orphan_grace_s``               2.0: shortest hold after an orphaned non-stream call
``SJF_OVERLOAD``           ``overload`` (also per backend)  overload control: JSON of
                                                            :class:`sjf_core.overload.OverloadConfig` fields, e.g.
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
=========================  ===============================  ==================================================

``SJF_REDIS_URL`` (or the file key ``redis_url``) shares each backend's queue across proxy
workers and replicas through Redis (:mod:`sjf_core.redis_queue`, ``docs/redis.md``); the
file key ``redis`` maps store options (``fail_mode``, ``redis_lease_ttl_s``,
``waiter_ttl_s``, ``prefix``, ``op_timeout_s``, ``retry_s``), each overridden by its
``SJF_REDIS_*`` environment variable (read by :class:`sjf_core.Scheduler`).

Backend keys are the deployments' ``api_base`` URLs exactly as in the LiteLLM config
(a trailing slash is ignored). A bad setting raises :class:`ValueError` naming it when
the plugin is imported, so the proxy fails at start-up instead of misbehaving later.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from sjf_core.scheduler import backend_key

DISCONNECT_MODES = ("drain", "release")


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
    slots: int = 1
    backend_slots: dict = field(default_factory=dict)
    on_disconnect: str = "drain"
    backend_on_disconnect: dict = field(default_factory=dict)
    lease_ttl_s: float = 900.0
    drain_max_s: float = 600.0
    orphan_hold_max_s: float = 120.0
    orphan_grace_s: float = 2.0
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

    def validate(self) -> "PluginSettings":
        """Check values; raises ValueError naming the bad setting."""
        from sjf_core.policies import make_policy

        if int(self.slots) < 1:
            raise ValueError(f"SJF slots must be >= 1, got {self.slots!r}")
        for url, n in self.backend_slots.items():
            if int(n) < 1:
                raise ValueError(f"SJF slots of backend {url} must be >= 1, got {n!r}")
        for mode in [self.on_disconnect, *self.backend_on_disconnect.values()]:
            if mode not in DISCONNECT_MODES:
                raise ValueError(f"SJF on_disconnect must be one of {DISCONNECT_MODES}, got {mode!r}")
        for name in ("lease_ttl_s", "drain_max_s", "orphan_hold_max_s"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"SJF {name} must be > 0")
        if not float(self.orphan_grace_s) >= 0:
            raise ValueError("SJF orphan_grace_s must be >= 0")
        if self.scheduler_factory is None:
            make_policy(self.policy, **self.policy_options())  # raises ValueError on a bad policy/τ/promotion
            from sjf_core.redis_queue import redis_config

            # bad Redis options, or a policy the Redis store cannot run, fail at start-up
            redis_config(self.redis_url, self.redis, make_policy(self.policy, **self.policy_options()))
            from sjf_core.overload import OverloadConfig
            from sjf_core.ratelimit import RateLimit

            for v in [self.overload, *self.backend_overload.values()]:
                OverloadConfig.parse(v)
            for v in [self.rate_limit, *self.backend_rate_limits.values()]:
                RateLimit.parse(v)
        return self

    def policy_options(self) -> dict:
        """Keyword arguments for :func:`sjf_core.policies.make_policy`."""
        opts: dict[str, Any] = {"tau": self.tau}
        if self.promotion:
            opts["promotion"] = self.promotion
        if self.k is not None:
            opts["k"] = int(self.k)
        for name in ("slowdown", "work_slack", "max_wait_s"):
            if getattr(self, name) is not None:
                opts[name] = float(getattr(self, name))
        return opts

    def on_disconnect_for(self, backend: str) -> str:
        """The disconnect mode of one backend (its own setting, else the global one)."""
        return self.backend_on_disconnect.get(backend_key(backend), self.on_disconnect)


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
        return {backend_key(k): int(v) for k, v in obj.items()}
    out = {}
    for item in text.split(","):
        if not item.strip():
            continue
        url, sep, n = item.strip().rpartition("=")
        if not sep or not url:
            raise ValueError(f"SJF_BACKEND_SLOTS item {item!r} is not URL=N")
        out[backend_key(url)] = int(n)
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
    known = {"policy", "tau", "promotion", "k", "slowdown", "work_slack", "max_wait_s", "slots", "backends", "on_disconnect", "lease_ttl_s", "drain_max_s",
             "orphan_hold_max_s", "orphan_grace_s", "predictor", "status_port", "scheduler_factory", "disabled", "overload",
             "rate_limit", "redis_url", "redis"}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"SJF_CONFIG: unknown keys {sorted(unknown)}; known: {sorted(known)}")
    for key in ("policy", "tau", "promotion", "predictor", "scheduler_factory", "on_disconnect", "overload",
                "rate_limit"):
        if key in data:
            setattr(s, key, data[key])
    for key in ("k", "slots", "status_port"):
        if data.get(key) is not None:
            setattr(s, key, int(data[key]))
    for key in ("lease_ttl_s", "drain_max_s", "orphan_hold_max_s", "orphan_grace_s", "slowdown", "work_slack",
                "max_wait_s"):
        if data.get(key) is not None:
            setattr(s, key, float(data[key]))
    if "disabled" in data:
        s.disabled = _bool(data["disabled"])
    if data.get("redis_url"):
        s.redis_url = str(data["redis_url"])
    if data.get("redis") is not None:
        if not isinstance(data["redis"], dict):
            raise ValueError("SJF_CONFIG: 'redis' must map option -> value (fail_mode, redis_lease_ttl_s, ...)")
        from sjf_core.redis_queue import ENV_OPTIONS

        # an SJF_REDIS_* variable beats the file (the Scheduler reads it for missing options)
        overridden = {name for var, (name, _) in ENV_OPTIONS.items() if str(env.get(var) or "").strip()}
        s.redis = {k: v for k, v in data["redis"].items() if k not in overridden}
    backends = data.get("backends") or {}
    if not isinstance(backends, dict):
        raise ValueError("SJF_CONFIG: 'backends' must map URL -> {slots, on_disconnect}")
    for url, opts in backends.items():
        if not isinstance(opts, dict):
            raise ValueError(f"SJF_CONFIG: backend {url} must map to {{slots, on_disconnect}}")
        if "slots" in opts:
            s.backend_slots[backend_key(url)] = int(opts["slots"])
        if "on_disconnect" in opts:
            s.backend_on_disconnect[backend_key(url)] = str(opts["on_disconnect"])
        if "overload" in opts:
            s.backend_overload[backend_key(url)] = opts["overload"]
        if "rate_limit" in opts:
            s.backend_rate_limits[backend_key(url)] = opts["rate_limit"]
        extra = set(opts) - {"slots", "on_disconnect", "overload", "rate_limit"}
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
            s.slots = int(get("SJF_SLOTS"))
        if get("SJF_BACKEND_SLOTS"):
            s.backend_slots.update(_parse_backend_slots(get("SJF_BACKEND_SLOTS")))
        if get("SJF_ON_DISCONNECT"):
            s.on_disconnect = get("SJF_ON_DISCONNECT").strip().lower()
        for name, attr in (("SJF_LEASE_TTL_S", "lease_ttl_s"), ("SJF_DRAIN_MAX_S", "drain_max_s"),
                           ("SJF_ORPHAN_HOLD_MAX_S", "orphan_hold_max_s"), ("SJF_ORPHAN_GRACE_S", "orphan_grace_s"),
                           ("SJF_SLOWDOWN", "slowdown"), ("SJF_WORK_SLACK", "work_slack"),
                           ("SJF_MAX_WAIT_S", "max_wait_s")):
            if get(name):
                setattr(s, attr, float(get(name)))
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
    except ValueError as exc:
        raise ValueError(f"bad SJF_* environment setting: {exc}") from None
    if isinstance(s.predictor, str) and s.predictor.lower() in ("none", "off", "fcfs"):
        s.predictor = None
    return s.validate()
