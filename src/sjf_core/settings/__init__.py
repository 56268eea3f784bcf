"""The settings ground: every settings type of the runtime, with its defaults and docs.

Contract:

* Plain frozen values. A type whose values have a shape of their own checks it when made
  (:class:`RedisSettings`, :class:`OverloadConfig`, :class:`RateLimit`, :class:`Fairness`,
  :class:`IntentDefaults`, :func:`check_slots`); a check that needs a room's knowledge is the
  room's (a promotion rule's parameters: :func:`sjf_core.policy.promotion.check_settings`).
* This package imports no room of the runtime (only the standard library and
  :mod:`sjf_core._faults`), so every room may import it: the rooms take their part of the
  settings from here, and each default is defined once, here.
* Nothing here reads a file or ``SJF_*`` variables, except the two process-wide switches of
  :mod:`._switches`. The composition at the top, :mod:`sjf_core.config`, reads the environment
  and the file, builds :class:`~sjf_core.config.SchedulerConfig` from these types, and asks
  each room to check its own part.

Adding a setting (docs/architecture.md, "Adding a setting"): its type and default here (a new
frozen dataclass in its own module, or a field of :class:`BackendConfig`), its file key and
``SJF_*`` variable in the composition (:mod:`sjf_core.config._read`), its building in
:mod:`sjf_core.config._build`, and its room's check, which the composition calls.
"""

from sjf_core.settings._backend import (AUTO, DEFAULT_PROBE_TIMEOUT_S, DISCONNECT_MODES, AdapterConfig, BackendConfig,
                                        check_slots)
from sjf_core.settings._closest import closest, did_you_mean
from sjf_core.settings._box import BOX_KEYS, BOX_KINDS, BOX_ORDERS, BoxSettings, check_box_order
from sjf_core.settings._backend_url import LOOPBACK, backend_label, normalise
from sjf_core.settings._overload import OverloadConfig
from sjf_core.settings._policy import (DEFAULT_POLICY, DEFAULT_PROMOTION, DEFAULT_SHORT_SERVICE_S, DEFAULT_TAU,
                                       TAU_OFF_PROMOTION, PromotionSettings)
from sjf_core.settings._rate_limit import RateLimit
from sjf_core.settings._redis import FAIL_MODES, MEMORY_REDIS_OP_TIMEOUT_S, MEMORY_REDIS_RETRY_S, RedisSettings
from sjf_core.settings._switches import memory_salt, native_scan_disabled
from sjf_core.settings._tenants import DEFAULT_FAIRNESS, FAIRNESS_MODES, Fairness, IntentDefaults, hash_id

__all__ = [
    # policy
    "DEFAULT_POLICY", "DEFAULT_TAU", "DEFAULT_SHORT_SERVICE_S", "DEFAULT_PROMOTION", "TAU_OFF_PROMOTION",
    "PromotionSettings",
    # backends and the LiteLLM plugin
    "AUTO", "DISCONNECT_MODES", "DEFAULT_PROBE_TIMEOUT_S", "check_slots", "BackendConfig", "AdapterConfig",
    "normalise", "backend_label", "LOOPBACK",
    # many-model boxes
    "BoxSettings", "BOX_KINDS", "BOX_KEYS", "BOX_ORDERS", "check_box_order",
    # admission
    "OverloadConfig", "RateLimit",
    # the Redis store and the memory's Redis timings
    "FAIL_MODES", "RedisSettings", "MEMORY_REDIS_OP_TIMEOUT_S", "MEMORY_REDIS_RETRY_S",
    # tenants and intent
    "Fairness", "IntentDefaults", "FAIRNESS_MODES", "DEFAULT_FAIRNESS", "hash_id",
    # process-wide switches
    "native_scan_disabled", "memory_salt",
    # the "did you mean" of the settings' messages
    "closest", "did_you_mean",
]
