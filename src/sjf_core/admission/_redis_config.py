"""The Redis store's settings: the policy as the server-side dispatcher runs it, and options.

:func:`policy_server_args` turns a :class:`~sjf_core.policy._policies.Policy` into the
:class:`ServerPolicy` the Lua dispatcher reads (raises ``ValueError`` for a policy it cannot
run); :func:`redis_config` checks a Scheduler's Redis URL and options (it reads no
environment: ``SJF_REDIS_*`` are read in :mod:`sjf_core.config`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sjf_core.admission._redis_wire import FAIL_MODES
from sjf_core.policy._pending import HeapPending
from sjf_core.policy.promotion import WIRE_DEFAULTS
from sjf_core.policy._policies import Policy


#: Promotion rules the server-side dispatcher implements (see :mod:`sjf_core.policy.promotion`).
SUPPORTED_PROMOTIONS = ("strict", "one-in-k", "aging", "fcfs-bound", "work-aging", "work-bound")


@dataclass(frozen=True)
class ServerPolicy:
    """What the server-side dispatcher needs from a policy: its τ setting, the service seeds of
    its pending structure, and the promotion fields of ``strategy.wire()``.

    Attributes:
        tau_mode: "off", "seconds" or "multiple" (:class:`~sjf_core.policy._tau.TauConfig`).
        tau_value: τ in seconds, or the multiple of the mean Short service time.
        initial_short_s: seed of the mean Short service time (s).
        alpha: EWMA weight of each completed Short request.
        k: promotion k (1 for "strict").
        promotion: one of :data:`SUPPORTED_PROMOTIONS`.
        key_span: key distance between a typical Short and Long (aging scale).
        horizon: aging horizon in multiples of τ.
        slack, floor: "fcfs-bound" parameters.
        service_seeds: seeds of the mean service seconds of Short, Medium, Long
            (:class:`~sjf_core.policy._service.ServiceStats`, paper Table 1 scaled).
        service_alpha: EWMA weight of the service statistics.
        slowdown, work_slack: "work-aging" / "work-bound" parameters.
        max_wait_s: absolute wait bound (s) or None.
    """

    tau_mode: str
    tau_value: float
    initial_short_s: float
    alpha: float
    k: int
    promotion: str
    key_span: float
    horizon: float
    slack: float
    floor: float
    service_seeds: tuple = (2.0, 8.5, 30.1)
    service_alpha: float = 0.1
    slowdown: float = 8.0
    work_slack: float = 0.2
    max_wait_s: float | None = None


def policy_server_args(policy: Policy) -> ServerPolicy:
    """The server-side parameters of a policy: its τ setting and service seeds, and its
    promotion strategy as the strategy serialises itself (``strategy.wire()``).

    Raises:
        ValueError: the policy's pending structure is not a
            :class:`~sjf_core.policy._pending.HeapPending` with a promotion rule in
            :data:`SUPPORTED_PROMOTIONS` (e.g. the DRR ``fair`` policy, "aged-sjf").
    """
    pending = policy.new_pending()
    strategy = getattr(pending, "strategy", None)
    wire = dict(WIRE_DEFAULTS, **strategy.wire()) if strategy is not None else {}
    promotion = wire.get("promotion")
    if type(pending) is not HeapPending or promotion not in SUPPORTED_PROMOTIONS:
        raise ValueError(
            f"the Redis store cannot run policy {getattr(policy, 'name', policy)!r} "
            f"({type(pending).__name__}, promotion {promotion!r}); it runs key-ordered "
            f"policies (HeapPending) with promotion in {SUPPORTED_PROMOTIONS}"
        )
    c = pending.tau.config
    value = c.multiple if c.mode == "multiple" else (c.seconds if c.mode == "seconds" else 0.0)
    return ServerPolicy(
        tau_mode=c.mode, tau_value=float(value), initial_short_s=float(c.initial_short_service_s),
        alpha=float(c.ewma_alpha), service_seeds=tuple(repr(float(x)) for x in pending.service.by_predicted),
        service_alpha=float(pending.service.alpha), promotion=promotion, **{f: wire[f] for f in WIRE_DEFAULTS},
    )


#: Options of the Redis store (the ``redis`` settings map; ``SJF_REDIS_*`` in :mod:`sjf_core.config`).
_OPTION_NAMES = {"fail_mode", "redis_lease_ttl_s", "waiter_ttl_s", "prefix", "op_timeout_s", "retry_s"}


def redis_config(url: Any = None, options: Any = None, policy: Policy | None = None) -> tuple[str | None, dict[str, Any]]:
    """Check the Redis settings of a :class:`~sjf_core._scheduler.Scheduler` (reads no environment).

    Args:
        url: a Redis URL; None, "" or False disables Redis.
        options: store options (see :class:`RedisAdmissionQueue`: ``fail_mode``,
            ``redis_lease_ttl_s``, ``waiter_ttl_s``, ``prefix``, ``op_timeout_s``, ``retry_s``).
        policy: the policy, checked with :func:`policy_server_args` when Redis is on.

    Returns:
        (url or None, options dict).

    Raises:
        ValueError: unknown option, bad value, or a policy the store cannot run.
    """
    if not url:
        return None, {}
    opts = dict(options or {})
    unknown = set(opts) - _OPTION_NAMES
    if unknown:
        raise ValueError(f"unknown Redis options {sorted(unknown)}; known: {sorted(_OPTION_NAMES)}")
    if opts.get("fail_mode", "open") not in FAIL_MODES:
        raise ValueError(f"fail_mode must be one of {FAIL_MODES}, got {opts['fail_mode']!r}")
    if policy is not None:
        policy_server_args(policy)
    return str(url), opts
