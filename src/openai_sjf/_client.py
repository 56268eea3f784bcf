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
from typing import Any

from ._arrivals import ArrivalMemory
from ._httplib import HttpLib, lib_of_client
from sjf_core.ext._metrics import start_metrics

from ._registry import scheduler_for
from ._orphans import DEFAULT_PROBE_TIMEOUT_S
from ._transport import ON_CLOSE, SJFTransport


def _is_sdk_default_http_client(http: Any) -> bool:
    try:
        from openai._base_client import AsyncHttpxClientWrapper
    except Exception:  # pragma: no cover - SDK layout changed
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
    predictor: Any = None,
    scheduler: Any = None,
    retry_rejected: bool = False,
    on_close: str = "probe",
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
    fairness: Any = None,
    default_priority: Any = None,
    default_deadline_s: Any = None,
):
    """Return ``client`` with SJF admission: same class, same API, same settings.

    Every ``POST`` to ``/chat/completions``, ``/completions`` and ``/responses``
    waits for a slot of the backend's queue, in the policy's order (shortest
    predicted answer first for the default ``"sjf-tokens"``); other requests pass straight through.

    Args:
        client: an ``openai.AsyncOpenAI`` (or subclass, e.g. ``AsyncAzureOpenAI``)
            using an ``httpx.AsyncClient`` or an ``httpx2.AsyncClient`` (openai >= 1.92, < 4).
        slots: concurrent requests the backend gets (>= 1; default 1, a serial
            backend). Applies when this wrap creates the backend's queue.
        policy: "sjf-tokens" (default: expected answer tokens), "sjf" (P(Long)), "fair", "fcfs", or a ``sjf_core`` Policy.
        tau: starvation bound τ: "3x" (default, × mean Short service time),
            seconds (float), or "off" (paper §3.4).
        predictor: a ``sjf_core`` predictor (anything with
            ``.predict(text) -> Prediction``), a path to an ONNX model, or
            "default" (the shipped model).
        scheduler: an explicit ``sjf_core._scheduler.Scheduler`` to use; then
            ``slots``/``policy``/``tau``/``predictor`` must not be given.
        retry_rejected: let the SDK retry an overload rejection (429) after its
            ``Retry-After``; default False: ``openai.RateLimitError`` at once.
        on_close: a streamed (SSE) body closed or abandoned before its end:
            "probe" (default: the connection is closed and the slot is held until
            a 1-token probe of the backend returns, right whether the backend stops
            on disconnect or not), "release" (closed and freed at once, for
            backends known to stop at once) or "drain" (the rest is read in the
            background and the slot freed at its end). A non-streamed call that is
            cancelled or times out after it was sent always probes.
        probe_timeout_s: seconds an idle probe may take (> 0; default 600, the
            SDK's default read timeout); then, or after an error answer, the slot is
            released at the orphan's estimated end (docs/openai_sjf.md "Orphaned calls").
        fairness: fair shares across tenants (:mod:`sjf_core.policy._tenants`): "key"
            (default: the client's API key, hashed), "user" (the request's ``user``
            field), "header:NAME", or "off".
        default_priority, default_deadline_s: priority band / deadline (s) of a
            request that sends none (``x-sjf-priority``, ``metadata.sjf_priority``, the
            body's ``priority``; ``x-sjf-deadline-s``). A bad value raises ValueError here;
            a bad value in a request is ignored.

    Supersede: a request with header ``x-sjf-supersede: KEY`` removes the queued request
    with the same key (same backend and tenant); that one raises ``openai.ConflictError``
    (HTTP 409) at once and never reaches the backend. Our ``x-sjf-*`` headers are
    removed before a request is sent.

    Sharing: clients of the same ``base_url`` in one process share one queue;
    the first wrap of a base URL sets its options and later different options
    are ignored with a ``RuntimeWarning`` (see :mod:`openai_sjf._registry`).
    Wrapping an already wrapped client replaces its admission settings
    (no double admission).

    Returns:
        A new client of ``type(client)`` (``client.with_options(http_client=...)``);
        ``client`` itself is not modified.

    Raises:
        TypeError: ``client`` is not an async OpenAI client on an ``httpx``/``httpx2`` ``AsyncClient``.
        ValueError: bad options (``slots`` < 1, unknown policy, bad τ, unknown
            ``on_close``, ``probe_timeout_s`` <= 0, or ``scheduler`` together with
            other options).
    """
    if on_close not in ON_CLOSE:
        raise ValueError(f"on_close must be one of {ON_CLOSE}, got {on_close!r}")
    if not isinstance(probe_timeout_s, (int, float)) or isinstance(probe_timeout_s, bool) \
            or not probe_timeout_s > 0:
        raise ValueError(f"probe_timeout_s must be a number > 0, got {probe_timeout_s!r}")
    http = getattr(client, "_client", None)
    lib = lib_of_client(http)
    if not callable(getattr(client, "with_options", None)) or lib is None:
        raise TypeError(
            "openai_sjf.wrap expects an openai.AsyncOpenAI client using an httpx.AsyncClient or an "
            f"httpx2.AsyncClient, got {type(client).__name__} on {type(http).__name__}"
        )
    if scheduler is not None:
        if any(v is not None for v in (slots, policy, tau, predictor, fairness, default_priority,
                                       default_deadline_s)):
            raise ValueError("pass either scheduler= or slots/policy/tau/predictor/fairness/defaults, not both")
        sched = scheduler
    else:
        sched = scheduler_for(client.base_url, slots=slots, policy=policy, tau=tau, predictor=predictor,
                              fairness=fairness, default_priority=default_priority,
                              default_deadline_s=default_deadline_s)
    start_metrics(getattr(sched, "config", None))  # SJF_METRICS_PORT: the explicit start, once per process
    arrivals = ArrivalMemory()

    cls = SJFTransport.for_library(lib)
    try:  # the client's default headers (e.g. a gateway key) go with an idle probe, as credentials do
        header_names = tuple(str(k) for k in client.default_headers)
    except Exception:
        header_names = ()

    def make(inner):
        return cls(inner, sched, retry_rejected=retry_rejected, arrivals=arrivals, on_close=on_close,
                   probe_timeout_s=probe_timeout_s, probe_header_names=header_names)

    return client.with_options(http_client=_wrapped_http_client(http, lib, make))


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
