"""Tenants and intent: who a request belongs to, and the defaults it gets.

* :class:`Fairness` — the ``fairness`` setting: ``"off"``, ``"key"`` (the API key;
  default), ``"team"``, ``"user"`` (the OpenAI ``user`` body field) or
  ``"header:NAME"``; per-tenant weights; whether tenant names may be shown.
  :meth:`Fairness.tenant` maps a request to a tenant id: ``sha256`` of the mode and the
  value, 12 hex digits (names only with ``show_names``), or None (no tenant: the shared
  default tenant "").
* :class:`IntentDefaults` — ``default_priority`` / ``default_deadline_s`` for requests that
  send none: global, per backend, per tenant (tenant beats backend beats global).

Never raises on request data: a missing or unreadable value gives no tenant / the default.
Configuration errors raise :class:`ValueError` naming the setting. Settings of the ground
(:mod:`sjf_core.settings`): the policy and admission rooms take them as they are.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, TypeVar

from sjf_core._faults import note_fault
from sjf_core.settings._backend_url import normalise

log = logging.getLogger("sjf_core.policy")


class _Intent(Protocol):
    """What :meth:`IntentDefaults.apply` reads of a request's metadata (a frozen dataclass:
    :class:`sjf_core.RequestMeta`)."""

    explicit_priority: bool
    deadline_s: float | None


_M = TypeVar("_M", bound=_Intent)

FAIRNESS_MODES = ("off", "key", "team", "user")
DEFAULT_FAIRNESS = "key"


def hash_id(mode: str, value: str) -> str:
    """Tenant id of ``value`` under ``mode``: 12 hex digits of sha256 (not reversible)."""
    return hashlib.sha256(f"{mode}:{value}".encode("utf-8", "replace")).hexdigest()[:12]


@dataclass(frozen=True)
class Fairness:
    """Fair shares across tenants.

    Attributes:
        mode: "off", "key", "team", "user" or "header" (then ``header`` names it).
        header: the request header naming the tenant (lower case) for mode "header".
        weights: tenant name (as sent: the key, team, user or header value) or tenant
            id -> share weight (> 0; default 1).
        show_names: report tenant names instead of hashed ids (status, metrics).
    """

    mode: str = DEFAULT_FAIRNESS
    header: str | None = None
    weights: Mapping[str, float] = field(default_factory=dict)
    show_names: bool = False

    @classmethod
    def parse(cls, spec: Any = None, weights: Mapping[str, Any] | None = None, show_names: bool = False) -> "Fairness":
        """``spec``: a :class:`Fairness`, None (default "key"), "off" / "none" / False,
        "key", "team", "user" or "header:NAME".

        Raises:
            ValueError: an unknown mode, an empty header name or a weight not > 0.
        """
        if isinstance(spec, Fairness):
            return spec if weights is None else dataclasses.replace(spec, weights=cls._weights(weights))
        if spec is None:
            spec = DEFAULT_FAIRNESS
        if spec is False:
            spec = "off"
        text = str(spec).strip()
        low = text.lower()
        if low in ("none", "false", "0", ""):
            low = "off"
        header = None
        if low.startswith("header:"):
            header = text.split(":", 1)[1].strip().lower()
            if not header:
                raise ValueError("fairness 'header:NAME' needs a header name")
            low = "header"
        elif low not in FAIRNESS_MODES:
            raise ValueError(f"fairness must be one of {FAIRNESS_MODES} or 'header:NAME', got {spec!r}")
        return cls(low, header, cls._weights(weights or {}), bool(show_names))

    @staticmethod
    def _weights(weights: Mapping[str, Any]) -> dict:
        if not isinstance(weights, Mapping):
            raise ValueError("fairness weights must map tenant -> weight")
        out = {}
        for k, v in weights.items():
            try:
                w = float(v)
            except (TypeError, ValueError):
                raise ValueError(f"fairness weight of tenant {k!r} is not a number") from None
            if not (w > 0) or math.isinf(w):
                raise ValueError(f"fairness weight of tenant {k!r} must be a positive number")
            out[str(k)] = w
        return out

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def _id(self, value: str) -> str:
        return value if self.show_names else hash_id(self.mode, value)

    def tenant(self, body: Any = None, headers: Mapping[str, str] | None = None, api_key: Any = None,
               team: Any = None) -> str | None:
        """The tenant id of one request, or None (no tenant / fairness off). Never raises."""
        try:
            if self.mode == "off":
                return None
            value = None
            if self.mode == "key":
                value = api_key
            elif self.mode == "team":
                value = team
            elif self.mode == "user":
                if isinstance(body, Mapping):
                    value = body.get("user")
                    if value is None and isinstance(body.get("metadata"), Mapping):
                        value = body["metadata"].get("user")
            elif self.mode == "header" and headers:
                for k, v in headers.items():
                    if str(k).lower() == self.header:
                        value = v
                        break
            if value is None or isinstance(value, (dict, list, bool)):
                return None
            value = str(value)[:512]
            return self._id(value) if value else None
        except Exception:
            note_fault(log, f"tenant ({self.mode}) could not be read; the request goes to the shared tenant")
            return None

    def weight(self, tenant: str | None) -> float:
        """Share weight of a tenant id (by its id or, hashed the same way, its name)."""
        if not self.weights or tenant is None:
            return 1.0
        w = self.weights.get(tenant)
        if w is None:
            for name, v in self.weights.items():
                if self._id(name) == tenant:
                    return v
            return 1.0
        return w


def _opt_int(v: Any, what: str) -> int | None:
    if v is None or v == "":
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be an integer, got {v!r}") from None
    if not math.isfinite(f):
        raise ValueError(f"{what} must be an integer, got {v!r}")
    return max(-100, min(100, int(f)))


def _opt_pos(v: Any, what: str) -> float | None:
    if v is None or v == "":
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number of seconds, got {v!r}") from None
    if not (f > 0) or math.isinf(f):
        raise ValueError(f"{what} must be a positive number of seconds, got {v!r}")
    return f


@dataclass(frozen=True)
class IntentDefaults:
    """Defaults for requests that send no priority / deadline.

    Attributes:
        priority, deadline_s: global defaults (None: priority 0, no deadline).
        backends: backend key -> {"default_priority", "default_deadline_s"}.
        tenants: tenant name or id -> {"default_priority", "default_deadline_s"}.
    """

    priority: int | None = None
    deadline_s: float | None = None
    backends: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    tenants: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def parse(cls, priority: Any = None, deadline_s: Any = None, backends: Mapping | None = None,
              tenants: Mapping | None = None) -> "IntentDefaults":
        """Validate and build. Raises ValueError naming a bad value."""
        def one(d: Any, where: str) -> dict:
            if not isinstance(d, Mapping):
                raise ValueError(f"{where} must map default_priority / default_deadline_s")
            extra = set(d) - {"default_priority", "default_deadline_s"}
            if extra:
                raise ValueError(f"{where}: unknown keys {sorted(extra)}")
            return {"default_priority": _opt_int(d.get("default_priority"), f"{where} default_priority"),
                    "default_deadline_s": _opt_pos(d.get("default_deadline_s"), f"{where} default_deadline_s")}

        return cls(_opt_int(priority, "default_priority"), _opt_pos(deadline_s, "default_deadline_s"),
                   {normalise(k): one(v, f"backend {k}") for k, v in (backends or {}).items()},
                   {str(k): one(v, f"tenant {k}") for k, v in (tenants or {}).items()})

    def _lookup(self, name: str, backend: str | None, tenant: str | None, fairness: Fairness | None):
        if tenant is not None and self.tenants:
            d = self.tenants.get(tenant)
            if d is None and fairness is not None:
                for k, v in self.tenants.items():
                    if fairness._id(k) == tenant:
                        d = v
                        break
            if d is not None and d.get(name) is not None:
                return d[name]
        if backend is not None and backend in self.backends and self.backends[backend].get(name) is not None:
            return self.backends[backend][name]
        return self.priority if name == "default_priority" else self.deadline_s

    def apply(self, meta: _M, backend: str | None = None, tenant: str | None = None,
              fairness: Fairness | None = None) -> _M:
        """``meta`` with the defaults filled in where the request sent nothing. Never raises."""
        try:
            changes = {}
            if not meta.explicit_priority:
                p = self._lookup("default_priority", backend, tenant, fairness)
                if p is not None:
                    changes["priority"] = int(p)
            if meta.deadline_s is None:
                d = self._lookup("default_deadline_s", backend, tenant, fairness)
                if d is not None:
                    changes["deadline_s"] = float(d)
            return dataclasses.replace(meta, **changes) if changes else meta
        except Exception:
            note_fault(log, "intent defaults could not be applied; the request keeps its own metadata")
            return meta
