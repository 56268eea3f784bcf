"""Scheduler factory for the live overload test (loaded by the LiteLLM proxy subprocess
through ``SJF_SCHEDULER_FACTORY=overload_factory:make`` with this folder on PYTHONPATH).

It uses a marker predictor (prompts starting "LONG" / "MEDIUM" / "SHORT", everything else
unscored) so the test controls each request's class, and reads the overload limits as JSON
from ``SJF_TEST_OVERLOAD``.
"""

from __future__ import annotations

import json
import os

from sjf_core.predict._prediction import Prediction
from sjf_core._scheduler import Scheduler

_PROBS = {"SHORT": (0.9, 0.05, 0.05), "MEDIUM": (0.05, 0.9, 0.05), "LONG": (0.05, 0.05, 0.9)}


class MarkerPredictor:
    """Class from the first word of the prompt (test-only)."""

    def predict(self, text: str) -> Prediction | None:
        word = text.split(" ", 1)[0].upper() if text else ""
        probs = _PROBS.get(word)
        return None if probs is None else Prediction.from_probs(probs)


def make() -> Scheduler:
    return Scheduler(predictor=MarkerPredictor(), policy="sjf", tau="off", lease_ttl_s=900,
                     overload=json.loads(os.environ["SJF_TEST_OVERLOAD"]))
