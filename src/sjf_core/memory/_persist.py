"""Opt-in persistence of the length memory to one ``.npz`` file (digests and numbers, no text).

Contract:

* :func:`save` writes the key statistics (16-byte digests -> 6 float64) of a local store and the
  neighbour ring (points float32 [n, 32], groups int64 [n], residuals float64 [n]) atomically
  (temporary file + ``os.replace``). Raises OSError/ValueError as numpy does.
* :func:`load` adds a file's contents to a store and a ring; a missing file is a no-op; an
  unreadable one is logged (type of error only) and ignored: the memory starts empty. Never raises.
"""

from __future__ import annotations

import logging
import os

import numpy as np

log = logging.getLogger("sjf_core.memory")

__all__ = ["save", "load"]


def save(path: str, local_store, ring) -> None:
    """Write ``local_store``'s items and ``ring``'s entries to ``path`` (.npz)."""
    items = local_store.items()
    keys = np.frombuffer(b"".join(k for k, _ in items), dtype=np.uint8).reshape(-1, 16) if items else \
        np.zeros((0, 16), np.uint8)
    vals = np.asarray([v for _, v in items], dtype=np.float64).reshape(-1, 6)
    n = len(ring)
    tmp = f"{path}.tmp.{os.getpid()}.npz"
    np.savez(tmp, keys=keys, stats=vals, points=ring.points[:n], groups=ring.groups[:n], resid=ring.resid[:n])
    os.replace(tmp, path)


def load(path: str, local_store, ring) -> None:
    """Add the statistics and ring entries saved in ``path`` (if it exists) to ``local_store`` and ``ring``."""
    if not os.path.exists(path):
        return
    try:
        with np.load(path, allow_pickle=False) as z:
            for k, v in zip(z["keys"], z["stats"]):
                local_store.put(bytes(k), v.tolist())
            for p, g, r in zip(z["points"], z["groups"], z["resid"]):
                ring.add(p, int(g), float(r))
    except Exception as exc:
        log.warning("length memory: could not load %s (%s); starting empty", path, type(exc).__name__)
