"""Readers of :mod:`sjf_core.config`: the settings file, the ``SJF_*`` env vars, Python values.

Each reader returns ``(raw, where)``: ``raw`` maps a file key (``policy``, ``slots``,
``backends``...) to its value, ``where`` maps the same key to the setting's name for error
messages (``SJF_SLOTS``, ``SJF_CONFIG file f.yaml: 'slots'``). :mod:`sjf_core.config`
turns ``raw`` into a frozen config. Raises ValueError naming the setting; never logs values.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Mapping

from sjf_core.config._where import FAILED, Where
from sjf_core.settings import AUTO, IntentDefaults, check_slots, closest, normalise

RETIRED = ("orphan_hold_max_s", "orphan_grace_s")
_OFF = ("off", "0", "false", "no", "none")

#: The file's top-level keys.
FILE_KEYS = ("policy", "tau", "promotion", "k", "slowdown", "work_slack", "max_wait_s", "slots", "backends",
             "on_disconnect", "lease_ttl_s", "drain_max_s", "probe_timeout_s", "predictor", "status_port",
             "scheduler_factory", "disabled", "overload", "rate_limit", "redis_url", "redis", "fairness",
             "default_priority", "default_deadline_s", "tenants", "show_tenant_names", "memory", "memory_path",
             "plugins", "metrics", "metrics_port", "metrics_addr", "pool", "boxes", "box_order", "box", *RETIRED)
_BACKEND_KEYS = ("slots", "on_disconnect", "overload", "rate_limit", "queue", "default_priority", "default_deadline_s",
                 "box")

#: Environment variable -> (file key, parser).
ENV = {
    "SJF_POLICY": ("policy", str), "SJF_TAU": ("tau", str), "SJF_PROMOTION": ("promotion", str),
    "SJF_K": ("k", int), "SJF_SLOWDOWN": ("slowdown", float), "SJF_WORK_SLACK": ("work_slack", float),
    "SJF_MAX_WAIT_S": ("max_wait_s", float), "SJF_SLOTS": ("slots", str),
    "SJF_ON_DISCONNECT": ("on_disconnect", lambda v: v.lower()), "SJF_LEASE_TTL_S": ("lease_ttl_s", float),
    "SJF_DRAIN_MAX_S": ("drain_max_s", float), "SJF_PROBE_TIMEOUT_S": ("probe_timeout_s", float),
    "SJF_OVERLOAD": ("overload", json.loads), "SJF_RATE_LIMIT": ("rate_limit", str),
    "SJF_PREDICTOR": ("predictor", str), "SJF_STATUS_PORT": ("status_port", int),
    "SJF_SCHEDULER_FACTORY": ("scheduler_factory", str), "SJF_DISABLED": ("disabled", str),
    "SJF_REDIS_URL": ("redis_url", str), "SJF_FAIRNESS": ("fairness", str),
    "SJF_DEFAULT_PRIORITY": ("default_priority", str), "SJF_DEFAULT_DEADLINE_S": ("default_deadline_s", str),
    "SJF_MEMORY": ("memory", str), "SJF_MEMORY_PATH": ("memory_path", str), "SJF_PLUGINS": ("plugins", str),
    "SJF_METRICS": ("metrics", str), "SJF_METRICS_PORT": ("metrics_port", str),
    "SJF_METRICS_ADDR": ("metrics_addr", str), "SJF_POOL": ("pool", str), "SJF_BOXES": ("boxes", str),
    "SJF_BOX_ORDER": ("box_order", str), "SJF_BACKEND_BOX": ("backend_box_env", json.loads),
    "SJF_BOX": ("box", json.loads),
}
#: ``SJF_REDIS_*`` -> (Redis store option, parser); each beats the file's ``redis`` map.
REDIS_ENV = {
    "SJF_REDIS_FAIL_MODE": ("fail_mode", str), "SJF_REDIS_LEASE_TTL_S": ("redis_lease_ttl_s", float),
    "SJF_REDIS_WAITER_TTL_S": ("waiter_ttl_s", float), "SJF_REDIS_PREFIX": ("prefix", str),
    "SJF_REDIS_OP_TIMEOUT_S": ("op_timeout_s", float), "SJF_REDIS_RETRY_S": ("retry_s", float),
}
RETIRED_ENV = ("SJF_ORPHAN_HOLD_MAX_S", "SJF_ORPHAN_GRACE_S")
#: The shape of each JSON-valued variable, shown when its value is not JSON (:func:`not_json`).
JSON_SHAPES = {"SJF_OVERLOAD": '{"max_queue_depth": 32}', "SJF_BOX": '{"kind": "serial"}',
               "SJF_BACKEND_BOX": '{"http://localhost:11434": {"kind": "ollama"}}',
               "SJF_BACKEND_SLOTS": '{"http://localhost:8080/v1": 2}'}
#: Every ``SJF_*`` setting of the runtime (the others are unknown: a start-up warning each).
KNOWN_ENV = frozenset({*ENV, *REDIS_ENV, *RETIRED_ENV, "SJF_CONFIG", "SJF_BACKEND_SLOTS", "SJF_NO_C_SCAN",
                       "SJF_MEMORY_SALT"})
#: ``SJF_*`` names of the tooling (sjf_lab, benchmarks, tests): not settings, never warned about.
TOOLING_ENV = frozenset({"SJF_CACHE_DIR", "SJF_DATA_DIR", "SJF_REDIS_SERVER", "SJF_FUZZ_EXAMPLES"})
TOOLING_PREFIXES = ("SJF_TEST_", "SJF_BENCH_")
#: Schemes of a backend URL.
BACKEND_SCHEMES = ("http", "https")


def not_json(var: str, exc: json.JSONDecodeError) -> ValueError:
    """The error for a JSON-valued variable whose value is not JSON: what the parser said, and
    the shape expected (:data:`JSON_SHAPES`). The value itself is not repeated."""
    shape = JSON_SHAPES.get(var)
    return ValueError(f"bad SJF_* environment setting: {var}: not valid JSON ({exc.msg} at character {exc.pos})"
                      + (f"; expected e.g. {var}='{shape}'" if shape else ""))


def unknown_env(env: Mapping[str, str]) -> list[str]:
    """One warning per ``SJF_*`` variable of ``env`` that is no setting, with the closest known name."""
    out = []
    for name in sorted(k for k in env if isinstance(k, str) and k.startswith("SJF_")):
        if name in KNOWN_ENV or name in TOOLING_ENV or name.startswith(TOOLING_PREFIXES):
            continue
        best = closest(name, KNOWN_ENV, "SJF_")
        out.append(f"unknown setting {name} is ignored" + (f"; did you mean {best}?" if best else
                                                          " (every setting: examples/litellm_config.yaml)"))
    return out


def unknown_keys(where: str, keys, known) -> ValueError:
    """The error for unknown keys of the settings file, each with the closest known key
    (the list of known keys only when none is close)."""
    unknown = sorted(str(k) for k in keys)
    hints = [f"{k!r}: did you mean {b!r}?" for k in unknown if (b := closest(k, known)) is not None]
    tail = f" ({'; '.join(hints)})" if len(hints) == len(unknown) else f"; known: {sorted(known)}"
    return ValueError(f"{where}: unknown keys {unknown}{tail}")


def backend_url(url: Any, what: str) -> str:
    """``url`` if it parses as a backend base URL (``http(s)://HOST[:PORT][/path]``); raises
    ValueError naming ``what`` otherwise."""
    from urllib.parse import urlsplit

    u = str(url).strip()
    try:
        parts = urlsplit(u)
        parts.port  # noqa: B018 (parses the port)
    except ValueError:
        raise ValueError(f"{what}: backend URL {u!r} does not parse (is the port a number?)") from None
    if parts.scheme.lower() not in BACKEND_SCHEMES or not parts.hostname:
        raise ValueError(f"{what}: backend URL {u!r} does not parse: write http://HOST:PORT/v1 (or https://)")
    return u


def slots_value(v: Any, what: str) -> Any:
    """``"auto"`` or an int >= 1; raises ValueError naming ``what``."""
    if isinstance(v, str) and v.strip().lower() == AUTO:
        return AUTO
    return check_slots(v, f"{what} (or 'auto')")


def on_off(v: Any) -> bool:
    return v is not False and str(v).strip().lower() not in _OFF


def _bool(v: Any) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


# ---- the three sources ---------------------------------------------------------------------
def read_file(path: str) -> tuple[dict, dict]:
    """Read a YAML (or ``.json``) settings file.

    A file that cannot be read or parsed, or that holds no mapping, raises ValueError naming
    it. Every problem of its keys (an unknown key, with the closest known one; a ``backends``,
    ``tenants`` or ``redis`` entry of the wrong shape) is collected in ``raw["read_problems"]``
    and the rest of the file is read on without that part, so that the build reports the
    file's bad values in the same go (one start names every problem)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ValueError(f"SJF_CONFIG file {path} cannot be read: {exc.strerror}") from None
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml  # optional (pyyaml): only YAML settings files need it

            data = yaml.safe_load(text)
    except Exception as exc:
        raise ValueError(f"SJF_CONFIG file {path} cannot be parsed: {type(exc).__name__}") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ValueError(f"SJF_CONFIG file {path} must hold a mapping")
    problems: list[str] = []
    unknown = set(data) - set(FILE_KEYS)
    if unknown:  # reported; the known keys are read on
        problems.append(str(unknown_keys(f"SJF_CONFIG file {path}", unknown, FILE_KEYS)))
        data = {k: v for k, v in data.items() if k not in unknown}
    where = {k: f"SJF_CONFIG file {path}: '{k}'" for k in data}
    raw = {k: v for k, v in data.items() if k not in RETIRED and k not in ("backends", "tenants", "redis")}
    raw["retired"] = [k for k in RETIRED if k in data]
    for key in ("disabled", "show_tenant_names"):
        if key in raw:
            raw[key] = _bool(raw[key])
    if raw.get("fairness") is False:
        raw["fairness"] = "off"
    if data.get("redis") is not None:
        if isinstance(data["redis"], dict):
            raw["redis"] = dict(data["redis"])
        else:
            problems.append(f"{where['redis']} must map option -> value (fail_mode, redis_lease_ttl_s, ...)")
    raw["tenants"] = _tenants(data.get("tenants") or {}, path, problems)
    raw["queues"], raw["backends"] = _backends(data.get("backends") or {}, path, problems)
    raw["read_problems"] = problems
    return raw, where


def _backends(backends: Any, path: str, problems: list[str]) -> tuple[dict, dict]:
    """The file's ``backends`` map, checked: (normalised URL -> queue name, URL -> options). A
    bad entry is a problem of ``problems`` and left out (an unknown option: that option)."""
    what = f"SJF_CONFIG file {path}: 'backends'"
    if not isinstance(backends, dict):
        problems.append(f"{what} must map URL -> {{slots, on_disconnect, queue, ...}}")
        return {}, {}
    queues, out = {}, {}
    for url, opts in backends.items():
        if not isinstance(opts, dict):
            problems.append(f"{what}: backend {url} must map to {{slots, on_disconnect, queue, ...}}")
            continue
        try:
            backend_url(url, what)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        extra = set(opts) - set(_BACKEND_KEYS)
        if extra:
            problems.append(str(unknown_keys(f"SJF_CONFIG file {path}: backend {url}", extra, _BACKEND_KEYS)))
        if opts.get("queue") is not None:
            if isinstance(opts["queue"], str) and opts["queue"].strip():
                queues[normalise(url)] = opts["queue"].strip()
            else:
                problems.append(f"{what}: backend {url}: 'queue' must be a non-empty name")
        out[url] = {k: v for k, v in opts.items() if k != "queue" and k not in extra}
    return queues, out


def _tenants(tenants: Any, path: str, problems: list[str]) -> dict:
    """The file's ``tenants`` map, checked (unknown keys: a problem with the closest key, the
    known keys kept)."""
    keys = ("weight", "default_priority", "default_deadline_s")
    if not isinstance(tenants, dict) or not all(isinstance(v, dict) for v in tenants.values()):
        problems.append(f"SJF_CONFIG file {path}: 'tenants' must map NAME -> "
                        "{weight, default_priority, default_deadline_s}")
        return {}
    for name, t in tenants.items():
        if set(t) - set(keys):
            problems.append(str(unknown_keys(f"SJF_CONFIG file {path}: tenant {name}", set(t) - set(keys), keys)))
    return {str(k): {n: v for n, v in t.items() if n in keys} for k, t in tenants.items()}


def apply_env(raw: dict, where: dict, env: Mapping[str, str], problems: list[str] | None = None) -> None:
    """Lay the ``SJF_*`` variables of ``env`` over ``raw`` (empty ones are unset). A variable
    that does not parse raises ValueError, or, with ``problems``, is left out and its message
    appended there (every one is reported)."""
    w = Where({}, problems)

    def get(name: str) -> str | None:
        v = env.get(name)
        return None if v is None or str(v).strip() == "" else str(v).strip()

    def parsed(var: str, v: str, key: str, parse) -> Any:
        try:
            return parse(v)
        except json.JSONDecodeError as exc:
            raise not_json(var, exc) from None
        except ValueError:
            raise ValueError(f"bad SJF_* environment setting: {var}: {v!r} is not a valid {key}") from None

    for var, (key, parse) in ENV.items():
        v = get(var)
        if v is None or (value := w.step(lambda: parsed(var, v, key, parse))) is FAILED:
            continue
        raw[key] = value
        where[key] = var
    for key in ("disabled", "show_tenant_names"):
        if where.get(key, "").startswith("SJF_") and isinstance(raw.get(key), str):
            raw[key] = _bool(raw[key])
    if get("SJF_BACKEND_SLOTS"):
        slots = w.step(lambda: parse_backend_slots(get("SJF_BACKEND_SLOTS")))
        if slots is not FAILED:
            raw["backend_slots_env"] = slots
    redis = dict(raw.get("redis") or {})
    for var, (name, parse) in REDIS_ENV.items():
        v = get(var)
        if v is not None:
            try:
                redis[name] = parse(v)
            except ValueError:
                w.step(lambda: _bad_redis_env(var, v, parse))
                continue
            where["redis"] = var if where.get("redis", "").startswith("SJF_CONFIG") or "redis" not in where \
                else f"{where['redis']} / {var}"
    if redis:
        raw["redis"] = redis
    raw["retired"] = list(raw.get("retired") or []) + [v for v in RETIRED_ENV if get(v)]
    if problems is None:
        w.raise_problems()  # the one problem, as it always was
    else:
        problems[:] = w.problems


def _bad_redis_env(var: str, v: str, parse) -> None:
    raise ValueError(f"bad SJF_* environment setting: {var}={v!r} is not a valid {parse.__name__}")


def parse_backend_slots(text: str) -> dict:
    """``SJF_BACKEND_SLOTS``: JSON ``{"URL": N}`` or ``URL=N,URL=N`` -> {normalised URL: N or "auto"}."""
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise not_json("SJF_BACKEND_SLOTS", exc) from None
        if not isinstance(obj, dict):
            raise ValueError("SJF_BACKEND_SLOTS must be a JSON object {URL: slots}")
        return {normalise(backend_url(k, "SJF_BACKEND_SLOTS")): slots_value(v, f"SJF_BACKEND_SLOTS[{k}]")
                for k, v in obj.items()}
    out = {}
    for item in text.split(","):
        if not item.strip():
            continue
        url, sep, n = item.strip().rpartition("=")
        if not sep or not url:
            raise ValueError(f"SJF_BACKEND_SLOTS item {item!r} is not URL=N")
        out[normalise(backend_url(url, "SJF_BACKEND_SLOTS"))] = slots_value(n, f"SJF_BACKEND_SLOTS item {item!r}")
    return out


def from_values(values: Mapping[str, Any]) -> tuple[dict, dict]:
    """Python values (file-key names, or the per-backend maps of the old Scheduler arguments)."""
    v = dict(values)
    raw: dict[str, Any] = {}
    backends: dict[str, dict] = {}
    for name, field in (("backend_slots", "slots"), ("backend_overload", "overload"),
                        ("backend_rate_limits", "rate_limit"), ("backend_on_disconnect", "on_disconnect")):
        for url, x in (v.pop(name, None) or {}).items():
            backends.setdefault(url, {})[field] = x
    for url, opts in (v.pop("backends", None) or {}).items():
        backends.setdefault(url, {}).update(opts)
    if backends:
        raw["backends"] = backends
    for name in ("redis_options", "redis"):
        if name in v:  # a mapping of RedisSettings fields, or a RedisSettings itself
            opts = v.pop(name) or {}
            raw["redis"] = dataclasses.asdict(opts) if dataclasses.is_dataclass(opts) else dict(opts)
    if v.get("redis_url") is False:
        v["redis_url"] = None
    d = v.pop("defaults", None)
    if isinstance(d, IntentDefaults):
        raw["intent_defaults"] = d
    elif d:
        raw["default_priority"], raw["default_deadline_s"] = d.get("priority"), d.get("deadline_s")
    known = set(FILE_KEYS) | {"policy_options", "queues", "retired", "intent_defaults"}
    unknown = set(v) - known
    if unknown:
        raise TypeError(f"unknown scheduler settings {sorted(unknown)}")
    raw.update(v)
    return raw, {}
