"""Building a :class:`~sjf_core.config.SchedulerConfig` from the ``raw`` mapping of
:mod:`sjf_core.config._read`: each value parsed and checked once, here (the config
boundary), into the typed settings of the ground (:mod:`sjf_core.settings`) the runtime
takes as they are. What a ground type cannot check alone, the room that owns it checks, asked
from here: the promotion rules (:func:`sjf_core.policy.promotion.check_settings`), the live
policies (:func:`sjf_core.policy._policies.check_live_policy`, ``make_policy``), the Redis
store (:mod:`sjf_core.admission._redis_config`: its URL, what it can run).
Raises ValueError naming the setting (the env var, or the file and its key).
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

from sjf_core.config import _read as _r
from sjf_core.config import _values as _v
from sjf_core.settings import (DISCONNECT_MODES, AdapterConfig, BackendConfig, OverloadConfig, PromotionSettings,
                               RateLimit, RedisSettings)

__all__ = ["build"]

#: File keys of the promotion settings and their types (``promotion`` is the rule's name).
_PROMOTION_KEYS = (("promotion", "rule", str), ("k", "k", int), ("slowdown", "slowdown", float),
                   ("work_slack", "work_slack", float), ("max_wait_s", "max_wait_s", float))
_PROMOTION_KEY_NAMES = ("promotion", "k", "slowdown", "work_slack", "max_wait_s", "policy_options")


def build(cls, raw: dict, where: dict, base: Any) -> Any:
    """A ``cls`` (SchedulerConfig) with ``raw`` over ``base``, checked (module docstring)."""
    w = _r.Where(where)
    c: dict[str, Any] = {}
    for key in ("predictor", "policy", "tau", "memory_path", "metrics_addr"):
        if key in raw:
            c[key] = raw[key]
    if isinstance(c.get("predictor"), str) and c["predictor"].strip().lower() in ("none", "off", "fcfs"):
        c["predictor"] = None
    c["promotion"] = w.check(w.among(*_PROMOTION_KEY_NAMES), lambda: _promotion(raw, base.promotion, w))
    if "slots" in raw:
        c["slots"] = w.check(key="slots", fn=lambda: _r.slots_value(raw["slots"], "slots"))
    if "lease_ttl_s" in raw:
        c["lease_ttl_s"] = None if raw["lease_ttl_s"] is None else w.positive("lease_ttl_s", raw["lease_ttl_s"])
    if "overload" in raw:
        c["overload"] = w.check("overload", lambda: OverloadConfig.parse(raw["overload"]))
    if "rate_limit" in raw:
        c["rate_limit"] = w.check("rate_limit", lambda: RateLimit.parse(raw["rate_limit"]))
    queues = dict(base.queues)
    queues.update(raw.get("queues") or {})
    c["queues"] = MappingProxyType(queues)
    probe = dataclasses.replace(base, queues=c["queues"])
    backends, warnings = _v.merge_backends(dict(base.backends), raw.get("backends") or {},
                                          raw.get("backend_slots_env") or {}, probe.queue_key, w, BackendConfig)
    c["backends"] = MappingProxyType(backends)
    c["warnings"] = tuple(base.warnings) + tuple(raw.get("read_warnings") or ()) + tuple(warnings)
    if "redis_url" in raw:
        c["redis_url"] = str(raw["redis_url"]) if raw["redis_url"] else None
    if raw.get("redis"):
        c["redis"] = w.check("redis", lambda: RedisSettings.of({**dataclasses.asdict(base.redis), **raw["redis"]}))
    c["fairness"] = w.check(w.among("fairness", "tenants", "show_tenant_names"), lambda: _v.fairness(raw, base.fairness))
    c["defaults"] = w.check(w.among("default_priority", "default_deadline_s", "backends", "tenants"),
                            lambda: _v.intent_defaults(raw, base.defaults, probe.queue_key))
    _switches(raw, c, w)
    c["adapter"] = _v.adapter(raw, base.adapter, w, AdapterConfig)
    cfg = dataclasses.replace(base, **c)
    _validate(cfg, w)
    return cfg


def _promotion(raw: dict, base: PromotionSettings, w: "_r.Where") -> PromotionSettings:
    """The promotion settings of ``raw`` (its keys, or a ``policy_options`` map) over ``base``,
    checked by the rules (the policy room)."""
    from sjf_core.policy.promotion import check_settings

    given: dict[str, Any] = {}
    for name, value in (raw.get("policy_options") or {}).items():
        given["rule" if name == "promotion" else name] = value
    for key, name, conv in _PROMOTION_KEYS:
        if raw.get(key) is not None:
            given[name] = w.conv(key, raw[key], conv)
    if not given:
        return base
    settings = dataclasses.replace(base, **given)
    check_settings(settings)
    return settings


def _switches(raw: dict, c: dict, w: "_r.Where") -> None:
    for key in ("memory", "metrics"):
        if key in raw:
            c[key] = _r.on_off(raw[key])
    if "plugins" in raw:
        c["plugins"] = str(raw["plugins"] if raw["plugins"] is not None else "auto").strip()
    if "metrics_port" in raw:
        c["metrics_port"] = None if raw["metrics_port"] in (None, "") else w.port("metrics_port", raw["metrics_port"])


def _validate(cfg: Any, w: "_r.Where") -> None:
    """Cross-field checks, without building a strategy; raises ValueError naming the setting."""
    from sjf_core.policy._policies import check_live_policy

    w.check(w.among("policy"), lambda: check_live_policy(cfg.policy))  # no yardstick on live traffic
    w.check(w.among("policy", "tau", "promotion", "k", "slowdown", "work_slack", "max_wait_s"), cfg.make_policy)
    if cfg.redis_url:
        from sjf_core.admission._redis_config import check_redis_url, check_runnable

        w.check("redis_url", lambda: check_redis_url(cfg.redis_url))
        w.check(w.among("redis_url", "redis", "policy", "promotion"), lambda: check_runnable(cfg.make_policy()))
    for key, b in cfg.backends.items():
        if b.on_disconnect is not None and b.on_disconnect not in DISCONNECT_MODES:
            raise ValueError(f"{w('backends')}: on_disconnect of backend {key} must be one of "
                             f"{DISCONNECT_MODES}, got {b.on_disconnect!r}")
