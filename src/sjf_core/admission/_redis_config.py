"""The policy as the Redis store's server-side dispatcher runs it.

:func:`policy_server_args` turns a :class:`~sjf_core.policy._policies.Policy` into the
:class:`ServerPolicy` the Lua dispatcher reads (raises ``ValueError`` for a policy it cannot
run); :func:`check_runnable` says so without building anything, and :func:`check_redis_url`
checks the store's URL: the store's own checks, which the config boundary
(:mod:`sjf_core.config._build`) asks for. The store's options are
:class:`sjf_core.settings.RedisSettings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sjf_core.policy._pending import HeapPending
from sjf_core.policy.promotion import WIRE_DEFAULTS
from sjf_core.policy._policies import Policy

#: URL schemes redis-py connects with.
REDIS_SCHEMES = ("redis", "rediss", "unix")


def _shown(url: str) -> str:
    """``url`` for an error message, credentials (anything before an ``@``) hidden."""
    return ("***@" + url.rsplit("@", 1)[1]) if "@" in url else url


def check_redis_url(url: Any) -> str:
    """A Redis URL redis-py can use, checked (its scheme, a numeric port).

    Raises:
        ValueError: what is wrong, with the URL's credentials hidden.
    """
    u = str(url).strip()
    try:
        parts = urlsplit(u)
        parts.port  # noqa: B018 (parses the port: ValueError when it is not a number)
    except ValueError:
        raise ValueError(f"{_shown(u)!r} is not a valid Redis URL (is the port a number?)") from None
    if parts.scheme.lower() not in REDIS_SCHEMES:
        raise ValueError(f"{_shown(u)!r} has no Redis scheme: write redis://HOST:PORT/DB (or rediss://, unix://PATH), "
                         f"e.g. redis://{_shown(u) if '://' not in u else 'localhost:6379'}/0")
    if parts.scheme.lower() == "unix" and not parts.path:
        raise ValueError(f"{_shown(u)!r} names no socket path: write unix:///path/to/redis.sock")
    return u


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
    service_seeds: tuple
    service_alpha: float
    slowdown: float
    work_slack: float
    max_wait_s: float | None


def check_runnable(policy: Policy) -> None:
    """Raise ValueError when the server-side dispatcher cannot run ``policy``: it runs the
    key-ordered policies (one heap: fcfs, sjf, sjf-tokens, oracle) with a promotion rule in
    :data:`SUPPORTED_PROMOTIONS` (not the DRR ``fair`` policy, not "aged-sjf"). Builds nothing."""
    promotion = getattr(policy, "promotion", None)
    heap = type(policy).new_pending is Policy.new_pending
    if not heap or promotion not in SUPPORTED_PROMOTIONS:
        raise ValueError(
            f"the Redis store cannot run policy {getattr(policy, 'name', policy)!r} (promotion {promotion!r}); "
            f"it runs key-ordered policies (HeapPending) with promotion in {SUPPORTED_PROMOTIONS}")


def policy_server_args(policy: Policy, pending: Any = None) -> ServerPolicy:
    """The server-side parameters of a policy: its τ setting and service seeds, and its
    promotion strategy as the strategy serialises itself (``strategy.wire()``).

    Args:
        policy: the queue's policy. pending: a pending structure of it to read them from
            (the store's own: no second strategy is built), or None (one is made).

    Raises:
        ValueError: the policy's pending structure is not a
            :class:`~sjf_core.policy._pending.HeapPending` with a promotion rule in
            :data:`SUPPORTED_PROMOTIONS` (e.g. the DRR ``fair`` policy, "aged-sjf").
    """
    pending = policy.new_pending() if pending is None else pending
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
