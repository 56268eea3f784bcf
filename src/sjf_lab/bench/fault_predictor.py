"""A scheduler whose predictor fails on marked prompts, for ``sjf bench --scenario faults``.

Loaded by the LiteLLM proxy of the scenario through
``SJF_SCHEDULER_FACTORY=sjf_lab.bench.fault_predictor:make``: the ``SJF_*`` settings of the
environment (the plugin's 900 s lease when none is set) and the shipped predictor, wrapped
so that a prompt containing :data:`RAISES` makes it raise (scoring degrades the request to
FCFS order) and one containing :data:`FAILS_WHEN_READ` returns a prediction that raises
when read (a fault that escapes scoring: the request goes through the last-resort gate).
"""

from __future__ import annotations

from typing import Any

#: Marks in a prompt: the predictor raises / returns a prediction that raises when read.
RAISES = "[predictor-raises]"
FAILS_WHEN_READ = "[prediction-fails]"


class _FailingPrediction:
    """A prediction computed elsewhere that fails when read (e.g. a remote call that timed out)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("injected fault: the prediction cannot be read")


class FaultyPredictor:
    """``base`` (a predictor, or None: FCFS), failing on marked prompts (module docstring)."""

    def __init__(self, base: Any):
        self.base = base
        self.layout = getattr(base, "layout", None)
        self.info = getattr(base, "info", None)

    def predict(self, text: str):
        if RAISES in text:
            raise RuntimeError("injected fault: the predictor raises")
        if FAILS_WHEN_READ in text:
            return _FailingPrediction()
        return self.base.predict(text) if self.base is not None else None


def make():
    """The scheduler of the fault scenario's proxy (module docstring)."""
    from sjf_core._scheduler import Scheduler
    from sjf_core.config import SchedulerConfig

    cfg = SchedulerConfig.from_env()
    if cfg.lease_ttl_s is None:
        cfg = cfg.replace(lease_ttl_s=900.0)
    try:
        from sjf_core.predict._predictor import load_predictor

        base = load_predictor(None)
    except Exception:
        base = None
    return Scheduler(cfg, predictor=FaultyPredictor(base))
