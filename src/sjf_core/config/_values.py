"""Composite values of :mod:`sjf_core.config`: backends by queue key, tenant shares, intent
defaults and the LiteLLM-plugin settings, built from the ``raw`` mapping of
:mod:`sjf_core.config._read`. Each raises ValueError naming the setting.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Mapping

from sjf_core.config._read import backend_url, slots_value
from sjf_core.config._where import FAILED, Where
from sjf_core.settings import (AUTO, BOX_KEYS, DISCONNECT_MODES, BoxSettings, Fairness, IntentDefaults, OverloadConfig,
                               RateLimit, backend_label)

__all__ = ["merge_backends", "backend_box_env", "fairness", "intent_defaults", "adapter"]


def merge_backends(out: dict, per_url: Mapping, env_slots: Mapping, queue_key: Callable[[Any], str], w: Where,
                   cls) -> tuple[dict, list]:
    """Fold per-URL backend options into ``out`` (queue key -> ``cls``); URLs of one queue that
    disagree keep the fewest slots / the first value, with a warning. ``env_slots``
    (``SJF_BACKEND_SLOTS``, URL -> slots) win over the file."""
    warnings: list[str] = []
    seen: dict[str, dict] = {}
    for url, opts in per_url.items():
        key = queue_key(url)
        mine = seen.setdefault(key, {})
        for name, value in opts.items():
            if name in ("default_priority", "default_deadline_s") or value is None:
                continue
            value = w.step(lambda: w.check("backends", lambda: _backend_value(name, value, url)))
            if value is FAILED:  # a problem of w: this value is left out
                continue
            if name in mine and mine[name] != value:
                old = mine[name]
                keep = min((x for x in (old, value) if x != AUTO), default=AUTO) if name == "slots" else old
                warnings.append(f"SJF_CONFIG: deployments of one backend ({backend_label(key)}) set different {name} "
                                f"({old!r} and {value!r}); using {keep!r}")
                value = keep
            mine[name] = value
    for url, n in env_slots.items():
        seen.setdefault(queue_key(url), {})["slots"] = n
    for key, fields in seen.items():
        if fields:
            out[key] = dataclasses.replace(out.get(key) or cls(), **fields)
    return out, warnings


def backend_box_env(value: Any, w: Where) -> dict:
    """``SJF_BACKEND_BOX`` (``{URL: box settings}``, parsed JSON or None) checked: URL as written ->
    :class:`BoxSettings`. Each problem names the variable and is a problem of ``w``; a bad entry
    is left out. Keys that are not URLs (``{"max_loaded": 1}``: settings meant for every
    backend) are said to be URLs, with ``SJF_BOX`` suggested."""
    name = w("backend_box_env")
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        w.problems.append(f"bad SJF setting {name}: must be a JSON object {{URL: box settings}}, got {value!r}")
        return {}
    out, settings = {}, {}
    for url, box in value.items():
        if str(url).strip() in BOX_KEYS:  # a box setting where a URL goes: meant for every backend
            settings[url] = box
        elif w.step(lambda: backend_url(url, name)) is not FAILED:
            parsed = w.step(lambda: w.check("backend_box_env", lambda: BoxSettings.parse(box, f"box of backend {url}")))
            if parsed is not FAILED:
                out[url] = parsed
    if settings:
        w.problems.append(f"bad SJF setting {name}: its keys are backend URLs (a deployment's api_base, e.g. "
                          f"{name}='{{\"http://localhost:11434\": {{\"max_loaded\": 1}}}}'), and "
                          f"{', '.join(map(repr, settings))} {'is' if len(settings) == 1 else 'are'} not one; for "
                          f"settings of every backend use SJF_BOX, e.g. SJF_BOX='{json.dumps(settings)}'")
    return out


def _backend_value(name: str, value: Any, url: Any) -> Any:
    if name == "slots":
        return slots_value(value, f"slots of backend {url}")
    if name == "overload":
        return OverloadConfig.parse(value)
    if name == "rate_limit":
        return RateLimit.parse(value)
    if name == "box":
        return BoxSettings.parse(value, f"box of backend {url}")
    if name == "on_disconnect":
        mode = str(value).strip().lower()
        if mode not in DISCONNECT_MODES:
            raise ValueError(f"on_disconnect of backend {url} must be one of {DISCONNECT_MODES}, got {value!r}")
        return mode
    raise ValueError(f"unknown backend setting {name!r}")


def fairness(raw: Mapping, base: Fairness) -> Fairness:
    """The tenant shares of ``raw`` (``fairness``, ``tenants`` weights, ``show_tenant_names``)."""
    if not any(k in raw for k in ("fairness", "tenants", "show_tenant_names")):
        return base
    tenants = raw.get("tenants") or {}
    weights = {n: t["weight"] for n, t in tenants.items() if t.get("weight") is not None}
    spec = raw.get("fairness", base)
    show = bool(raw.get("show_tenant_names", base.show_names))
    if isinstance(spec, Fairness):
        return Fairness(spec.mode, spec.header, Fairness._weights(weights) if weights else spec.weights, show)
    return Fairness.parse(spec, weights or dict(base.weights), show)


def intent_defaults(raw: Mapping, base: IntentDefaults, queue_key: Callable[[Any], str]) -> IntentDefaults:
    """The intent defaults of ``raw`` (global, per backend, per tenant)."""
    if raw.get("intent_defaults") is not None:
        return raw["intent_defaults"]
    per_backend = {}
    for url, opts in (raw.get("backends") or {}).items():
        d = {k: opts[k] for k in ("default_priority", "default_deadline_s") if k in opts}
        if d:
            per_backend[queue_key(url)] = d
    tenants = {n: {k: v for k, v in t.items() if k != "weight"} for n, t in (raw.get("tenants") or {}).items()}
    if not per_backend and not tenants and "default_priority" not in raw and "default_deadline_s" not in raw:
        return base
    return IntentDefaults.parse(raw.get("default_priority", base.priority), raw.get("default_deadline_s", base.deadline_s),
                                per_backend or dict(base.backends), tenants or dict(base.tenants))


def adapter(raw: Mapping, base: Any, w: Where, cls) -> Any:
    """The LiteLLM-plugin settings of ``raw``, over ``base`` (an ``AdapterConfig``); a bad one
    is a problem of ``w`` and keeps its ``base`` value."""
    c: dict[str, Any] = {}

    def put(name: str, fn) -> None:
        value = w.step(fn)
        if value is not FAILED:
            c[name] = value

    if "on_disconnect" in raw:
        put("on_disconnect", lambda: _mode(raw["on_disconnect"], w))
    for key in ("probe_timeout_s", "drain_max_s"):
        if raw.get(key) is not None:
            put(key, lambda: w.positive(key, raw[key]))
    if raw.get("status_port") is not None:
        put("status_port", lambda: w.port("status_port", raw["status_port"]))
    if "scheduler_factory" in raw:
        c["scheduler_factory"] = str(raw["scheduler_factory"]).strip() if raw["scheduler_factory"] else None
    if "disabled" in raw:
        c["disabled"] = bool(raw["disabled"])
    if "pool" in raw:
        put("pool", lambda: _pool(raw["pool"], w))
    if "boxes" in raw:
        put("boxes", lambda: _pool(raw["boxes"], w, "boxes"))
    if raw.get("retired"):
        c["retired"] = tuple(base.retired) + tuple(raw["retired"])
    return dataclasses.replace(base, **c) if c else base


def _mode(value: Any, w: Where) -> str:
    mode = str(value).strip().lower()
    if mode not in DISCONNECT_MODES:
        raise ValueError(f"bad SJF setting {w('on_disconnect')}: on_disconnect must be one of "
                         f"{DISCONNECT_MODES}, got {value!r}")
    return mode


def _pool(value: Any, w: Where, name: str = "pool") -> bool:
    v = value if isinstance(value, bool) else str(value).strip().lower()
    if v not in (True, False, "on", "off", "true", "false"):
        raise ValueError(f"bad SJF setting {w(name)}: {name} must be on or off, got {value!r}")
    return v in (True, "on", "true")
