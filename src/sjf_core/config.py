"""Scheduler settings: one frozen :class:`SchedulerConfig`, read in exactly one place (here).

Contract:

* Every default of the runtime is defined once, below (the layers derive theirs from these),
  and this module loads no runtime module, so any may import it.
* :meth:`SchedulerConfig.from_env` reads built-in defaults < the file named by ``SJF_CONFIG``
  (YAML or JSON) < the ``SJF_*`` environment variables (``SJF_REDIS_*`` beat the file's
  ``redis``); :meth:`~SchedulerConfig.from_file` one file; :meth:`~SchedulerConfig.create` /
  :meth:`~SchedulerConfig.replace` Python values (file-key names, plus the ``backend_*`` /
  ``redis_options`` / ``policy_options`` maps).
* Each value is parsed and checked once, at that boundary (:mod:`sjf_core._config_build`),
  into typed, frozen settings the runtime takes as they are: :class:`PromotionSettings`,
  :class:`RedisSettings`, :class:`BackendConfig` per queue key (the normalised base URL, or
  ``queue:NAME``), ``OverloadConfig``, ``RateLimit``, ``Fairness``, ``IntentDefaults``. A bad
  value raises :class:`ValueError` naming the setting (the env var, or the file and its key);
  an unknown key of the file is an error naming the closest known key, an unknown ``SJF_*``
  variable a warning in ``warnings`` (with the closest known name); Redis and backend URLs
  must parse.

Nothing else in ``src/`` reads ``SJF_*`` settings (names and defaults: :mod:`litellm_sjf.settings`,
``docs/operations.md``); the switches read at use time are here too: :func:`native_scan_disabled`,
:func:`memory_salt`.
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # annotations only: this module imports no runtime module when it loads
    from sjf_core.admission._overload import OverloadConfig
    from sjf_core.admission._ratelimit import RateLimit
    from sjf_core.policy._policies import Policy
    from sjf_core.policy._tenants import Fairness, IntentDefaults

__all__ = ["SchedulerConfig", "BackendConfig", "AdapterConfig", "PromotionSettings", "RedisSettings", "AUTO",
           "DISCONNECT_MODES", "FAIL_MODES", "native_scan_disabled", "memory_salt", "DEFAULT_POLICY", "DEFAULT_TAU",
           "DEFAULT_PROMOTION", "TAU_OFF_PROMOTION", "DEFAULT_PROBE_TIMEOUT_S", "DEFAULT_SHORT_SERVICE_S", "check_slots"]

# ---- defaults, defined here once (every layer below derives its own from these) --------------
# This module loads no runtime module (the building code imports what it needs when it runs),
# so that any module may take its defaults from here.
#: Policy of a queue that names none: ascending expected answer tokens (docs/scheduling.md).
DEFAULT_POLICY = "sjf-tokens"
#: τ (the starvation bound of the time-based rules): 3 × the measured mean Short service time.
DEFAULT_TAU = "3x"
#: Seed of the mean Short service time (s), before any is measured.
DEFAULT_SHORT_SERVICE_S = 2.0
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
#: The ``slots`` value that asks the backend (llama.cpp's ``/props``) how many it runs.
AUTO = "auto"
#: What the LiteLLM plugin does with an orphan's slot (the first is the default).
DISCONNECT_MODES = ("probe", "drain", "release")
#: What the Redis store does when Redis is unreachable (the first is the default).
FAIL_MODES = ("open", "closed")
#: The length memory's Redis calls: socket timeout (s; short, scoring waits for them) and how
#: long it leaves Redis alone after an error (s). Its own, not the admission store's
#: :class:`RedisSettings`, whose key ``prefix`` it shares.
MEMORY_REDIS_OP_TIMEOUT_S = 0.05
MEMORY_REDIS_RETRY_S = 5.0


@dataclass(frozen=True)
class PromotionSettings:
    """The starvation guard of a policy: its rule and every rule's parameters, checked once
    here, each by the rule that owns it whichever rule is chosen (a bad ``horizon`` is an
    error under "work-bound" too, so a typo never passes silently).

    Raises:
        ValueError: an unknown rule or a parameter out of its range (named in the message).
    """

    #: The rule (:data:`sjf_core.policy.promotion.PROMOTIONS`): "work-bound", "work-aging",
    #: "fcfs-bound", "strict" (paper §3.4), "one-in-k", "aging", "aged-sjf"; None: the
    #: policy's default (:data:`DEFAULT_PROMOTION`, or :data:`TAU_OFF_PROMOTION` for the
    #: policies with τ off).
    rule: str | None = None
    #: "one-in-k": at most one promotion per ``k`` dispatches (int >= 1).
    k: int = 2
    #: "aging": a Long that has waited ``horizon × τ`` ties with a fresh Short (> 0).
    horizon: float = 8.0
    #: "fcfs-bound": slack over the FCFS start and its floor in multiples of the mean backlog (>= 0).
    slack: float = 0.0
    floor: float = 1.0
    #: "work-bound" / "work-aging": ``slowdown`` (> 0) and "work-bound"'s ``work_slack`` (>= 0),
    #: in the served-work clock's units (docs/scheduling.md).
    slowdown: float = 8.0
    work_slack: float = 0.2
    #: Any rule: an absolute wait bound in seconds (> 0), or None.
    max_wait_s: float | None = None

    def __post_init__(self):
        from sjf_core.policy.promotion._registry import check_settings  # the rules check their own

        check_settings(self)

    @classmethod
    def of(cls, value: "PromotionSettings | str | None") -> "PromotionSettings":
        """``value`` as settings: itself, or a rule name (None: the policy's default)."""
        return value if isinstance(value, PromotionSettings) else cls(rule=value)


@dataclass(frozen=True)
class RedisSettings:
    """The shared Redis store's options (:class:`~sjf_core.admission._redis.RedisAdmissionQueue`),
    checked once here.

    Raises:
        ValueError: a bad value, the message naming the option.
    """

    #: "open": while Redis is unreachable, requests go through a per-process queue;
    #: "closed": they are refused (HTTP 429).
    fail_mode: str = FAIL_MODES[0]
    #: Lease time-to-live in Redis (s, > 0): a crashed holder's slot returns at most this long
    #: after its last renewal (renewed every third of it).
    redis_lease_ttl_s: float = 10.0
    #: Liveness time-to-live of a queued ticket (s, > 0): a dead waiter leaves within it.
    waiter_ttl_s: float = 10.0
    #: First part of every key.
    prefix: str = "sjf"
    #: Socket timeout of non-blocking Redis calls (s, > 0).
    op_timeout_s: float = 2.0
    #: While Redis is marked down, new tickets skip it this long (s, >= 0).
    retry_s: float = 1.0

    def __post_init__(self):
        if self.fail_mode not in FAIL_MODES:
            raise ValueError(f"fail_mode must be one of {FAIL_MODES}, got {self.fail_mode!r}")
        for name in ("redis_lease_ttl_s", "waiter_ttl_s", "op_timeout_s", "retry_s"):
            v, low = getattr(self, name), "> 0" if name != "retry_s" else ">= 0"
            x = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan
            if not math.isfinite(x) or x < 0 or (x == 0 and name != "retry_s"):
                raise ValueError(f"{name} must be a number {low}, got {v!r}")
            object.__setattr__(self, name, x)
        if not isinstance(self.prefix, str) or not self.prefix:
            raise ValueError(f"prefix must be a non-empty string, got {self.prefix!r}")

    @classmethod
    def of(cls, options: "RedisSettings | Mapping[str, Any] | None") -> "RedisSettings":
        """``options`` as settings: itself, or a mapping of its field names (the ``redis``
        file key, ``SJF_REDIS_*``). Raises ValueError for an unknown name."""
        if isinstance(options, RedisSettings):
            return options
        opts = dict(options or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(opts) - known
        if unknown:
            raise ValueError(f"unknown Redis options {sorted(unknown)}; known: {sorted(known)}")
        return cls(**opts)


def check_slots(value: Any, what: str = "slots") -> int:
    """``value`` as a slot count, the one check of it: an integer >= 1 (``True`` refused).
    Raises ValueError naming ``what``."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be an integer >= 1, got {value!r}") from None
    if n < 1 or isinstance(value, bool):
        raise ValueError(f"{what} must be an integer >= 1, got {value!r}")
    return n


def _fairness_default() -> "Fairness":
    from sjf_core.policy._tenants import Fairness

    return Fairness.parse()


def _defaults_default() -> "IntentDefaults":
    from sjf_core.policy._tenants import IntentDefaults

    return IntentDefaults.parse()


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
    pool: bool = True  # one queue per model group of several backends (docs/pool.md)
    retired: tuple = ()  # retired keys / env vars that were set (accepted and ignored)


@dataclass(frozen=True)
class SchedulerConfig:
    """Everything a :class:`~sjf_core._scheduler.Scheduler` is configured by (immutable).

    Attributes:
        predictor: "default" (the shipped model), a path to an ONNX model, None (FCFS order).
        policy, tau, promotion: the policy name (or object), τ and the starvation guard
            (:class:`PromotionSettings`).
        slots: default slots per backend (int >= 1, or "auto": adapters ask the backend;
            the core uses 1 until told).
        lease_ttl_s: lease time-to-live of a running ticket (s), or None (no lease).
        overload, rate_limit: defaults of every backend (None: off).
        backends: queue key -> :class:`BackendConfig` (None fields inherit the defaults).
        queues: normalised URL -> queue name (URLs with one name share one queue).
        redis_url, redis: the shared Redis store (None: in-process queues) and its
            :class:`RedisSettings`.
        fairness, defaults: tenant shares and the intent defaults.
        memory, memory_path: the online length memory on/off and its persistence file.
        plugins: which entry-point plugins load ("auto", "none", "a,b").
        metrics, metrics_port, metrics_addr: the default Prometheus listener on/off, and the
            HTTP server that :func:`sjf_core.start_metrics` starts (never the constructor).
        adapter: LiteLLM-plugin settings. warnings: conflicts found while reading.
    """

    predictor: Any = "default"
    policy: Any = DEFAULT_POLICY
    tau: Any = DEFAULT_TAU
    promotion: PromotionSettings = field(default_factory=PromotionSettings)
    slots: Any = 1
    lease_ttl_s: float | None = None
    overload: OverloadConfig | None = None
    rate_limit: RateLimit | None = None
    backends: Mapping[str, BackendConfig] = field(default_factory=_empty)
    queues: Mapping[str, str] = field(default_factory=_empty)
    redis_url: str | None = None
    redis: RedisSettings = field(default_factory=RedisSettings)
    fairness: Fairness = field(default_factory=_fairness_default)
    defaults: IntentDefaults = field(default_factory=_defaults_default)
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
        from sjf_core import _config_read as _r

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
        from sjf_core._config_read import read_file

        raw, where = read_file(path)
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
        from sjf_core.admission._backend_url import normalise

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

    def make_policy(self) -> "Policy":
        """A fresh policy object for one queue: ``policy`` with ``tau`` and ``promotion``
        (a Policy object as is). Nothing is checked again: the settings were, once."""
        from sjf_core.policy._policies import make_policy

        return make_policy(self.policy, tau=self.tau, promotion=self.promotion)

    def _with(self, values: Mapping[str, Any]) -> "SchedulerConfig":  # building: sjf_core/_config_build.py
        from sjf_core import _config_build, _config_read

        raw, where = _config_read.from_values(values)
        return _config_build.build(type(self), raw, where, self)

    @classmethod
    def _build(cls, raw: dict, where: dict, base: "SchedulerConfig | None" = None) -> "SchedulerConfig":
        from sjf_core import _config_build

        return _config_build.build(cls, raw, where, base or cls())


def native_scan_disabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``$SJF_NO_C_SCAN`` is set (not empty, not "0"): use the pure-Python feature scan."""
    v = str((os.environ if environ is None else environ).get("SJF_NO_C_SCAN") or "").strip()
    return v not in ("", "0")


def memory_salt(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key of the length memory's digests, ``$SJF_MEMORY_SALT`` as UTF-8 bytes, or None (built-in salt)."""
    s = (os.environ if environ is None else environ).get("SJF_MEMORY_SALT")
    return s.encode("utf-8", "replace") if s else None
