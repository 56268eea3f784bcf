"""Neighbour evidence: a bounded ring of recently answered requests in the predictor's
feature space, searched by brute force.

A request's point is a fixed random projection of its feature vector
(:func:`embed`: sign(x)·ln(1 + |x|), projected to ``DIM`` = 32 dimensions with a seeded
Gaussian matrix, unit length), so a search over 10k points is one [10k, 32] float32
matrix-vector product. Each slot keeps the point (float32 [32]), the deployment group
(int64) and the residual of the key estimate at the time it was scored (float32): the
neighbours say how much the key estimate missed for similar requests. Insert is O(1)
(overwrites the oldest), a query O(capacity · DIM). Bytes per entry: 4·32 + 8 + 4 = 140.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["DIM", "embed", "NeighbourRing", "BYTES_PER_ENTRY"]

DIM = 32
BYTES_PER_ENTRY = 4 * DIM + 8 + 4
_SEED = 20261201
_proj: dict[int, np.ndarray] = {}


def _projection(n_features: int) -> np.ndarray:
    r = _proj.get(n_features)
    if r is None:
        rng = np.random.default_rng(_SEED)
        r = (rng.standard_normal((n_features, DIM)) / np.sqrt(DIM)).astype(np.float32)
        _proj[n_features] = r
    return r


def embed(features: np.ndarray) -> np.ndarray:
    """Unit-length float32 [DIM] point of one feature vector (float [F]); zeros if all-zero."""
    x = np.asarray(features, dtype=np.float32).ravel()
    idx = np.flatnonzero(x)
    if len(idx) == 0:
        return np.zeros(DIM, np.float32)
    v = x[idx]
    v = np.sign(v) * np.log1p(np.abs(v))
    e = v @ _projection(len(x))[idx]
    nrm = float(np.linalg.norm(e))
    return (e / nrm).astype(np.float32) if nrm > 0 else np.zeros(DIM, np.float32)


def group_id(group: bytes) -> int:
    """int64 id of a 16-byte group digest."""
    return int.from_bytes(group[:8], "little", signed=True)


class NeighbourRing:
    """The last ``capacity`` answered requests (points, groups, residuals). Thread-safe.

    Args:
        capacity: entries kept (>= 1); the oldest is overwritten.
        k: neighbours averaged per query.
        min_sim: neighbours with cosine similarity below this are ignored.
    """

    def __init__(self, capacity: int = 10_000, k: int = 8, min_sim: float = 0.8):
        if int(capacity) < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = int(capacity)
        self.k = int(k)
        self.min_sim = float(min_sim)
        self.points = np.zeros((self.capacity, DIM), np.float32)
        self.groups = np.zeros(self.capacity, np.int64)
        self.resid = np.zeros(self.capacity, np.float32)
        self.size = 0
        self._pos = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.size

    def add(self, point: np.ndarray, group: int, resid: float) -> None:
        """Insert one answered request (O(1))."""
        with self._lock:
            i = self._pos
            self.points[i] = point
            self.groups[i] = group
            self.resid[i] = resid
            self._pos = (i + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def query(self, point: np.ndarray, group: int) -> tuple[float, int]:
        """``(similarity-weighted mean residual, neighbours used)`` of the ``k`` nearest points
        of ``group`` with similarity >= ``min_sim``; ``(0.0, 0)`` when there are none."""
        n = self.size
        if n == 0 or not point.any():
            return 0.0, 0
        sims = self.points[:n] @ point
        sims[self.groups[:n] != group] = -2.0
        k = min(self.k, n)
        top = np.argpartition(sims, n - k)[n - k:] if k < n else np.arange(n)
        s = sims[top]
        keep = s >= self.min_sim
        if not keep.any():
            return 0.0, 0
        w = s[keep]
        return float(np.dot(w, self.resid[top][keep]) / w.sum()), int(keep.sum())
