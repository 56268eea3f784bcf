"""The online length memory: evidence from this deployment's answered requests, blended
with the base predictor by how much of it there is (docs/memory.md).

Contract:

* :meth:`LengthMemory.score` takes the base :class:`~sjf_core.predict._prediction.Prediction` of
  a request, its body, its scored text and its feature vector (float32 [F]), and returns a
  Prediction. With no evidence it returns the base prediction object itself (no change).
  The returned prediction carries an :class:`Evidence` handle (:func:`handle_of`): digests,
  a 32-float point and numbers, never text.
* :meth:`LengthMemory.observe` takes that handle and the true answer tokens (int >= 0) and
  updates every key of the request, the neighbour ring and the online accuracy window.
  O(keys) per update; the key store is bounded (LRU) and the ring is bounded.

Blending (all in ``ln(1 + tokens)``, base ``x = ln(1 + E_base)``):

1. **Keys** (:mod:`~sjf_core.memory._keys`): each key with evidence (but ``group``, which
   only gives σ0²) gives a Bayesian
   estimate (mean, predictive variance) of the answer (:func:`~sjf_core.memory._stats.estimate`,
   prior = the base with the residual variance σ0² of the deployment, learned online);
   the one with the smallest predictive variance is used, if that is below 0.8 σ0²: ``μ1``.
   No such key: ``μ1 = x``.
2. **Neighbours** (:mod:`~sjf_core.memory._neighbours`): ``corr`` = similarity-weighted
   mean residual ``y − μ1`` of the nearest answered requests of the same deployment.
   ``μ = μ1 + w · corr``, where ``w ∈ [0, 1]`` is *earned* twice: it is the ridge
   regression coefficient of the realised residual on ``corr`` over past answers
   (prequential: ``corr`` is computed before the answer is in the ring), and it is used
   only while a gate is open: over the rolling window of answered requests (at least 400,
   with 30 Short and 30 Long), adding the correction each of them would have got (the
   weight as it was before its answer: prequential) ranked them better (paper Eq. 2) than
   the key estimate alone by at least 2 pp, and by at least 1 pp on the most recent half.
   A closed gate also skips the ring search at scoring (it then runs at completion).

The returned prediction has ``expected_tokens = exp(μ) − 1`` and class probabilities
from ``ln(1 + tokens) ~ N(μ − σ²/2, σ²)`` (σ² the predictive variance, at most σ0²).
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

import numpy as np

from sjf_core.predict._prediction import Prediction
from sjf_core.memory import _stats as st
from sjf_core.memory._keys import evidence_keys
from sjf_core.memory._neighbours import BYTES_PER_ENTRY, NeighbourRing, embed, group_id
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
#: neighbour gate: re-checked every _GATE_EVERY answers, needs _GATE_MIN in the window and a
#: ranking accuracy gain of at least _GATE_MARGIN
_GATE_EVERY, _GATE_MIN, _GATE_MARGIN, _GATE_MIN_CLASS = 50, 400, 0.02, 30
_LIVE: "weakref.WeakSet[LengthMemory]" = weakref.WeakSet()


class Evidence:
    """What the memory keeps of one scored request until its answer: no text.

    Attributes: group (16-byte digest), gid (int64), digests (tuple of 16-byte digests),
    kinds (their kinds), point (float32 [32]), x (base ln(1+tokens)), mu1 (key
    estimate), corr (neighbour correction), n_nb (neighbours used), mu (final),
    used (kind of evidence used: "key:<kind>", "neighbour", "both" or None), done.
    """

    __slots__ = ("group", "gid", "digests", "kinds", "_features", "_point", "x", "mu1", "corr", "n_nb", "mu", "used", "done",
                 "queried", "__weakref__")

    def __init__(self, group, digests, kinds, features, x):
        self.group = group
        self.gid = group_id(group)
        self.digests = digests
        self.kinds = kinds
        self._features = features
        self._point = None
        self.x = x
        self.mu1 = x
        self.corr = 0.0
        self.n_nb = 0
        self.mu = x
        self.used = None
        self.done = False
        self.queried = False

    @property
    def point(self) -> np.ndarray:
        """The request's point in the neighbour space (float32 [32]), computed on first use;
        the feature vector is dropped then."""
        if self._point is None:
            f, self._features = self._features, None
            self._point = embed(f) if f is not None else np.zeros(32, np.float32)
        return self._point


def handle_of(prediction: Any) -> Evidence | None:
    """The :class:`Evidence` attached to a prediction by :meth:`LengthMemory.score`, or None."""
    return getattr(prediction, "_sjf_evidence", None)


def _attach(prediction: Prediction, ev: Evidence) -> Prediction:
    object.__setattr__(prediction, "_sjf_evidence", ev)  # frozen dataclass: a side attribute, not a field
    return prediction


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
            if n_obs % _GATE_EVERY == 0:
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
        """Open neighbour evidence when, over the rolling window, adding it would have ranked
        the answered requests better (paper Eq. 2) than the key estimate alone, by at least
        ``_GATE_MARGIN``; close it otherwise. Prequential: every correction in the window was
        computed before its answer was known."""
        from sjf_core.predict._rank_metrics import ranking_accuracy

        with self._lock:
            rows = list(self.window)
        if len(rows) < _GATE_MIN:
            return
        nn = self._get([_nn_digest(group)])[0]
        w = self._nn_weight(nn) if nn else 0.0
        a = np.asarray(rows, dtype=np.float64)
        keys_only, n_s, n_l = ranking_accuracy(a[:, 3], a[:, 2])
        with_nn = ranking_accuracy(a[:, 3] + a[:, 4], a[:, 2])[0]
        half = len(a) // 2  # the gain must also hold on the most recent half of the window
        recent_gain = ranking_accuracy(a[half:, 3] + a[half:, 4], a[half:, 2])[0] - \
            ranking_accuracy(a[half:, 3], a[half:, 2])[0]
        ok = (w > 0 and min(n_s, n_l) >= _GATE_MIN_CLASS and not math.isnan(keys_only) and not math.isnan(with_nn)
              and with_nn - keys_only >= _GATE_MARGIN and recent_gain >= _GATE_MARGIN / 2)
        self.nn_open = bool(ok)
        self.nn_gate = {"open": self.nn_open, "weight": round(w, 4), "eq2_keys": round(keys_only, 4),
                        "eq2_with_neighbours": round(with_nn, 4), "n": len(rows)}

    def flush(self, timeout_s: float | None = 10.0) -> bool:
        """Wait until shared evidence was written (Redis store); True at once for a local store."""
        f = getattr(self.store, "flush", None)
        return f(timeout_s) if f is not None else True

    # ---- observability --------------------------------------------------------------------
    def online_accuracy(self) -> dict:
        """Rolling paper Eq. 2 over the last ``window`` answered requests: memory vs base."""
        from sjf_core.predict._rank_metrics import ranking_accuracy

        with self._lock:
            rows = list(self.window)
        if not rows:
            return {"n": 0, "memory": None, "base": None, "n_short": 0, "n_long": 0}
        a = np.asarray(rows, dtype=np.float64)
        acc_m, ns, nl = ranking_accuracy(a[:, 0], a[:, 2])
        acc_b, _, _ = ranking_accuracy(a[:, 1], a[:, 2])
        f = lambda v: None if math.isnan(v) else round(v, 4)
        return {"n": len(rows), "memory": f(acc_m), "base": f(acc_b), "n_short": ns, "n_long": nl}

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
        path = path or self.persist_path
        local = getattr(self.store, "local", self.store)
        items = local.items()
        keys = np.frombuffer(b"".join(k for k, _ in items), dtype=np.uint8).reshape(-1, 16) if items else \
            np.zeros((0, 16), np.uint8)
        vals = np.asarray([v for _, v in items], dtype=np.float64).reshape(-1, 6)
        n = len(self.ring)
        tmp = f"{path}.tmp.{os.getpid()}.npz"
        np.savez(tmp, keys=keys, stats=vals, points=self.ring.points[:n], groups=self.ring.groups[:n],
                 resid=self.ring.resid[:n])
        os.replace(tmp, path)

    def _save_quietly(self) -> None:
        try:
            self.save()
        except Exception as exc:
            log.warning("length memory: could not save to %s (%s)", self.persist_path, type(exc).__name__)

    def _load(self, path: str) -> None:
        if not os.path.exists(path):
            return
        try:
            with np.load(path, allow_pickle=False) as z:
                local = getattr(self.store, "local", self.store)
                for k, v in zip(z["keys"], z["stats"]):
                    local.put(bytes(k), v.tolist())
                for p, g, r in zip(z["points"], z["groups"], z["resid"]):
                    self.ring.add(p, int(g), float(r))
        except Exception as exc:
            log.warning("length memory: could not load %s (%s); starting empty", path, type(exc).__name__)


def live_memories() -> list[LengthMemory]:
    """Memories alive in this process (for the Prometheus collector)."""
    return list(_LIVE)
