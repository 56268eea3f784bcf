"""Observed service times of one backend queue: per-class means and seconds per token.

Pure and clock-agnostic (the caller passes measured durations), so the live queue
and the simulator share it. Used by the ``fair`` policy (DRR quanta and costs,
seed 003 "adaptive DRR"), by deadline urgency (latest start time = deadline −
expected service) and by overload control (predicted wait).

Seeds: until requests complete, class means are paper Table 1 (Apple M1, Gemma3:4b:
Short 2.0 s, Medium 8.5 s, Long 30.1 s), scaled so that the Short mean equals the
queue's configured initial Short service time.
"""

from __future__ import annotations

import math

from sjf_core.policy._entry import LONG, MEDIUM, SHORT

#: Paper Table 1 mean service times (seconds) of Short, Medium, Long on Apple M1.
TABLE1_MEAN_S = (2.0, 8.5, 30.1)


class ServiceStats:
    """Running service-time estimates of one queue.

    Args:
        initial_short_s: seed of the Short mean service time (seconds, > 0);
            Medium and Long seeds keep the paper Table 1 ratios to it.
        alpha: EWMA weight of each new observation once a class has ``1/alpha``
            observations (0 < alpha <= 1); before that the plain running mean (the
            seed counts as one observation), so early estimates are not noisy.

    Attributes:
        by_predicted: mean service seconds of completed requests per *predicted*
            class [Short, Medium, Long] (what the scheduler can know before dispatch).
        by_true: mean service seconds per *true* class (known when answer tokens are).
        s_per_token: mean seconds per answer token, or NaN until a request with a
            known answer length completes.
    """

    __slots__ = ("alpha", "by_predicted", "by_true", "s_per_token", "count", "_n_pred", "_n_true")

    def __init__(self, initial_short_s: float = 2.0, alpha: float = 0.1):
        if not (initial_short_s > 0) or math.isinf(initial_short_s):
            raise ValueError("initial_short_s must be a positive number of seconds")
        if not (0 < alpha <= 1):
            raise ValueError("alpha must be in (0, 1]")
        scale = initial_short_s / TABLE1_MEAN_S[SHORT]
        self.alpha = alpha
        self.by_predicted = [m * scale for m in TABLE1_MEAN_S]
        self.by_true = [m * scale for m in TABLE1_MEAN_S]
        self.s_per_token = math.nan
        self.count = 0
        self._n_pred = [1, 1, 1]
        self._n_true = [1, 1, 1]

    def observe(self, predicted_class: int, service_s: float, true_class: int | None = None,
                answer_tokens: float | None = None) -> None:
        """Record one completed request that held its slot ``service_s`` seconds.

        Bad values (negative, NaN, infinite, unknown class) are ignored.
        """
        if not (service_s >= 0) or math.isinf(service_s):
            return
        a = self.alpha
        if predicted_class in (SHORT, MEDIUM, LONG):
            self._n_pred[predicted_class] += 1
            w = 1.0 / self._n_pred[predicted_class]
            w = w if w > a else a  # max(a, w)
            self.by_predicted[predicted_class] += w * (service_s - self.by_predicted[predicted_class])
        if true_class in (SHORT, MEDIUM, LONG):
            self._n_true[true_class] += 1
            w = 1.0 / self._n_true[true_class]
            w = w if w > a else a  # max(a, w)
            self.by_true[true_class] += w * (service_s - self.by_true[true_class])
        if answer_tokens is not None and answer_tokens > 0 and math.isfinite(answer_tokens):
            spt = service_s / float(answer_tokens)
            self.s_per_token = spt if math.isnan(self.s_per_token) else self.s_per_token + a * (spt - self.s_per_token)
        self.count += 1

    def expected_s(self, klass: int, expected_tokens: float = 0.0) -> float:
        """Expected service seconds of a request of predicted class ``klass``: the
        observed mean service time of requests predicted in that class.

        The class mean is used rather than ``expected_tokens`` × seconds per token
        because it is calibrated on this backend's own traffic: a classifier's
        expected tokens come from fixed typical lengths per class
        (:data:`~sjf_core.predict._prediction.TYPICAL_TOKENS`) that need not match it.
        ``expected_tokens`` is accepted for API stability and ignored.
        """
        if klass not in (SHORT, MEDIUM, LONG):
            klass = MEDIUM
        return self.by_predicted[klass]
