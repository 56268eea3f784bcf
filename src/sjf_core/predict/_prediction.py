"""The predictor's answer for one prompt (shared by predictor, policies and adapters)."""

from __future__ import annotations

from dataclasses import dataclass

from sjf_core.predict._classes import CLASS_NAMES

#: Typical answer tokens of each class, used to turn class probabilities into an
#: expected length when a model only gives probabilities (seed 003 "magnitude prior").
#: Medians of the Short/Medium/Long answers in the public conversation data, docs/data.md (characters // 4).
TYPICAL_TOKENS = (60.0, 400.0, 1100.0)


@dataclass(frozen=True)
class Prediction:
    """Predicted answer length of one prompt.

    Attributes:
        p_short, p_medium, p_long: class probabilities (float, sum to 1):
            Short < 200, Medium 200–799, Long >= 800 answer tokens (paper §4.1).
        label: the most likely class name: "short", "medium" or "long".
        expected_tokens: expected answer tokens (float >= 0). For a classifier it is
            Σ p_c × TYPICAL_TOKENS[c]; a regressor gives it directly.
    """

    p_short: float
    p_medium: float
    p_long: float
    label: str
    expected_tokens: float

    @classmethod
    def from_probs(cls, probs, expected_tokens: float | None = None) -> "Prediction":
        """Build from a length-3 sequence [P(Short), P(Medium), P(Long)]."""
        ps, pm, pl = (float(p) for p in probs)
        label = CLASS_NAMES[max(range(3), key=lambda i: (ps, pm, pl)[i])]
        if expected_tokens is None:
            expected_tokens = ps * TYPICAL_TOKENS[0] + pm * TYPICAL_TOKENS[1] + pl * TYPICAL_TOKENS[2]
        return cls(ps, pm, pl, label, float(expected_tokens))

    @property
    def klass(self) -> int:
        """Predicted class index: 0 Short, 1 Medium, 2 Long."""
        return CLASS_NAMES.index(self.label)
