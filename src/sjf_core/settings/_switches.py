"""The two process-wide switches that rooms read at use time, not per scheduler.

They are not fields of :class:`~sjf_core.config.SchedulerConfig`: the feature scan is chosen
when :mod:`sjf_core.predict` loads (a predictor may be used without any scheduler), and the
memory's digest key must be the same for every scheduler of a process. They are the only
reads of the environment below the composition (:mod:`sjf_core.config`).
"""

from __future__ import annotations

import os
from typing import Mapping


def native_scan_disabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``$SJF_NO_C_SCAN`` is set (not empty, not "0"): use the pure-Python feature scan."""
    v = str((os.environ if environ is None else environ).get("SJF_NO_C_SCAN") or "").strip()
    return v not in ("", "0")


def memory_salt(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key of the length memory's digests, ``$SJF_MEMORY_SALT`` as UTF-8 bytes, or None (built-in salt)."""
    s = (os.environ if environ is None else environ).get("SJF_MEMORY_SALT")
    return s.encode("utf-8", "replace") if s else None
