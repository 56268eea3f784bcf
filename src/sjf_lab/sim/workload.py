"""Simulated workloads: Poisson (M/G/k) or burst arrivals, Gamma service times per class.

Default calibration (paper Table 1, Apple M1, Ollama, Gemma3:4b): per class a Gamma
with the Table 1 mean (Short 2.0 s, Medium 8.5 s, Long 30.1 s) and the C² that
best fits Table 1's P50 and P95 (Short 0.174, Medium 0.209, Long 0.215; e.g. Short
Gamma P50/P95 = 1.89/3.54 s vs Table 1's 1.8/3.5 s). The class mix is not given by
the paper; the default is the paper's ShareGPT class shares (Table 3: 27,000 /
17,000 / 7,800 of 51,800, i.e. 52% / 33% / 15%), the dataset of its headline model
A. This mix has E[S] = 8.36 s and an *overall* C² of 1.87: Table 1 itself implies
the "C² ≈ 2" the paper calls typical of LLM workloads.

``c2`` (None = the Table 1 fit per class) is the squared coefficient of variation
(Var/mean²) and ``c2_scope`` says what it applies to:

* ``"class"`` (default): each class's service time is Gamma(mean_c, C²). The
  overall C² of the mix is then much larger (the classes differ ~15×).
* ``"total"``: one Gamma for all requests with the mix's overall mean and this
  C²; a job's class is then decided by its service time (the lowest
  ``mix[0]`` quantile is Short, the top ``mix[2]`` quantile Long), so class
  means no longer match Table 1. Offered to test how the paper set up §5.6.
* ``"unlinked"``: one Gamma for all requests (overall mean and C²) and class
  labels drawn from the mix *independently* of the service time: a "Short" is
  then no shorter than a "Long". This is a flawed setup; it is offered because
  it is the one that reproduces paper Table 10 (``sjf simulate --scenario table10``).

A job's *true class* is the class that generated it (``"class"``) or the
quantile class (``"total"``); answer tokens are ``service × tokens_per_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sjf_core.policy._entry import LONG, MEDIUM, SHORT

#: Paper Table 1 mean service seconds of Short, Medium, Long.
TABLE1_MEANS_S = (2.0, 8.5, 30.1)
#: Per-class C² of a Gamma fitted to paper Table 1's P50 and P95 (mean fixed).
TABLE1_CLASS_C2 = (0.174, 0.209, 0.215)
#: Paper Table 3 ShareGPT class shares (27,000 / 17,000 / 7,800).
SHAREGPT_MIX = (27000 / 51800, 17000 / 51800, 7800 / 51800)


@dataclass(frozen=True)
class WorkloadSpec:
    """Service-time model.

    Attributes:
        class_means_s: mean service seconds of Short, Medium, Long.
        class_mix: probability of each class (sums to 1).
        c2: squared coefficient of variation of the Gamma service times (> 0), or
            None: per class, the Table 1 fit (:data:`TABLE1_CLASS_C2`; "class" scope
            only, else 2.0).
        c2_scope: "class" or "total" (see module docstring).
        tokens_per_s: answer tokens generated per second (to give jobs token counts).
    """

    class_means_s: tuple[float, float, float] = TABLE1_MEANS_S
    class_mix: tuple[float, float, float] = SHAREGPT_MIX
    c2: float | None = None
    c2_scope: str = "class"
    tokens_per_s: float = 30.0

    def __post_init__(self):
        if len(self.class_means_s) != 3 or min(self.class_means_s) <= 0:
            raise ValueError("class_means_s needs three positive means")
        mix = np.asarray(self.class_mix, dtype=float)
        if mix.shape != (3,) or (mix < 0).any() or abs(mix.sum() - 1) > 1e-6:
            raise ValueError("class_mix needs three shares summing to 1")
        if self.c2 is not None and not self.c2 > 0:
            raise ValueError("c2 must be > 0 or None")
        if self.c2_scope not in ("class", "total", "unlinked"):
            raise ValueError("c2_scope must be 'class', 'total' or 'unlinked'")

    @property
    def class_c2(self) -> tuple[float, float, float]:
        """C² of each class's Gamma ("class" scope)."""
        return TABLE1_CLASS_C2 if self.c2 is None else (self.c2,) * 3

    @property
    def scalar_c2(self) -> float:
        """The C² of the single Gamma of the "total"/"unlinked" scopes."""
        return 2.0 if self.c2 is None else self.c2

    @property
    def mean_s(self) -> float:
        """E[S] of the mix (seconds)."""
        return float(np.dot(self.class_mix, self.class_means_s))

    @property
    def total_c2(self) -> float:
        """Overall C² of the service time (analytic)."""
        if self.c2_scope in ("total", "unlinked"):
            return self.scalar_c2
        m = np.asarray(self.class_means_s)
        es2 = float(np.dot(self.class_mix, m * m * (1 + np.asarray(self.class_c2))))
        return es2 / self.mean_s ** 2 - 1

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(service seconds float64 [n], class int64 [n]) of ``n`` jobs."""
        if self.c2_scope == "class":
            klass = rng.choice(3, size=n, p=np.asarray(self.class_mix, dtype=float))
            return _class_gamma(self, klass, rng), klass.astype(np.int64)
        c2 = self.scalar_c2
        service = rng.gamma(1.0 / c2, self.mean_s * c2, size=n)
        if self.c2_scope == "unlinked":
            klass = rng.choice(3, size=n, p=np.asarray(self.class_mix, dtype=float))
            return service, klass.astype(np.int64)
        lo, hi = np.quantile(service, [self.class_mix[0], 1 - self.class_mix[2]]) if n > 1 else (np.inf, np.inf)
        klass = np.where(service < lo, SHORT, np.where(service < hi, MEDIUM, LONG)).astype(np.int64)
        return service, klass


@dataclass
class Workload:
    """Jobs of one simulation, in arrival order.

    Attributes:
        arrival: arrival times, seconds, float64 [n], non-decreasing.
        service: service seconds, float64 [n].
        klass: true class, int64 [n] (0 Short, 1 Medium, 2 Long).
        tokens: true answer tokens, float64 [n].
    """

    arrival: np.ndarray
    service: np.ndarray
    klass: np.ndarray
    tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival)


def _class_gamma(spec: WorkloadSpec, klass: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Gamma service seconds per job of class ``klass`` (mean and C² of its class)."""
    c2 = np.asarray(spec.class_c2)[klass]
    means = np.asarray(spec.class_means_s)[klass]
    return rng.gamma(1.0 / c2) * means * c2


