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
from sjf_core.config._where import FAILED, Where
from sjf_core.config import _values as _v
from sjf_core.settings import (DISCONNECT_MODES, AdapterConfig, BackendConfig, OverloadConfig, PromotionSettings,
                               RateLimit, RedisSettings, BoxSettings, check_box_order)

__all__ = ["build"]

#: File keys of the promotion settings and their types (``promotion`` is the rule's name).
_PROMOTION_KEYS = (("promotion", "rule", str), ("k", "k", int), ("slowdown", "slowdown", float),
                   ("work_slack", "work_slack", float), ("max_wait_s", "max_wait_s", float))
_PROMOTION_KEY_NAMES = ("promotion", "k", "slowdown", "work_slack", "max_wait_s", "policy_options")


def build(cls, raw: dict, where: dict, base: Any) -> Any:
    """A ``cls`` (SchedulerConfig) with ``raw`` over ``base``, checked (module docstring).

    Every part is built even when another failed (a failed part keeps its ``base`` value, so
    no check downstream reports it again); then :class:`~sjf_core.config._where.SettingsError`
    is raised with every problem, the read problems of ``raw["read_problems"]`` first."""
    w = Where(where, raw.get("read_problems"))
    c: dict[str, Any] = {}

    def put(name: str, fn) -> None:
        value = w.step(fn)
        if value is not FAILED:
            c[name] = value

    for key in ("predictor", "policy", "tau", "memory_path", "metrics_addr"):
        if key in raw:
            c[key] = raw[key]
    if isinstance(c.get("predictor"), str) and c["predictor"].strip().lower() in ("none", "off", "fcfs"):
        c["predictor"] = None
    put("promotion", lambda: w.check(w.among(*_PROMOTION_KEY_NAMES), lambda: _promotion(raw, base.promotion, w)))
    if "slots" in raw:
        put("slots", lambda: w.check(key="slots", fn=lambda: _r.slots_value(raw["slots"], "slots")))
    if "lease_ttl_s" in raw:
        put("lease_ttl_s", lambda: None if raw["lease_ttl_s"] is None else w.positive("lease_ttl_s", raw["lease_ttl_s"]))
    if "overload" in raw:
        put("overload", lambda: w.check("overload", lambda: OverloadConfig.parse(raw["overload"])))
    if "rate_limit" in raw:
        put("rate_limit", lambda: w.check("rate_limit", lambda: RateLimit.parse(raw["rate_limit"])))
    queues = dict(base.queues)
    queues.update(raw.get("queues") or {})
    c["queues"] = MappingProxyType(queues)
    probe = dataclasses.replace(base, queues=c["queues"])
    per_url = {url: dict(opts) for url, opts in (raw.get("backends") or {}).items()}
    box_from = {url: w("backends") for url, opts in per_url.items() if opts.get("box") is not None}
    for url, box in _v.backend_box_env(raw.get("backend_box_env"), w).items():  # SJF_BACKEND_BOX: over the file
        per_url.setdefault(url, {})["box"], box_from[url] = box, w("backend_box_env")
    backends, warnings = _v.merge_backends(dict(base.backends), per_url, raw.get("backend_slots_env") or {},
                                          probe.queue_key, w, BackendConfig)
    c["box_from"] = MappingProxyType({**base.box_from, **box_from})
    c["backends"] = MappingProxyType(backends)
    c["warnings"] = tuple(base.warnings) + tuple(raw.get("read_warnings") or ()) + tuple(warnings)
    if raw.get("box") is not None:
        put("box", lambda: w.check("box", lambda: BoxSettings.parse(raw["box"], "box")))
        c["box_from"] = MappingProxyType({**c["box_from"], "": w("box")})
    if "box_order" in raw:
        put("box_order", lambda: w.check("box_order", lambda: check_box_order(raw["box_order"])))
    if "redis_url" in raw:
        c["redis_url"] = str(raw["redis_url"]) if raw["redis_url"] else None
    if raw.get("redis"):
        put("redis", lambda: w.check("redis", lambda: RedisSettings.of({**dataclasses.asdict(base.redis), **raw["redis"]})))
    put("fairness", lambda: w.check(w.among("fairness", "tenants", "show_tenant_names"),
                                    lambda: _v.fairness(raw, base.fairness)))
    put("defaults", lambda: w.check(w.among("default_priority", "default_deadline_s", "backends", "tenants"),
                                    lambda: _v.intent_defaults(raw, base.defaults, probe.queue_key)))
    _switches(raw, put, c, w)
    c["adapter"] = _v.adapter(raw, base.adapter, w, AdapterConfig)
    cfg = _validate(dataclasses.replace(base, **c), base, w)
    w.raise_problems(c["warnings"], c["adapter"].retired)
    return cfg


def _promotion(raw: dict, base: PromotionSettings, w: Where) -> PromotionSettings:
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


def _switches(raw: dict, put, c: dict, w: Where) -> None:
    for key in ("memory", "metrics"):
        if key in raw:
            c[key] = _r.on_off(raw[key])
    if "plugins" in raw:
        c["plugins"] = str(raw["plugins"] if raw["plugins"] is not None else "auto").strip()
    if "metrics_port" in raw:
        put("metrics_port", lambda: None if raw["metrics_port"] in (None, "") else w.port("metrics_port", raw["metrics_port"]))


def _validate(cfg: Any, base: Any, w: Where) -> Any:
    """Cross-field checks, without building a strategy; each failure is a problem of ``w``
    (naming the setting). Returns ``cfg``, its policy back at ``base``'s when it cannot run
    live (so that the checks after it do not report the same policy again)."""
    from sjf_core.policy._policies import check_live_policy
    from sjf_core.policy._tau import TauConfig

    if w.step(lambda: w.check(w.among("policy"), lambda: check_live_policy(cfg.policy))) is FAILED:
        cfg = dataclasses.replace(cfg, policy=base.policy)  # no yardstick on live traffic
    if w.step(lambda: w.check(w.among("tau"), lambda: TauConfig.parse(cfg.tau))) is FAILED:
        cfg = dataclasses.replace(cfg, tau=base.tau)  # named alone: the policy is not at fault
    built = w.step(lambda: w.check(w.among("policy", "tau", "promotion", "k", "slowdown", "work_slack", "max_wait_s"),
                                   cfg.make_policy))
    if cfg.redis_url:
        from sjf_core.admission._redis_config import check_redis_url, check_runnable

        w.step(lambda: w.check("redis_url", lambda: check_redis_url(cfg.redis_url)))
        if built is not FAILED:
            w.step(lambda: w.check(w.among("redis_url", "redis", "policy", "promotion"),
                                   lambda: check_runnable(cfg.make_policy())))
    for key, b in cfg.backends.items():
        if b.on_disconnect is not None and b.on_disconnect not in DISCONNECT_MODES:
            w.problems.append(f"{w('backends')}: on_disconnect of backend {key} must be one of "
                              f"{DISCONNECT_MODES}, got {b.on_disconnect!r}")
    return cfg
