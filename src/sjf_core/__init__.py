"""clairvoyant-sjf core: prompt-only answer-length prediction and SJF admission for serial LLM backends.

The public names are listed in ``__all__``; every other module is private (``_name``) and
may change. ``import sjf_core`` is light: numpy, onnxruntime and pluggy are imported only when a name that
needs them is first used (the predictor, plugins).
How the parts fit together: docs/architecture.md.

Scheduling
    :class:`Scheduler` (one queue per backend, the predictor, the policy, the memory),
    :func:`default_scheduler`, :func:`backend_key`; :class:`SchedulerConfig` and
    :class:`BackendConfig` (the frozen settings, ``SchedulerConfig.from_env()``);
    :func:`start_metrics` (the explicit start of the metrics server).
Prediction
    :func:`load_predictor`, :class:`Predictor`, :class:`Prediction`, :func:`scored_text`,
    :func:`request_meta`, :class:`RequestMeta`, :data:`FEATURE_NAMES` (the paper's v1 layout).
Policy
    :func:`make_policy`, :class:`Policy`, :class:`Entry`, :data:`CLASS_NAMES`,
    :func:`class_of_tokens`, :class:`TauConfig`, :class:`TauEstimator`, :class:`Fairness`,
    :func:`make_promotion` and :class:`PromotionStrategy` (starvation guards;
    all rules in :mod:`sjf_core.policy.promotion`).
Admission
    :class:`AdmissionQueue` (the contract), its stores :class:`LocalAdmissionQueue` and
    :class:`RedisAdmissionQueue`, :class:`Ticket`, :class:`TicketState`, :class:`QueueEvents`,
    :class:`QueueStats`, :class:`OverloadConfig`.
Errors (messages never contain prompt text)
    :class:`AdmissionRejected` (overload: retry later), :class:`Superseded` (replaced while
    queued), :class:`PredictorError` (a model file is missing or unreadable).
Extensions
    :data:`hookimpl` (pluggy marker for plugins; hook specs in :mod:`sjf_core.ext._hooks`).
"""

from sjf_core._errors import AdmissionRejected, Superseded
from sjf_core.admission._base import AdmissionQueue
from sjf_core.admission._events import QueueEvents, QueueStats
from sjf_core.admission._local import LocalAdmissionQueue
from sjf_core.admission._ticket import Ticket
from sjf_core.admission._overload import OverloadConfig
from sjf_core.admission._ticket import TicketState
from sjf_core.config import BackendConfig, SchedulerConfig
from sjf_core.policy._entry import CLASS_NAMES, Entry, class_of_tokens
from sjf_core.policy._policies import Policy, RequestMeta, make_policy
from sjf_core.policy._tau import TauConfig, TauEstimator
from sjf_core.policy._tenants import Fairness
from sjf_core.policy.promotion import PromotionStrategy, make_promotion
from sjf_core.predict._meta import request_meta
from sjf_core.predict._prediction import Prediction
from sjf_core.predict._text import scored_text

__version__ = "0.1.0"

#: Public names whose modules pull in a heavy dependency, imported on first access.
_LAZY = {
    "Scheduler": "sjf_core._scheduler",  # composes the parts: pluggy, numpy (memory), prometheus-client
    "default_scheduler": "sjf_core._scheduler",
    "backend_key": "sjf_core._scheduler",
    "start_metrics": "sjf_core.ext._metrics",  # prometheus-client (optional: None without it)
    "load_predictor": "sjf_core.predict._predictor",  # numpy (onnxruntime only when a model loads)
    "Predictor": "sjf_core.predict._predictor",
    "PredictorError": "sjf_core.predict._model_file",
    "FEATURE_NAMES": "sjf_core.predict._features",
    "RedisAdmissionQueue": "sjf_core.admission._redis",  # redis-py only when a queue connects
    "hookimpl": "sjf_core.ext._hooks",  # pluggy
}


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'sjf_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    # scheduling
    "Scheduler", "default_scheduler", "backend_key", "SchedulerConfig", "BackendConfig", "start_metrics",
    # prediction
    "load_predictor", "Predictor", "Prediction", "scored_text", "request_meta", "RequestMeta", "FEATURE_NAMES",
    # policy
    "make_policy", "Policy", "Entry", "CLASS_NAMES", "class_of_tokens", "TauConfig", "TauEstimator", "Fairness",
    "make_promotion", "PromotionStrategy",
    # admission
    "AdmissionQueue", "LocalAdmissionQueue", "Ticket", "TicketState", "QueueEvents", "QueueStats", "RedisAdmissionQueue", "OverloadConfig",
    # errors
    "AdmissionRejected", "Superseded", "PredictorError",
    # extensions
    "hookimpl",
]
