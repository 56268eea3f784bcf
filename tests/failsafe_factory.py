"""Scheduler factory for the proxy fault tests (loaded by the LiteLLM proxy subprocess through
``SJF_SCHEDULER_FACTORY=failsafe_factory:make`` with this folder on PYTHONPATH).

A prompt starting with "BOOM" gets a prediction that raises when read (a predictor fault
that escapes scoring); every other prompt a fixed Short prediction. The Redis store is used
when ``SJF_TEST_FAILSAFE_REDIS`` names a URL.
"""

from __future__ import annotations

import os

from sjf_core.predict._prediction import Prediction
from sjf_core._scheduler import Scheduler


class LazyFailingPrediction:
    """A prediction computed elsewhere that fails when read."""

    def __getattr__(self, name):
        raise RuntimeError("remote prediction failed")


class BoomPredictor:
    def predict(self, text: str):
        if text.startswith("BOOM"):
            return LazyFailingPrediction()
        return Prediction.from_probs((0.8, 0.1, 0.1))


def make() -> Scheduler:
    url = os.environ.get("SJF_TEST_FAILSAFE_REDIS") or None
    return Scheduler(predictor=BoomPredictor(), policy="sjf", tau="off", lease_ttl_s=900, redis_url=url,
                     redis_options={"retry_s": 0.2} if url else None)
