"""What the length memory keeps of one scored request until its answer: digests and numbers, no text.

Contract: an :class:`Evidence` is attached to the :class:`~sjf_core.predict._prediction.Prediction`
that :meth:`~sjf_core.memory._core.LengthMemory.score` returns (:func:`attach`, a side attribute of
the frozen dataclass, not a field) and read back with :func:`handle_of` (None when absent). Its
``point`` (float32 [32]) is computed from the feature vector on first use; the features are
dropped then.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sjf_core.memory._neighbours import embed, group_id
from sjf_core.predict._prediction import Prediction

__all__ = ["Evidence", "handle_of", "attach"]


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


def attach(prediction: Prediction, ev: Evidence) -> Prediction:
    """``prediction`` with ``ev`` attached (returned for chaining)."""
    object.__setattr__(prediction, "_sjf_evidence", ev)  # frozen dataclass: a side attribute, not a field
    return prediction
