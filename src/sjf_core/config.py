"""Scheduler settings: one frozen :class:`SchedulerConfig`, read in exactly one place (here).

Contract:

* :meth:`SchedulerConfig.from_env` reads built-in defaults < the file named by
  ``SJF_CONFIG`` (YAML or JSON) < the ``SJF_*`` environment variables; an ``SJF_REDIS_*``
  variable beats the file's ``redis`` option of the same name.
* :meth:`SchedulerConfig.from_file` reads defaults < one file; :meth:`SchedulerConfig.create`
  builds from Python values (file-key names, plus ``backend_slots`` / ``backend_overload`` /
  ``backend_rate_limits`` / ``redis_options`` / ``policy_options`` maps);
  :meth:`SchedulerConfig.replace` is ``create`` on top of an existing config.
* Every constructor validates: a bad value raises :class:`ValueError` whose message names
  the setting (the env var, or the file and its key); an unknown key of the file is an
  error naming the closest known key, an unknown ``SJF_*`` variable a warning in
  ``warnings`` (with the closest known name); Redis and backend URLs must parse. Values are parsed once
  (:class:`~sjf_core.admission._overload.OverloadConfig`, :class:`~sjf_core.admission._ratelimit.RateLimit`,
  :class:`~sjf_core.policy._tenants.Fairness`, :class:`~sjf_core.policy._tenants.IntentDefaults`).
* Backend settings are one :class:`BackendConfig` per queue key (the normalised base URL,
  or ``queue:NAME`` for URLs the file joins into one named queue).

Nothing else in ``src/`` reads ``SJF_*`` settings; the names and defaults are the ones
listed in :mod:`litellm_sjf.settings` and ``docs/operations.md``. The process-wide
switches read at use time (``SJF_NO_C_SCAN``, ``SJF_MEMORY_SALT``) are here too:
:func:`native_scan_disabled`, :func:`memory_salt`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from sjf_core import _config_read as _r
from sjf_core import _config_values as _v
from sjf_core._config_read import AUTO, DISCONNECT_MODES
from sjf_core.admission._backend_url import normalise
from sjf_core.admission._overload import OverloadConfig
from sjf_core.admission._ratelimit import RateLimit
from sjf_core.admission._redis import redis_config
from sjf_core.policy._policies import Policy, make_policy
from sjf_core.policy._tenants import Fairness, IntentDefaults

__all__ = ["SchedulerConfig", "BackendConfig", "AdapterConfig", "AUTO", "DISCONNECT_MODES",
           "native_scan_disabled", "memory_salt", "DEFAULT_PROMOTION", "TAU_OFF_PROMOTION",
           "DEFAULT_PROBE_TIMEOUT_S"]

# ---- defaults defined here once (the layers below derive theirs from these) ------------------
#: Promotion rule (starvation guard) of a policy that names none: "work-bound", due on the
#: served-work clock (:class:`~sjf_core.policy.promotion.WorkBound`), chosen with
#: ``sjf simulate --scenario guard`` (docs/scheduling.md). Policies, pending structures,
#: :func:`~sjf_core.policy.promotion.make_promotion` and plugin policies all take it from here.
DEFAULT_PROMOTION = "work-bound"
#: The rule of the policies whose τ is off by default ("fcfs", "oracle"): the paper's
#: "strict", which never acts with τ off (the simplest rule to run there, Redis included).
TAU_OFF_PROMOTION = "strict"
#: Seconds an idle probe may take before an orphan's slot falls back to the lease (both
#: adapters; the OpenAI SDK's default read timeout).
DEFAULT_PROBE_TIMEOUT_S = 600.0


def _empty() -> Mapping:
    return MappingProxyType({})


@dataclass(frozen=True)
class BackendConfig:
    """One backend's own settings (a queue key's); None inherits the :class:`SchedulerConfig` default."""

    slots: Any = None  # int >= 1 or "auto"
    overload: OverloadConfig | None = None
    rate_limit: RateLimit | None = None
    on_disconnect: str | None = None  # LiteLLM plugin: "probe", "drain" or "release"


@dataclass(frozen=True)
class AdapterConfig:
    """Settings only the LiteLLM plugin uses (see :mod:`litellm_sjf.settings` for their meaning)."""

    on_disconnect: str = "probe"
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S
    drain_max_s: float = 600.0
    status_port: int | None = None
    scheduler_factory: str | None = None
    disabled: bool = False
    retired: tuple = ()  # retired keys / env vars that were set (accepted and ignored)


@dataclass(frozen=True)
class SchedulerConfig:
    """Everything a :class:`~sjf_core._scheduler.Scheduler` is configured by (immutable).

    Attributes:
        predictor: "default" (the shipped model), a path to an ONNX model, None (FCFS order).
        policy, tau, policy_options: the policy name (or object), τ and extra policy options
            (``promotion``, ``k``, ``slowdown``, ``work_slack``, ``max_wait_s``...).
        slots: default slots per backend (int >= 1, or "auto": adapters ask the backend;
            the core uses 1 until told).
        lease_ttl_s: lease time-to-live of a running ticket (s), or None (no lease).
        overload, rate_limit: defaults of every backend (None: off).
        backends: queue key -> :class:`BackendConfig` (None fields inherit the defaults).
        queues: normalised URL -> queue name (URLs with one name share one queue).
        redis_url, redis_options: the shared Redis store (None: in-process queues).
        fairness, defaults: tenant shares and the intent defaults.
        memory, memory_path: the online length memory on/off and its persistence file.
        plugins: which entry-point plugins load ("auto", "none", "a,b").
        metrics, metrics_port, metrics_addr: the default Prometheus listener on/off, and the
            HTTP server that :func:`sjf_core.start_metrics` starts (never the constructor).
        adapter: LiteLLM-plugin settings. warnings: conflicts found while reading.
    """

    predictor: Any = "default"
    policy: Any = "sjf-tokens"
    tau: Any = "3x"
    policy_options: Mapping[str, Any] = field(default_factory=_empty)
    slots: Any = 1
    lease_ttl_s: float | None = None
    overload: OverloadConfig | None = None
    rate_limit: RateLimit | None = None
    backends: Mapping[str, BackendConfig] = field(default_factory=_empty)
    queues: Mapping[str, str] = field(default_factory=_empty)
    redis_url: str | None = None
    redis_options: Mapping[str, Any] = field(default_factory=_empty)
    fairness: Fairness = field(default_factory=Fairness.parse)
    defaults: IntentDefaults = field(default_factory=IntentDefaults.parse)
    memory: bool = True
    memory_path: str | None = None
    plugins: str = "auto"
    metrics: bool = True
    metrics_port: int | None = None
    metrics_addr: str = "127.0.0.1"
    adapter: AdapterConfig = AdapterConfig()
    warnings: tuple = ()

    # ---- constructors ----------------------------------------------------------------------
    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "SchedulerConfig":
        """Defaults < ``$SJF_CONFIG`` file < ``SJF_*`` env vars (``environ``, default ``os.environ``).

        Raises:
            ValueError: an unreadable file or a bad value (the message names the setting).
        """
        env = os.environ if environ is None else environ
        raw, where = {}, {}
        path = str(env.get("SJF_CONFIG") or "").strip()
        if path:
            raw, where = _r.read_file(path)
        _r.apply_env(raw, where, env)
        raw["read_warnings"] = _r.unknown_env(env)
        return cls._build(raw, where)

    @classmethod
    def from_file(cls, path: str) -> "SchedulerConfig":
        """Defaults < the YAML/JSON file at ``path``. Raises ValueError naming the bad key."""
        raw, where = _r.read_file(path)
        return cls._build(raw, where)

    @classmethod
    def create(cls, **values: Any) -> "SchedulerConfig":
        """Defaults < Python values (file-key names or the per-backend maps). Raises ValueError/TypeError."""
        return cls()._with(values)

    def replace(self, **values: Any) -> "SchedulerConfig":
        """A copy with ``values`` merged on top (same names as :meth:`create`)."""
        return self._with(values)

    # ---- look-ups ----------------------------------------------------------------------------
    def queue_key(self, url: Any) -> str:
        """The queue key of a backend URL: ``queue:NAME`` when named in ``queues``, else the normalised URL."""
        key = normalise(url or "default")
        name = self.queues.get(key)
        return f"queue:{name}" if name else key

    def backend(self, key: str) -> BackendConfig:
        """The effective settings of one backend (a queue key): its own, else the defaults."""
        b = self.backends.get(key) or self.backends.get(self.queue_key(key)) or BackendConfig()
        return BackendConfig(
            slots=self.slots if b.slots is None else b.slots,
            overload=self.overload if b.overload is None else b.overload,
            rate_limit=self.rate_limit if b.rate_limit is None else b.rate_limit,
            on_disconnect=self.adapter.on_disconnect if b.on_disconnect is None else b.on_disconnect,
        )

    def make_policy(self) -> Policy:
        """A fresh policy object (one per queue)."""
        return make_policy(self.policy, **self.policy_kwargs())

    def policy_kwargs(self) -> dict:
        """Keyword arguments of :func:`~sjf_core.policy._policies.make_policy` (τ included)."""
        opts = dict(self.policy_options)
        if not isinstance(self.policy, Policy):
            opts.setdefault("tau", self.tau)
        return opts

    # ---- building ----------------------------------------------------------------------------
    def _with(self, values: Mapping[str, Any]) -> "SchedulerConfig":
        raw, where = _r.from_values(values)
        return self._build(raw, where, base=self)

    @classmethod
    def _build(cls, raw: dict, where: dict, base: "SchedulerConfig | None" = None) -> "SchedulerConfig":
        base = base or cls()
        w = _r.Where(where)
        c: dict[str, Any] = {}
        for key in ("predictor", "policy", "tau", "memory_path", "metrics_addr"):
            if key in raw:
                c[key] = raw[key]
        if isinstance(c.get("predictor"), str) and c["predictor"].strip().lower() in ("none", "off", "fcfs"):
            c["predictor"] = None
        opts = dict(base.policy_options)
        opts.update(raw.get("policy_options") or {})
        for key, conv in (("promotion", str), ("k", int), ("slowdown", float), ("work_slack", float),
                          ("max_wait_s", float)):
            if raw.get(key) is not None:
                opts[key] = w.conv(key, raw[key], conv)
        c["policy_options"] = MappingProxyType(opts)
        if "slots" in raw:
            c["slots"] = w.check(key="slots", fn=lambda: _r.slots_value(raw["slots"], "slots"))
        for key in ("lease_ttl_s",):
            if key in raw:
                c[key] = None if raw[key] is None else w.positive(key, raw[key])
        if "overload" in raw:
            c["overload"] = w.check("overload", lambda: OverloadConfig.parse(raw["overload"]))
        if "rate_limit" in raw:
            c["rate_limit"] = w.check("rate_limit", lambda: RateLimit.parse(raw["rate_limit"]))
        queues = dict(base.queues)
        queues.update(raw.get("queues") or {})
        c["queues"] = MappingProxyType(queues)
        probe = dataclasses.replace(base, queues=c["queues"])
        backends, warnings = _v.merge_backends(dict(base.backends), raw.get("backends") or {},
                                              raw.get("backend_slots_env") or {}, probe.queue_key, w,
                                              BackendConfig)
        c["backends"] = MappingProxyType(backends)
        c["warnings"] = tuple(base.warnings) + tuple(raw.get("read_warnings") or ()) + tuple(warnings)
        if "redis_url" in raw:
            c["redis_url"] = str(raw["redis_url"]) if raw["redis_url"] else None
        redis_opts = dict(base.redis_options)
        redis_opts.update(raw.get("redis") or {})
        c["redis_options"] = MappingProxyType(redis_opts)
        c["fairness"] = w.check(w.among("fairness", "tenants", "show_tenant_names"), lambda: _v.fairness(raw, base.fairness))
        c["defaults"] = w.check(w.among("default_priority", "default_deadline_s", "backends", "tenants"),
                                lambda: _v.intent_defaults(raw, base.defaults, probe.queue_key))
        for key in ("memory", "metrics"):
            if key in raw:
                c[key] = _r.on_off(raw[key])
        if "plugins" in raw:
            c["plugins"] = str(raw["plugins"] if raw["plugins"] is not None else "auto").strip()
        if "metrics_port" in raw:
            c["metrics_port"] = None if raw["metrics_port"] in (None, "") else w.port("metrics_port", raw["metrics_port"])
        c["adapter"] = _v.adapter(raw, base.adapter, w, AdapterConfig)
        cfg = dataclasses.replace(base, **c)
        cfg._validate(w)
        return cfg

    def _validate(self, w: "_r.Where") -> None:
        """Cross-field checks; raises ValueError naming the setting."""
        w.check(w.among("policy", "tau", "promotion", "k", "slowdown", "work_slack", "max_wait_s"), self.make_policy)
        if self.redis_url:
            w.check("redis_url", lambda: _v.redis_url(self.redis_url))
            url, opts = w.check(w.among("redis_url", "redis", "policy"), lambda: redis_config(self.redis_url, dict(self.redis_options),
                                                             self.make_policy()))
            object.__setattr__(self, "redis_options", MappingProxyType(opts))
        for key, b in self.backends.items():
            if b.on_disconnect is not None and b.on_disconnect not in DISCONNECT_MODES:
                raise ValueError(f"{w('backends')}: on_disconnect of backend {key} must be one of "
                                 f"{DISCONNECT_MODES}, got {b.on_disconnect!r}")


def native_scan_disabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``$SJF_NO_C_SCAN`` is set (not empty, not "0"): use the pure-Python feature scan."""
    v = str((os.environ if environ is None else environ).get("SJF_NO_C_SCAN") or "").strip()
    return v not in ("", "0")


def memory_salt(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key of the length memory's digests, ``$SJF_MEMORY_SALT`` as UTF-8 bytes, or None (built-in salt)."""
    s = (os.environ if environ is None else environ).get("SJF_MEMORY_SALT")
    return s.encode("utf-8", "replace") if s else None
