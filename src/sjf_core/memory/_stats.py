"""Per-key evidence: decayed sufficient statistics of the base predictor's residual, and
the Bayesian estimate they give.

For one request of a key, ``x`` is the base prediction ``ln(1 + E_base)`` (E_base the
base expected answer tokens), ``y = ln(1 + answer tokens)`` the truth, ``z = x − CENTRE``
and ``d = y − x`` the residual. A key stores six floats (:data:`FIELDS`):
``n, Σz, Σd, Σz², Σzd, Σd²``, each multiplied by ``γ = 1 − 1/half_n`` before an update
adds the new observation (recency decay by count, O(1), so a changed app or model is
re-learned after about ``half_n`` answers).

The estimate is a ridge (Gaussian-prior) fit of ``d = c + g·z``: ``c`` the key's offset
from the base (prior N(0, σ0²)), ``g`` a change of slope (prior N(0, 0.5²), clamped so
that ``1 + g ∈ [0.05, 1.5]``: within one key the order of the base is kept). ``g → −1``
is a key whose answers do not depend on the base's guess (an app with fixed-length
answers over pasted content); ``g ≈ 0`` a key with a steady bias. The residual variance
``s²`` has an inverse-gamma prior of weight ``NU0`` at σ0², so a key with one answer is
trusted only partly. :func:`estimate` gives the predictive mean of ``y`` and its variance;
no evidence (n = 0) gives exactly ``x`` and ``σ0²`` (no change).
"""

from __future__ import annotations

import math

__all__ = ["FIELDS", "CENTRE", "NU0", "update", "estimate", "decay_factor"]

FIELDS = ("n", "sz", "sd", "szz", "szd", "sdd")
#: Centre of z: ln(1 + 90), a typical base prediction, so c and g are nearly independent.
CENTRE = math.log1p(90.0)
#: Prior weight (in answers) of σ0² in the residual variance.
NU0 = 2.0
_TAU_G2 = 0.25
_G_MIN, _G_MAX = -0.95, 0.5


def decay_factor(half_n: float) -> float:
    """γ = 1 − 1/half_n (half_n >= 1 answers)."""
    return 1.0 - 1.0 / max(1.0, float(half_n))


def update(stats: list[float] | None, x: float, y: float, gamma: float) -> list[float]:
    """New statistics after one answer: decay ``stats`` by ``gamma`` then add (x, y)."""
    z, d = x - CENTRE, y - x
    if stats is None:
        return [1.0, z, d, z * z, z * d, d * d]
    s = stats
    return [gamma * s[0] + 1.0, gamma * s[1] + z, gamma * s[2] + d,
            gamma * s[3] + z * z, gamma * s[4] + z * d, gamma * s[5] + d * d]


def estimate(stats, x: float, sigma0_2: float) -> tuple[float, float, float]:
    """Predictive ``(mean of y, variance of y, n)`` for a request with base ``x`` under ``stats``.

    Args:
        stats: the six fields, or None / n <= 0 (no evidence).
        x: base prediction ln(1 + tokens).
        sigma0_2: prior residual variance of the base (> 0).
    """
    if not stats or stats[0] <= 1e-9:
        return x, sigma0_2, 0.0
    n, sz, sd, szz, szd, sdd = (float(v) for v in stats)
    # s² from the plain mean fit first (robust for tiny n), then the ridge fit with it
    mean_d = sd / n
    s2_mean = max(0.0, sdd / n - mean_d * mean_d)
    s2 = (n * s2_mean + NU0 * sigma0_2) / (n + NU0)
    lam_c = s2 / sigma0_2
    lam_g = s2 / _TAU_G2
    a11, a12, a22 = n + lam_c, sz, szz + lam_g
    det = a11 * a22 - a12 * a12
    if det <= 1e-12:
        c, g = sd / a11, 0.0
    else:
        c = (a22 * sd - a12 * szd) / det
        g = (a11 * szd - a12 * sd) / det
    if g < _G_MIN or g > _G_MAX:
        g = min(_G_MAX, max(_G_MIN, g))
        c = (sd - g * sz) / a11
    # residual variance of the fit, with the prior
    rss = max(0.0, sdd - 2 * c * sd - 2 * g * szd + c * c * n + 2 * c * g * sz + g * g * szz)
    s2 = (rss + NU0 * sigma0_2) / (n + NU0)
    z = x - CENTRE
    return x + c + g * z, s2 * (1.0 + 1.0 / a11), n
