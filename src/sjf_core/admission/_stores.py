"""The store factory: which :class:`~sjf_core.admission._base.AdmissionQueue` a backend gets.

:func:`make_queue` is the one place that chooses between the in-process store
(:class:`~sjf_core.admission._local.LocalAdmissionQueue`) and the shared Redis store
(:class:`~sjf_core.admission._redis.RedisAdmissionQueue`): the contract module imports
neither. :class:`~sjf_core._scheduler.Scheduler` makes every queue here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Mapping

from sjf_core.admission._local import LocalAdmissionQueue

if TYPE_CHECKING:
    from sjf_core.admission._base import AdmissionQueue
    from sjf_core.admission._events import QueueEvents
    from sjf_core.admission._overload import OverloadConfig
    from sjf_core.admission._ratelimit import RateLimit
    from sjf_core.policy._policies import Policy
    from sjf_core.policy._tenants import Fairness

log = logging.getLogger("sjf_core.admission")


def make_queue(name: str, *, slots: int, policy: "Policy", lease_ttl_s: float | None = None,
               listeners: "list[QueueEvents] | None" = None, overload: "OverloadConfig | None" = None,
               rate_limit: "RateLimit | None" = None, fairness: "Fairness | None" = None,
               redis_url: str | None = None, redis_options: Mapping[str, Any] | None = None) -> "AdmissionQueue":
    """A new admission queue for backend ``name`` (a queue key): the Redis store when
    ``redis_url`` is set, else the in-process store.

    Args:
        name: the backend key (logs, metrics, Redis keys; never prompt text).
        slots, policy, lease_ttl_s, listeners, fairness: as both stores take them.
        overload, rate_limit: the backend's door; in Redis mode they apply only while the
            store fails open (per process: logged once here).
        redis_url, redis_options: the shared store and its checked options
            (:func:`~sjf_core.admission._redis_config.redis_config`).

    Raises:
        ValueError: as the store's constructor.
    """
    if not redis_url:
        return LocalAdmissionQueue(slots=slots, policy=policy, name=name, lease_ttl_s=lease_ttl_s,
                                   listeners=listeners, overload=overload, rate_limit=rate_limit, fairness=fairness)
    from sjf_core.admission._redis import RedisAdmissionQueue

    local = {k: v for k, v in (("overload", overload), ("rate_limit", rate_limit)) if v is not None}
    if local:
        log.warning("backend %s: overload control and rate limits are per process in Redis mode "
                    "(applied only while failing open)", name)
    return RedisAdmissionQueue(redis_url, slots=slots, policy=policy, name=name, lease_ttl_s=lease_ttl_s,
                               listeners=listeners, local_options=local, fairness=fairness,
                               **dict(redis_options or {}))
