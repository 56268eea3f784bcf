"""The composition of the settings: one frozen :class:`SchedulerConfig`, read and built here.

Contract:

* The settings types and every default are the ground's (:mod:`sjf_core.settings`: plain
  frozen types that import no room); this package, at the top, composes them. Nothing below
  imports it: a room takes its own part of the settings from the :class:`~sjf_core.Scheduler`.
* :meth:`SchedulerConfig.from_env` reads built-in defaults < the file named by ``SJF_CONFIG``
  (YAML or JSON) < the ``SJF_*`` environment variables (``SJF_REDIS_*`` beat the file's
  ``redis``); :meth:`~SchedulerConfig.from_file` one file; :meth:`~SchedulerConfig.create` /
  :meth:`~SchedulerConfig.replace` Python values (file-key names, plus the ``backend_*`` /
  ``redis_options`` / ``policy_options`` maps). The readers are :mod:`sjf_core.config._read`.
* Each value is parsed and checked once, at that boundary (:mod:`sjf_core.config._build`),
  into the typed settings the runtime takes as they are: :class:`PromotionSettings`,
  :class:`RedisSettings`, :class:`BackendConfig` per queue key (the normalised base URL, or
  ``queue:NAME``), ``OverloadConfig``, ``RateLimit``, ``Fairness``, ``IntentDefaults``. A
  check that needs a room's knowledge is asked of that room (the promotion rules, the live
  policies, what the Redis store can run). A bad value raises :class:`ValueError` naming the
  setting (the env var, or the file and its key), and every problem is reported at once: the
  build goes on past a bad value and raises :class:`SettingsError` (a ValueError) with all of
  them and the warnings found meanwhile; an unknown key of the file is an error
  naming the closest known key, an unknown ``SJF_*`` variable a warning in ``warnings`` (with
  the closest known name); Redis and backend URLs must parse.

Nothing else in ``src/`` reads ``SJF_*`` settings (names and defaults: :mod:`litellm_sjf.settings`;
for users, every one with its default: ``examples/litellm_config.yaml``, checked by a test) but the two process-wide switches read at use time
(:func:`native_scan_disabled`, :func:`memory_salt`, in :mod:`sjf_core.settings._switches`).
The ground's names are re-exported here (``from sjf_core.config import PromotionSettings``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from sjf_core.settings import (AUTO, DEFAULT_POLICY, DEFAULT_PROBE_TIMEOUT_S, DEFAULT_PROMOTION,
                               DEFAULT_SHORT_SERVICE_S, DEFAULT_TAU, DISCONNECT_MODES, FAIL_MODES,
                               MEMORY_REDIS_OP_TIMEOUT_S, MEMORY_REDIS_RETRY_S, TAU_OFF_PROMOTION, AdapterConfig,
                               BackendConfig, Fairness, IntentDefaults, OverloadConfig, PromotionSettings, RateLimit,
                               RedisSettings, check_slots, memory_salt, native_scan_disabled, normalise)

from sjf_core.config import _box_check, _build, _read
from sjf_core.config._where import SettingsError

if TYPE_CHECKING:
    from sjf_core.policy._policies import Policy

__all__ = ["SchedulerConfig", "SettingsError", "BackendConfig", "AdapterConfig", "PromotionSettings", "RedisSettings", "AUTO",
           "DISCONNECT_MODES", "FAIL_MODES", "native_scan_disabled", "memory_salt", "DEFAULT_POLICY", "DEFAULT_TAU",
           "DEFAULT_PROMOTION", "TAU_OFF_PROMOTION", "DEFAULT_PROBE_TIMEOUT_S", "DEFAULT_SHORT_SERVICE_S", "check_slots",
           "MEMORY_REDIS_OP_TIMEOUT_S", "MEMORY_REDIS_RETRY_S", "OverloadConfig", "RateLimit"]


def _empty() -> Mapping:
    return MappingProxyType({})


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
        box_order: the order across a many-model box's models: "seconds" (speeds and loads)
            or "tokens" (docs/boxes.md). box: the box settings of every backend without its
            own (a :class:`BoxSettings`, or None). box_from: where each box setting came from,
            for messages: a ``backends`` URL as written -> the setting's name (``SJF_BACKEND_BOX``,
            ``SJF_CONFIG file F: 'backends'``), ``""`` -> the name of ``box``.
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
    box_order: str = "seconds"
    box: Any = None
    box_from: Mapping[str, str] = field(default_factory=_empty)

    # ---- constructors ----------------------------------------------------------------------
    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "SchedulerConfig":
        """Defaults < ``$SJF_CONFIG`` file < ``SJF_*`` env vars (``environ``, default ``os.environ``).

        Raises:
            SettingsError: (a ValueError) an unreadable file or bad values: every problem
                found, each message naming its setting, with the warnings found meanwhile.
        """
        env = os.environ if environ is None else environ
        raw, where, problems = {}, {}, []
        path = str(env.get("SJF_CONFIG") or "").strip()
        if path:
            try:
                raw, where = _read.read_file(path)
                problems += raw.pop("read_problems")  # the file's own, before the variables'
            except ValueError as exc:  # reported with the others; the environment is read all the same
                problems.append(str(exc))
        _read.apply_env(raw, where, env, problems)
        raw["read_warnings"] = _read.unknown_env(env)
        raw["read_problems"] = problems
        return cls._build(raw, where)

    @classmethod
    def from_file(cls, path: str) -> "SchedulerConfig":
        """Defaults < the YAML/JSON file at ``path``. Raises ValueError (a :class:`SettingsError`
        once the file parsed) naming every bad key."""
        raw, where = _read.read_file(path)
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
            box=b.box,
        )

    def box_settings(self, key: str) -> dict:
        """What the operator set for the box of backend ``key`` (docs/boxes.md): the fields of
        its ``box`` settings (else the default ``box``) that were given; ``{}`` when none."""
        box = self.backend(key).box or self.box
        return box.as_dict() if box is not None else {}

    def unused_box_settings(self, deployments: Iterable[tuple[Any, Any]]) -> list[str]:
        """One warning per box setting that can take no effect with ``deployments`` ((api_base,
        model) pairs): its URL is no deployment's, or a ``models`` entry names no model served
        there (:mod:`sjf_core.config._box_check`). Pure."""
        return _box_check.unused_box_settings(self, deployments)

    def make_policy(self) -> "Policy":
        """A fresh policy object for one queue: ``policy`` with ``tau`` and ``promotion``
        (a Policy object as is). Nothing is checked again: the settings were, once."""
        from sjf_core.policy._policies import make_policy

        return make_policy(self.policy, tau=self.tau, promotion=self.promotion)

    def _with(self, values: Mapping[str, Any]) -> "SchedulerConfig":  # building: sjf_core/config/_build.py
        raw, where = _read.from_values(values)
        return _build.build(type(self), raw, where, self)

    @classmethod
    def _build(cls, raw: dict, where: dict, base: "SchedulerConfig | None" = None) -> "SchedulerConfig":
        return _build.build(cls, raw, where, base or cls())
