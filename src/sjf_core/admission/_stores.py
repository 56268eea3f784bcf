"""The store factory: which :class:`~sjf_core.admission._base.AdmissionQueue` a backend gets.

:func:`make_queue` is the one place that chooses between the in-process store
(:class:`~sjf_core.admission._local.LocalAdmissionQueue`) and the shared Redis store
(:class:`~sjf_core.admission._redis.RedisAdmissionQueue`): the contract module imports
neither. :class:`~sjf_core._scheduler.Scheduler` makes every queue here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sjf_core.admission._local import LocalAdmissionQueue

if TYPE_CHECKING:
    from sjf_core.admission._base import AdmissionQueue
    from sjf_core.admission._events import QueueEvents
    from sjf_core.admission._overload import OverloadConfig
    from sjf_core.settings import RateLimit
    from sjf_core.settings import RedisSettings
    from sjf_core.policy._policies import Policy
    from sjf_core.settings import Fairness

log = logging.getLogger("sjf_core.admission")


def make_queue(name: str, *, slots: int, policy: "Policy", lease_ttl_s: float | None = None,
               listeners: "list[QueueEvents] | None" = None, overload: "OverloadConfig | None" = None,
               rate_limit: "RateLimit | None" = None, fairness: "Fairness | None" = None,
               redis_url: str | None = None, redis: "RedisSettings | None" = None) -> "AdmissionQueue":
    """A new admission queue for backend ``name`` (a queue key): the Redis store when
    ``redis_url`` is set, else the in-process store.

    Args:
        name: the backend key (logs, metrics, Redis keys; never prompt text).
        slots, policy, lease_ttl_s, listeners, fairness: as both stores take them.
        overload, rate_limit: the backend's door; in Redis mode they apply only while the
            store fails open (per process: logged once here).
        redis_url, redis: the shared store and its :class:`~sjf_core.settings.RedisSettings`.

    Raises:
        ValueError: as the store's constructor.
    """
    if not redis_url:
        return LocalAdmissionQueue(slots=slots, policy=policy, name=name, lease_ttl_s=lease_ttl_s,
                                   listeners=listeners, overload=overload, rate_limit=rate_limit, fairness=fairness)
    from sjf_core.admission._redis import RedisAdmissionQueue

    if overload is not None or rate_limit is not None:
        log.warning("backend %s: overload control and rate limits are per process in Redis mode "
                    "(applied only while failing open)", name)
    return RedisAdmissionQueue(redis_url, slots=slots, policy=policy, name=name, lease_ttl_s=lease_ttl_s,
                               options=redis, listeners=listeners, overload=overload, rate_limit=rate_limit,
                               fairness=fairness)