def poisson_workload(spec: WorkloadSpec, rho: float, n: int, seed: int, slots: int = 1) -> Workload:
    """``n`` jobs with Poisson arrivals at utilisation ``rho`` = λ·E[S]/slots.

    Raises:
        ValueError: rho not in (0, 2), n < 1, slots < 1.
    """
    if not (0 < rho < 2) or n < 1 or slots < 1:
        raise ValueError("need 0 < rho < 2, n >= 1, slots >= 1")
    rng = np.random.default_rng(seed)
    lam = rho * slots / spec.mean_s
    arrival = np.cumsum(rng.exponential(1.0 / lam, size=n))
    service, klass = spec.sample(n, rng)
    return Workload(arrival, service, klass, service * spec.tokens_per_s)


def burst_workload(spec: WorkloadSpec, counts=(50, 0, 50), seed: int = 0) -> Workload:
    """A burst: ``counts`` = (Short, Medium, Long) jobs all arriving at t = 0, submitted
    in a random interleaving (paper §5.3: 50 Short + 50 Long). Class-scoped service."""
    rng = np.random.default_rng(seed)
    klass = np.repeat(np.arange(3), counts)
    rng.shuffle(klass)
    service = _class_gamma(spec, klass, rng)
    n = len(klass)
    return Workload(np.zeros(n), service, klass.astype(np.int64), service * spec.tokens_per_s)


# ---- the setups of the experiments (:mod:`.experiments`, :mod:`.pool_experiments`) ---------
#: The class mix of our reading of the paper's §5.6 setup (Short, Medium, Long).
PAPER_MIX = (0.7, 0.2, 0.1)


def spec_table1(c2: float | None = None) -> WorkloadSpec:
    """Table-1 calibration (means and per-class C² fit), ShareGPT mix; ``c2`` is ignored."""
    return WorkloadSpec(c2=None, c2_scope="class", class_mix=SHAREGPT_MIX)


def spec_ours(c2: float) -> WorkloadSpec:
    """Table-1 class means, ShareGPT mix, the given C² within each class."""
    return WorkloadSpec(c2=c2, c2_scope="class", class_mix=SHAREGPT_MIX)


def spec_paper(c2: float) -> WorkloadSpec:
    """Our reading of the paper's §5.6 setup: C² of the whole distribution, mix 70/20/10."""
    return WorkloadSpec(c2=c2, c2_scope="total", class_mix=PAPER_MIX)
