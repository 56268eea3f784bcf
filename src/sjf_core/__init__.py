"""clairvoyant-sjf core: prompt-only answer-length prediction and SJF admission for serial LLM backends.

Public API (see README): :func:`load_predictor`, :class:`Predictor`, :class:`Prediction`,
:data:`FEATURE_NAMES`, :class:`AdmissionQueue`, :class:`Ticket`, :class:`Scheduler`,
:class:`SchedulerConfig`, :class:`BackendConfig`, :func:`start_metrics`, :func:`make_policy`.
"""

from sjf_core.admission._local import AdmissionQueue, QueueEvents, QueueStats, Ticket
from sjf_core.policy._entry import CLASS_NAMES, Entry, class_of_tokens
from sjf_core.policy._policies import Policy, RequestMeta, make_policy
from sjf_core.predict._prediction import Prediction
from sjf_core._scheduler import Scheduler, default_scheduler
from sjf_core.config import BackendConfig, SchedulerConfig
from sjf_core.ext._metrics import start_metrics
from sjf_core.policy._tau import TauConfig, TauEstimator

__version__ = "0.1.0"


def __getattr__(name):
    # The predictor pulls in onnxruntime; import it only when asked for.
    if name in ("load_predictor", "Predictor", "PredictorError"):
        from sjf_core.predict import _predictor as predictor

        return getattr(predictor, name)
    if name == "FEATURE_NAMES":
        from sjf_core.predict._features import FEATURE_NAMES

        return FEATURE_NAMES
    raise AttributeError(name)


__all__ = [
    "AdmissionQueue", "QueueEvents", "QueueStats", "Ticket", "CLASS_NAMES", "Entry", "class_of_tokens",
    "Policy", "RequestMeta", "make_policy", "Prediction", "Scheduler", "default_scheduler",
    "SchedulerConfig", "BackendConfig", "start_metrics",
    "TauConfig", "TauEstimator", "load_predictor", "Predictor", "PredictorError", "FEATURE_NAMES",
]
