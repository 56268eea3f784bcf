"""``wrap(client)``: the same ``openai.AsyncOpenAI`` client, with SJF admission in its transport.

The wrapped client is ``client.with_options(http_client=h)`` where ``h`` is a
shallow copy of the client's own ``httpx.AsyncClient`` (openai 1.x/2.x) or
``httpx2.AsyncClient`` (openai 3.x; either library, whichever the client uses:
:mod:`openai_sjf._httplib`) whose transports (the
default one and every mount, e.g. proxies) are wrapped in
:class:`~openai_sjf._transport.SJFTransport`. So everything the user configured
stays in effect: base_url, api_key, organization, project, timeout,
max_retries, default headers and query (carried by ``with_options``), and the
HTTP client's transport, connection pool, limits, proxies, auth, event hooks
and cookies (carried by the copy, which shares them with the original).

The original client is left untouched (no admission). The two share one
connection pool: closing either closes the pool, as with
``client.with_options(...)`` in the SDK itself.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from sjf_core import start_metrics

from ._arrivals import ArrivalMemory
from ._httplib import HttpLib, lib_of_client
from ._options import WrapOptions
from ._registry import scheduler_for
from ._transport import SJFTransport

log = logging.getLogger("openai_sjf")


def _is_sdk_default_http_client(http: Any) -> bool:
    try:
        from openai._base_client import AsyncHttpxClientWrapper
    except Exception as exc:  # pragma: no cover - SDK layout changed
        log.debug("openai's default HTTP client type not found (%s)", type(exc).__name__)
        return False
    return type(http) is AsyncHttpxClientWrapper


def _sjf_transport_of(http: Any) -> SJFTransport | None:
    t = getattr(http, "_transport", None)
    return t if isinstance(t, SJFTransport) else None


def _unwrap(t):
    return t.inner if isinstance(t, SJFTransport) else t


def _wrapped_http_client(http: Any, lib: HttpLib, make) -> Any:
    """A shallow copy of ``http`` (a ``lib.AsyncClient``) whose transports are ``make(original_transport)``."""
    new = copy.copy(http)
    if _is_sdk_default_http_client(http):
        # The SDK's own client closes its pool in __del__; the copy must not, or
        # dropping the wrapped client would close the pool the original still uses.
        new.__class__ = lib.AsyncClient
    new._transport = make(_unwrap(http._transport))
    new._mounts = {
        pattern: (None if t is None else make(_unwrap(t))) for pattern, t in http._mounts.items()
    }
    # Keep the original alive while the copy lives: its __del__ (SDK default
    # client) would otherwise close the shared pool under `client = wrap(client)`.
    new._openai_sjf_origin = getattr(http, "_openai_sjf_origin", http)
    return new


def wrap(
    client,
    *,
    slots: int | None = None,
    policy: Any = None,
    tau: Any = None,
    promotion: Any = None,
    predictor: Any = None,
    scheduler: Any = None,
    retry_rejected: bool = WrapOptions.retry_rejected,
    on_close: str = WrapOptions.on_close,
    probe_timeout_s: float = WrapOptions.probe_timeout_s,
    fairness: Any = None,
    default_priority: Any = None,
    default_deadline_s: Any = None,
):
    """Return ``client`` with SJF admission: same class, same API, same settings.

    Every ``POST`` to ``/chat/completions``, ``/completions`` and ``/responses`` waits for a
    slot of the backend's queue, in the policy's order (shortest predicted answer first for
    the default "sjf-tokens"); other requests pass straight through. docs/openai_sjf.md
    explains each option, supersede (``x-sjf-supersede`` → ``openai.ConflictError``) and
    sharing (clients of one ``base_url`` share one queue; the first wrap sets its options,
    :mod:`openai_sjf._registry`; wrapping a wrapped client replaces its admission).

    Args:
        client: an ``openai.AsyncOpenAI`` (or subclass) on an ``httpx.AsyncClient`` or an
            ``httpx2.AsyncClient`` (openai >= 1.92, < 4).
        slots, retry_rejected, on_close, probe_timeout_s: the wrapper's options
            (:class:`~openai_sjf._options.WrapOptions`, which documents each).
        policy, tau, promotion, predictor, fairness, default_priority, default_deadline_s: the
            scheduling settings (as :class:`sjf_core.SchedulerConfig`; default: the ``SJF_*``
            settings): "sjf-tokens" / "sjf" / "fair" / "fcfs" or a Policy; τ "off" (no guard),
            else the time-based guards' bound, "3x" or seconds; the guard as ``SJF_PROMOTION``
            ("work-bound", the default, or "strict", ...: docs/scheduling.md); a predictor,
            an ONNX path or "default"; "key" / "user" / "header:NAME" / "off"; the band and
            deadline (s) of a request that sends none.
        scheduler: an explicit :class:`sjf_core.Scheduler` instead of those settings.

    Returns:
        A new client of ``type(client)``; ``client`` itself is not modified.

    Raises:
        TypeError: ``client`` is not an async OpenAI client on an ``httpx``/``httpx2`` ``AsyncClient``.
        ValueError: a bad option (the message names it), or ``scheduler`` with other settings.
    """
    options = WrapOptions(retry_rejected, on_close, probe_timeout_s, slots)
    http, lib = _http_client_of(client)
    settings = (policy, tau, predictor, fairness, default_priority, default_deadline_s, promotion)
    if scheduler is not None and (slots is not None or any(v is not None for v in settings)):
        raise ValueError("pass either scheduler= or slots/policy/tau/promotion/predictor/fairness/defaults, "
                         "not both")
    sched = scheduler if scheduler is not None else scheduler_for(client.base_url, options.slots, *settings)
    start_metrics(getattr(sched, "config", None))  # SJF_METRICS_PORT: the explicit start, once per process
    arrivals, cls, header_names = ArrivalMemory(), SJFTransport.for_library(lib), _default_header_names(client)

    def make(inner):
        return cls(inner, sched, options, arrivals=arrivals, probe_header_names=header_names)

    return client.with_options(http_client=_wrapped_http_client(http, lib, make))


def _http_client_of(client) -> tuple[Any, HttpLib]:
    """The client's HTTP client and its library. Raises TypeError when it is no async OpenAI client."""
    http = getattr(client, "_client", None)
    lib = lib_of_client(http)
    if not callable(getattr(client, "with_options", None)) or lib is None:
        raise TypeError(
            "openai_sjf.wrap expects an openai.AsyncOpenAI client using an httpx.AsyncClient or an "
            f"httpx2.AsyncClient, got {type(client).__name__} on {type(http).__name__}"
        )
    return http, lib


def _default_header_names(client) -> tuple[str, ...]:
    """Names of the client's default headers (e.g. a gateway key), which go with an idle
    probe as credentials do; () when the client has none readable."""
    try:
        return tuple(str(k) for k in client.default_headers)
    except Exception as exc:  # an SDK without default_headers: the probe carries credentials only
        log.debug("default headers of the client unreadable (%s); the probe carries credentials only",
                  type(exc).__name__)
        return ()


def transport_of(client) -> SJFTransport | None:
    """The :class:`SJFTransport` of a wrapped client (None if not wrapped)."""
    http = getattr(client, "_client", None)
    return _sjf_transport_of(http) if lib_of_client(http) is not None else None


def queue_of(client):
    """The :class:`sjf_core.admission._local.AdmissionQueue` a wrapped client admits through.

    Raises:
        ValueError: ``client`` is not wrapped.
    """
    t = transport_of(client)
    if t is None:
        raise ValueError("client is not wrapped by openai_sjf.wrap")
    return t.scheduler.queue(client.base_url)
