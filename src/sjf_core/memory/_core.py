"""The online length memory: evidence from this deployment's answered requests, blended
with the base predictor by how much of it there is.

Contract:

* :meth:`LengthMemory.score` takes the base :class:`~sjf_core.predict._prediction.Prediction` of
  a request, its body, its scored text and its feature vector (float32 [F]), and returns a
  Prediction. With no evidence it returns the base prediction object itself (no change).
  The returned prediction carries an :class:`Evidence` handle (:func:`handle_of`): digests,
  a 32-float point and numbers, never text. Never raises (a fault: the base prediction).
* :meth:`LengthMemory.observe` takes that handle and the true answer tokens (int >= 0) and
  updates every key of the request, the neighbour ring and the online accuracy window.
  O(keys) per update; the key store is bounded (LRU) and the ring is bounded. Never raises.

All in ``ln(1 + tokens)``: the key with the smallest predictive variance below 0.8 σ0² gives
``μ1`` (keys: :mod:`~sjf_core.memory._keys`, estimates: :mod:`~sjf_core.memory._stats`); the
neighbour correction (:mod:`~sjf_core.memory._neighbours`) is added with its earned weight only
while the gate is open (:mod:`~sjf_core.memory._gate`). The result has ``expected_tokens =
exp(μ) − 1`` and class probabilities from ``N(μ − σ²/2, σ²)``, σ² <= σ0². The method and its
measurements: docs/memory.md ("Blending").
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import threading
import weakref
from collections import deque
from typing import Any

from sjf_core.predict._prediction import Prediction
from sjf_core.memory import _persist
from sjf_core.memory import _stats as st
from sjf_core.memory._gate import GATE_EVERY, GATE_MIN, gate, online_accuracy
from sjf_core.memory._evidence import Evidence, attach as _attach, handle_of
from sjf_core.memory._keys import evidence_keys
from sjf_core.memory._neighbours import BYTES_PER_ENTRY, NeighbourRing
from sjf_core.memory._store import BYTES_PER_KEY, LocalStore

log = logging.getLogger("sjf_core.memory")

__all__ = ["LengthMemory", "Evidence", "handle_of"]

_SQRT2 = math.sqrt(2.0)
#: ridge weight of the neighbour coefficient (in units of Σ corr²)
_LAMBDA_NN = 2.0
_NN_SALT = b"nn"
#: a key is used only when its predictive variance is below this fraction of the base's (σ0²):
#: a key whose answers vary as much as one-off traffic does is no evidence
_KEY_GAIN = 0.8
_LIVE: "weakref.WeakSet[LengthMemory]" = weakref.WeakSet()


def _nn_digest(group: bytes) -> bytes:
    return _NN_SALT + group[len(_NN_SALT):]


class LengthMemory:
    """Online length memory (see module docstring).

    Args:
        store: a :class:`~sjf_core.memory._store.LocalStore` (default) or
            :class:`~sjf_core.memory._store.RedisStore` (shared by workers).
        half_n: recency of a key, in answers (its statistics decay by 1 − 1/half_n per answer).
        capacity: neighbour ring size (answered requests kept).
        k: neighbours per query; min_sim: their minimum cosine similarity.
        window: completed requests in the rolling ranking accuracy.
        persist_path: an ``.npz`` file to load at start and save at exit and every
            ``save_every`` answers (digests and numbers only), or None (default: off).
    """

    def __init__(self, store: Any = None, half_n: float = 200.0, capacity: int = 10_000, k: int = 8,
                 min_sim: float = 0.8, window: int = 1000, persist_path: str | None = None,
                 save_every: int = 500):
        self.store = store if store is not None else LocalStore()
        self.gamma = st.decay_factor(half_n)
        self.ring = NeighbourRing(capacity, k, min_sim)
        self.window: deque = deque(maxlen=int(window))
        self.persist_path = persist_path
        self.save_every = int(save_every)
        self.counters = {"scored": 0, "with_evidence": 0, "key_evidence": 0, "neighbour_evidence": 0,
                         "observed": 0, "no_answer_tokens": 0, "errors": 0}
        self.used_by_kind: dict[str, int] = {}
        #: neighbour evidence is used only once it has been seen to rank better (see _update_gate)
        self.nn_open = False
        self.nn_gate: dict = {}
        self._lock = threading.Lock()
        if persist_path:
            self._load(persist_path)
            atexit.register(self._save_quietly)
        _LIVE.add(self)

    # ---- scoring ------------------------------------------------------------------------
    def evidence(self, body: Any, text: str | None, features: Any, base: Prediction) -> Evidence | None:
        """The :class:`Evidence` handle of a request (keys, point, base) without scoring it."""
        keys = evidence_keys(body, text)
        if keys is None:
            return None
        e = float(base.expected_tokens)
        x = math.log1p(e) if e > 0 and math.isfinite(e) else 0.0
        return Evidence(keys.group, tuple(d for _, d in keys.keys), tuple(k for k, _ in keys.keys), features, x)

    def score(self, body: Any, text: str | None, features: Any, base: Prediction,
              sigma0: float = 1.0, count: bool = True) -> Prediction:
        """Blend ``base`` with the evidence on this request (see module docstring). Never raises.

        ``count=False``: a request scored only to learn from it (not counted in the status).
        """
        try:
            ev = self.evidence(body, text, features, base)
            if ev is None:
                return base
            out = self._blend(ev, base, sigma0, count)
            return _attach(out, ev)
        except Exception:
            self.counters["errors"] += 1
            log.exception("length memory: scoring failed; base prediction used")
            return base

    def _get(self, digests):
        got = self.store.get_many(digests)
        if isinstance(got, tuple):  # RedisStore: (stats, new ring entries of other workers)
            got, new = got
            for point, gid, resid in new:
                self.ring.add(point, gid, resid)
        return got

    def _blend(self, ev: Evidence, base: Prediction, sigma0: float, count: bool = True) -> Prediction:
        stats = self._get(list(ev.digests) + [_nn_digest(ev.group)])
        nn = stats[-1]
        s0 = self._sigma0_2(stats[0], sigma0)
        x = ev.x
        best_m, best_v, best_kind = x, s0, None
        for kind, s in zip(ev.kinds, stats[:-1]):
            if kind == "group":  # the deployment as a whole: only its σ0² (an offset learnt from a
                continue         # mix of apps would move the requests no key explains: bad ranking)
            m, v, n = st.estimate(s, x, s0)
            if n > 0 and v < best_v and v < _KEY_GAIN * s0:
                best_m, best_v, best_kind = m, v, kind
        ev.mu1 = best_m
        w = 0.0
        if self.nn_open:  # neighbours have earned their place (see _update_gate)
            corr, n_nb = self.ring.query(ev.point, ev.gid)
            ev.corr, ev.n_nb, ev.queried = corr, n_nb, True
            if nn and n_nb:
                w = self._nn_weight(nn)
        else:
            corr, n_nb = 0.0, 0
        mu = best_m + w * corr
        ev.mu = mu
        used = []
        if best_kind is not None:
            used.append("key")
        if w > 0 and n_nb:
            used.append("neighbour")
        if count:
            with self._lock:
                self.counters["scored"] += 1
                if best_kind is not None:
                    self.counters["key_evidence"] += 1
                    self.used_by_kind[best_kind] = self.used_by_kind.get(best_kind, 0) + 1
                if "neighbour" in used:
                    self.counters["neighbour_evidence"] += 1
                if used:
                    self.counters["with_evidence"] += 1
        if not used:
            return base
        ev.used = "+".join(used) if best_kind is None else "+".join([f"key:{best_kind}"] + used[1:])
        sig2 = min(best_v, s0)
        sig = math.sqrt(max(sig2, 0.01))
        centre = mu - 0.5 * sig2
        p_ge_lo = 0.5 * math.erfc((math.log1p(200.0) - centre) / sig / _SQRT2)
        p_ge_hi = 0.5 * math.erfc((math.log1p(800.0) - centre) / sig / _SQRT2)
        return Prediction.from_probs((1.0 - p_ge_lo, p_ge_lo - p_ge_hi, p_ge_hi), max(0.0, math.expm1(mu)))

    @staticmethod
    def _sigma0_2(group_stats, sigma0: float) -> float:
        """Residual variance of the base on this deployment: prior sigma0², learned online."""
        prior = max(0.05, float(sigma0) ** 2)
        if not group_stats or group_stats[0] <= 0:
            return prior
        n, sd, sdd = group_stats[0], group_stats[2], group_stats[5]
        var = max(0.0, sdd / n - (sd / n) ** 2)
        return max(0.05, (n * var + 10.0 * prior) / (n + 10.0))

    # ---- learning -----------------------------------------------------------------------
    def observe(self, ev: Evidence | None, answer_tokens: Any) -> bool:
        """Learn the true answer of a scored request; False when nothing was learned. Never raises."""
        try:
            if ev is None or ev.done:
                return False
            if answer_tokens is None or isinstance(answer_tokens, bool) or not (answer_tokens >= 0):
                self.counters["no_answer_tokens"] += 1
                return False
            ev.done = True
            y = math.log1p(float(answer_tokens))
            z, d = ev.x - st.CENTRE, y - ev.x
            inc = [1.0, z, d, z * z, z * d, d * d]
            items = [(dg, inc) for dg in ev.digests]
            r = y - ev.mu1
            if not ev.queried and ev.point.any():  # prequential: the ring does not hold this answer yet
                ev.corr, ev.n_nb = self.ring.query(ev.point, ev.gid)
            # the neighbour correction as it would have been applied now (weight before this answer)
            local = getattr(self.store, "local", self.store)  # no Redis round trip at completion
            nn = local.get_many([_nn_digest(ev.group)])[0] if ev.n_nb else None
            applied = self._nn_weight(nn) * ev.corr if nn else 0.0
            if ev.n_nb:
                items.append((_nn_digest(ev.group), [1.0, r * ev.corr, ev.corr * ev.corr, r * r, 0.0, 0.0]))
            ring_entry = (ev.point, ev.gid, r) if ev.point.any() else None
            if hasattr(self.store, "flush"):
                self.store.add(items, self.gamma, ring_entry)
            else:
                self.store.add(items, self.gamma)
            if ring_entry is not None:
                self.ring.add(*ring_entry)
            with self._lock:
                self.window.append((ev.mu, ev.x, float(answer_tokens), ev.mu1, applied))
                self.counters["observed"] += 1
                n_obs = self.counters["observed"]
            if n_obs % GATE_EVERY == 0:
                self._update_gate(ev.group)
            if self.persist_path and self.save_every and n_obs % self.save_every == 0:
                self._save_quietly()
            return True
        except Exception:
            self.counters["errors"] += 1
            log.exception("length memory: learning from an answer failed")
            return False

    @staticmethod
    def _nn_weight(nn) -> float:
        """Ridge coefficient of the realised key-estimate residual on the neighbour correction, in [0, 1]."""
        return min(1.0, max(0.0, nn[1] / (nn[2] + _LAMBDA_NN)))

    def _update_gate(self, group: bytes) -> None:
        """Open or close neighbour evidence from the rolling window (:func:`~sjf_core.memory._gate.gate`)."""
        with self._lock:
            rows = list(self.window)
        if len(rows) < GATE_MIN:
            return
        nn = self._get([_nn_digest(group)])[0]
        got = gate(rows, self._nn_weight(nn) if nn else 0.0)
        if got is not None:
            self.nn_open, self.nn_gate = got

    def flush(self, timeout_s: float | None = 10.0) -> bool:
        """Wait until shared evidence was written (Redis store); True at once for a local store."""
        f = getattr(self.store, "flush", None)
        return f(timeout_s) if f is not None else True

    # ---- observability --------------------------------------------------------------------
    def online_accuracy(self) -> dict:
        """Rolling paper Eq. 2 over the last ``window`` answered requests: memory vs base."""
        with self._lock:
            rows = list(self.window)
        return online_accuracy(rows)

    def status(self) -> dict:
        """Counters, sizes and the online ranking accuracy (JSON-able, no text)."""
        with self._lock:
            c = dict(self.counters)
            kinds = dict(self.used_by_kind)
        out = {"enabled": True, "store": type(self.store).__name__, "keys": len(self.store),
               "ring": len(self.ring), "ring_capacity": self.ring.capacity,
               "bytes_per_key": BYTES_PER_KEY, "bytes_per_ring_entry": BYTES_PER_ENTRY,
               "counters": c, "key_kinds_used": kinds, "online_ranking_accuracy": self.online_accuracy(),
               "neighbour_gate": dict(self.nn_gate) or {"open": self.nn_open},
               "persist": bool(self.persist_path)}
        if hasattr(self.store, "degraded"):
            out["redis_degraded"] = self.store.degraded
            out["redis_errors"] = self.store.errors
        return out

    # ---- persistence (opt-in) --------------------------------------------------------------
    def save(self, path: str | None = None) -> None:
        """Write digests, key statistics and the neighbour ring to ``path`` (.npz); no text."""
        _persist.save(path or self.persist_path, getattr(self.store, "local", self.store), self.ring)

    def _save_quietly(self) -> None:
        try:
            self.save()
        except Exception as exc:
            log.warning("length memory: could not save to %s (%s)", self.persist_path, type(exc).__name__)

    def _load(self, path: str) -> None:
        _persist.load(path, getattr(self.store, "local", self.store), self.ring)


def live_memories() -> list[LengthMemory]:
    """Memories alive in this process (for the Prometheus collector)."""
    return list(_LIVE)
