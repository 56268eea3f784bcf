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
What the adapters use (``litellm_sjf``, ``openai_sjf``: they import nothing private)
    :func:`backend_label` (a backend key as a metrics label, no credentials); the idle probe
    that frees an orphan's slot: :func:`probe_gate` (one :class:`ProbeGate` per backend),
    :func:`probe_request` / :func:`http_probe` (the fixed 1-token request), :func:`probe_stats`,
    :data:`PROBE_HEADER` (the header that marks it), :func:`hold_until_idle` and
    :func:`orphan_deadline` (a failed probe falls back to the orphan's estimated end, the
    probe retried meanwhile); the scheduling headers a request may send:
    :data:`HEADER_PREFIX` ("x-sjf-"), :data:`PRIORITY_HEADER`, :data:`DEADLINE_HEADER`,
    :data:`SUPERSEDE_HEADER`; :class:`LastResort` (``Scheduler.last_resort``: where a request
    whose admission raised waits, FIFO within the backend's slots); :func:`note_fault` (log an
    absorbed fault without prompt text, and count it) and :func:`fault_counts`.
"""

from sjf_core._errors import AdmissionRejected, Superseded
from sjf_core._faults import fault_counts, note_fault
from sjf_core.admission._base import AdmissionQueue
from sjf_core.admission._events import QueueEvents, QueueStats
from sjf_core.admission._local import LocalAdmissionQueue
from sjf_core.admission._ticket import Ticket
from sjf_core.admission._ticket import TicketState
from sjf_core.config import BackendConfig, SchedulerConfig
from sjf_core.policy._entry import CLASS_NAMES, Entry, class_of_tokens
from sjf_core.policy._policies import Policy, RequestMeta, make_policy
from sjf_core.policy._tau import TauConfig, TauEstimator
from sjf_core.policy.promotion import PromotionStrategy, make_promotion
from sjf_core.predict._meta import DEADLINE_HEADER, HEADER_PREFIX, PRIORITY_HEADER, SUPERSEDE_HEADER, request_meta
from sjf_core.predict._prediction import Prediction
from sjf_core.predict._text import scored_text
from sjf_core.settings import Fairness, OverloadConfig

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
    "backend_label": "sjf_core.settings",
    "ProbeGate": "sjf_core.admission._probe",
    "probe_gate": "sjf_core.admission._probe",
    "probe_request": "sjf_core.admission._probe",
    "http_probe": "sjf_core.admission._probe",  # httpx, when a probe is sent
    "probe_stats": "sjf_core.admission._probe",
    "PROBE_HEADER": "sjf_core.admission._probe",
    "LastResort": "sjf_core.admission._last_resort",
    "hold_until_idle": "sjf_core.admission._orphan_hold",
    "orphan_deadline": "sjf_core.admission._orphan_hold",
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
    # what the adapters use
    "backend_label", "ProbeGate", "probe_gate", "probe_request", "http_probe", "probe_stats", "PROBE_HEADER",
    "HEADER_PREFIX", "PRIORITY_HEADER", "DEADLINE_HEADER", "SUPERSEDE_HEADER", "LastResort",
    "hold_until_idle", "orphan_deadline",
    "note_fault", "fault_counts",
]
