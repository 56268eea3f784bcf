"""A many-model box's settings (:class:`BoxSettings`, per backend) and the box rule's order.

A box is one backend URL that serves several models (docs/boxes.md). What it is and holds is
read from the box itself; these settings override what is read or assumed. Checked when made:
a bad value raises ValueError naming the setting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from sjf_core.settings._closest import closest, did_you_mean

#: What a box may be said to be: the kinds the plugin reads ("ollama", "lmstudio", "llama-swap",
#: "llama.cpp-router"), "serial" (one model at a time, one answer at a time: llama-cpp-python's
#: ``--config_file`` server), "plain" (one queue for the URL, whatever the model).
BOX_KINDS = ("ollama", "lmstudio", "llama-swap", "llama.cpp-router", "serial", "plain")
#: The order across a box's models: in expected seconds (speeds and loads, the default) or in
#: expected tokens (speed- and load-blind, the comparison of docs/boxes.md).
BOX_ORDERS = ("seconds", "tokens")
#: The keys of a box's settings.
BOX_KEYS = ("kind", "cap", "max_loaded", "keep_alive_s", "models")


def _count(value: Any, what: str, none_ok: bool = True) -> int | None:
    if none_ok and (value is None or (isinstance(value, str) and value.strip().lower() in ("none", "off", "0"))):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be an integer >= 1{' or none' if none_ok else ''}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class BoxSettings:
    """One backend's box settings; each field None or absent: read from the box, else its kind's
    default. ``set`` names the fields given (a ``cap`` or ``max_loaded`` of "none" removes the
    limit)."""

    kind: str | None = None
    cap: int | None = None
    max_loaded: int | None = None
    keep_alive_s: float | None = None
    models: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))  # model -> runner slots
    set: frozenset = frozenset()

    @classmethod
    def parse(cls, value: Any, what: str = "box") -> "BoxSettings":
        """From a mapping ``{kind, cap, max_loaded, keep_alive_s, models: {NAME: {slots}}}``.

        Raises:
            ValueError: an unknown key or a bad value, naming ``what`` and the key.
        """
        if isinstance(value, BoxSettings):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"{what} must map {{kind, cap, max_loaded, keep_alive_s, models}}, got {value!r}")
        extra = set(value) - set(BOX_KEYS)
        if extra:
            keys = sorted(map(str, extra))
            hints = "".join(f"; {k!r}: did you mean {b!r}?" for k in keys if (b := closest(k, BOX_KEYS)))
            raise ValueError(f"{what}: unknown key(s) {keys}; known: {list(BOX_KEYS)}{hints}")
        kind = value.get("kind")
        if kind is not None and str(kind).strip().lower() not in BOX_KINDS:
            raise ValueError(f"{what}: kind must be one of {BOX_KINDS}, got {kind!r}"
                             f"{did_you_mean(str(kind).strip().lower(), BOX_KINDS)}")
        keep = value.get("keep_alive_s")
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, (int, float)) or not keep > 0):
            raise ValueError(f"{what}: keep_alive_s must be a number > 0, got {keep!r}")
        models = value.get("models") or {}
        if not isinstance(models, Mapping):
            raise ValueError(f"{what}: models must map NAME -> {{slots}}, got {models!r}")
        slots = {}
        for name, opts in models.items():
            if not isinstance(opts, Mapping) or set(opts) - {"slots"}:
                raise ValueError(f"{what}: model {name!r} must map to {{slots: N}}, got {opts!r}")
            if "slots" in opts:
                slots[str(name)] = _count(opts["slots"], f"{what}: slots of model {name!r}", none_ok=False)
        return cls(kind=str(kind).strip().lower() if kind is not None else None,
                   cap=_count(value.get("cap"), f"{what}: cap"),
                   max_loaded=_count(value.get("max_loaded"), f"{what}: max_loaded"),
                   keep_alive_s=None if keep is None else float(keep), models=MappingProxyType(slots),
                   set=frozenset(k for k in ("kind", "cap", "max_loaded", "keep_alive_s") if k in value))

    def as_dict(self) -> dict:
        """The fields set, for the box registry (``cap`` / ``max_loaded`` None: no limit)."""
        out = {k: getattr(self, k) for k in self.set}
        if self.models:
            out["models"] = dict(self.models)
        if out.get("keep_alive_s") is None:
            out.pop("keep_alive_s", None)
        return out


def check_box_order(value: Any, what: str = "box_order") -> str:
    """``value`` as one of :data:`BOX_ORDERS`. Raises ValueError naming ``what``."""
    v = str(value).strip().lower()
    if v not in BOX_ORDERS:
        raise ValueError(f"{what} must be one of {BOX_ORDERS}, got {value!r}{did_you_mean(v, BOX_ORDERS)}")
    return v


__all__ = ["BoxSettings", "BOX_KINDS", "BOX_KEYS", "BOX_ORDERS", "check_box_order"]
