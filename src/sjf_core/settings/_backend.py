"""One backend's settings (:class:`BackendConfig`), the LiteLLM plugin's (:class:`AdapterConfig`),
and the slot count's one check (:func:`check_slots`).

A backend is a queue key (the normalised base URL, or ``queue:NAME``:
:func:`sjf_core.settings.normalise`). Settings of a backend that are None inherit the
scheduler-wide default (:meth:`sjf_core.config.SchedulerConfig.backend`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sjf_core.settings._box import BoxSettings
from sjf_core.settings._overload import OverloadConfig
from sjf_core.settings._rate_limit import RateLimit

#: The ``slots`` value that asks the backend (llama.cpp's ``/props``) how many it runs.
AUTO = "auto"
#: What the LiteLLM plugin does with an orphan's slot (the first is the default).
DISCONNECT_MODES = ("probe", "drain", "release")
#: Seconds an idle probe may take before an orphan's slot falls back to the lease (both
#: adapters; the OpenAI SDK's default read timeout).
DEFAULT_PROBE_TIMEOUT_S = 600.0


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


@dataclass(frozen=True)
class BackendConfig:
    """One backend's own settings (a queue key's); None inherits the :class:`SchedulerConfig` default."""

    slots: Any = None  # int >= 1 or "auto"
    overload: OverloadConfig | None = None
    rate_limit: RateLimit | None = None
    on_disconnect: str | None = None  # LiteLLM plugin: "probe", "drain" or "release"
    box: BoxSettings | None = None  # a many-model box's settings (docs/boxes.md)


@dataclass(frozen=True)
class AdapterConfig:
    """Settings only the LiteLLM plugin uses (see :mod:`litellm_sjf.settings` for their meaning)."""

    on_disconnect: str = DISCONNECT_MODES[0]
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S
    drain_max_s: float = 600.0
    status_port: int | None = None
    scheduler_factory: str | None = None
    disabled: bool = False
    pool: bool = True  # one queue per model group of several backends (docs/pool.md)
    boxes: bool = True  # a queue per model runner on a box that runs models side by side (docs/boxes.md)
    retired: tuple = ()  # retired keys / env vars that were set (accepted and ignored)
