"""The neighbour gate and the online ranking accuracy of the length memory.

Contract: both functions read rows of the memory's rolling window, each
``(mu, x, answer_tokens, mu1, applied)`` (floats: final and base ln(1 + tokens), true answer
tokens, key estimate, neighbour correction as applied before that answer was known), and use the
paper's ranking accuracy (Eq. 2, :func:`sjf_core.predict._rank_metrics.ranking_accuracy`).

* :func:`gate` -> ``(open: bool, report: dict)``: open only when, over at least
  :data:`GATE_MIN` rows with :data:`GATE_MIN_CLASS` Short and Long each, the correction ranks the
  answers better than the key estimate alone by :data:`GATE_MARGIN`, and by half of it on the
  most recent half (prequential: docs/memory.md "Blending"). ``None`` when there are too few rows.
* :func:`online_accuracy` -> dict ``n, memory, base, n_short, n_long`` (accuracies rounded, None
  when undefined). JSON-able, no text.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["GATE_EVERY", "GATE_MIN", "GATE_MARGIN", "GATE_MIN_CLASS", "gate", "online_accuracy"]

#: re-checked every GATE_EVERY answers; needs GATE_MIN rows in the window, GATE_MIN_CLASS Short
#: and Long, and a ranking accuracy gain of at least GATE_MARGIN
GATE_EVERY, GATE_MIN, GATE_MARGIN, GATE_MIN_CLASS = 50, 400, 0.02, 30


def gate(rows: list, w: float) -> tuple[bool, dict] | None:
    """Whether neighbour evidence (current weight ``w`` in [0, 1]) has earned its place; None: too few rows."""
    from sjf_core.predict._rank_metrics import ranking_accuracy

    if len(rows) < GATE_MIN:
        return None
    a = np.asarray(rows, dtype=np.float64)
    keys_only, n_s, n_l = ranking_accuracy(a[:, 3], a[:, 2])
    with_nn = ranking_accuracy(a[:, 3] + a[:, 4], a[:, 2])[0]
    half = len(a) // 2  # the gain must also hold on the most recent half of the window
    recent_gain = ranking_accuracy(a[half:, 3] + a[half:, 4], a[half:, 2])[0] - \
        ranking_accuracy(a[half:, 3], a[half:, 2])[0]
    ok = (w > 0 and min(n_s, n_l) >= GATE_MIN_CLASS and not math.isnan(keys_only) and not math.isnan(with_nn)
          and with_nn - keys_only >= GATE_MARGIN and recent_gain >= GATE_MARGIN / 2)
    report = {"open": bool(ok), "weight": round(w, 4), "eq2_keys": round(keys_only, 4),
              "eq2_with_neighbours": round(with_nn, 4), "n": len(rows)}
    return bool(ok), report


def online_accuracy(rows: list) -> dict:
    """Rolling paper Eq. 2 over ``rows``: memory (``mu``) vs base (``x``)."""
    from sjf_core.predict._rank_metrics import ranking_accuracy

    if not rows:
        return {"n": 0, "memory": None, "base": None, "n_short": 0, "n_long": 0}
    a = np.asarray(rows, dtype=np.float64)
    acc_m, ns, nl = ranking_accuracy(a[:, 0], a[:, 2])
    acc_b, _, _ = ranking_accuracy(a[:, 1], a[:, 2])
    f = lambda v: None if math.isnan(v) else round(v, 4)  # noqa: E731
    return {"n": len(rows), "memory": f(acc_m), "base": f(acc_b), "n_short": ns, "n_long": nl}
