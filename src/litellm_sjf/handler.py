"""The LiteLLM proxy callback: predictive SJF admission per serial backend.

Contract: :class:`SJFHandler`'s hooks never raise into LiteLLM but for the deliberate
refusals (HTTP 429 with ``Retry-After`` from overload control, HTTP 409 for a request
superseded while queued) and a queued waiter's ``CancelledError``; an internal fault lets
the request through, counted in ``status()["counters"]["fail_open"]``. Every admitted slot
is released exactly once. The request sent on is unchanged but for LiteLLM's ``priority``
field, which the plugin consumes. Construction is cheap and has no side effects;
:meth:`SJFHandler.start` (run when LiteLLM loads ``litellm_sjf.proxy_handler_instance``)
starts the status server, the start-up checks and the scheduler's preload.

The class only carries the hooks (LiteLLM finds them in ``vars(cls)`` only); each one
delegates at once:

* ``async_pre_call_hook``, ``async_pre_call_deployment_hook`` → :mod:`litellm_sjf._admit`
  (score and remember; queue and wait for a slot);
* ``async_filter_deployments`` → :mod:`litellm_sjf._pool_routing` (a group of several serial
  backends: wait in its pool, then keep only the deployment whose backend was handed over);
* ``async_post_call_success_hook`` → :mod:`litellm_sjf._calls` (release, ``usage`` tokens);
* ``async_post_call_streaming_iterator_hook`` → :mod:`litellm_sjf._stream_pump`;
* ``async_post_call_failure_deployment_hook``, ``async_post_call_failure_hook``,
  ``async_log_success_event``, ``async_log_failure_event`` → :mod:`litellm_sjf._orphans`;
* every body under :func:`litellm_sjf._fail_open.fail_open`; counters in
  :class:`litellm_sjf._stats.HandlerStats`; status in :mod:`litellm_sjf._status`.

The request's path in full: ``docs/litellm.md``.
"""

from __future__ import annotations

import asyncio
import threading

from litellm.integrations.custom_logger import CustomLogger

from sjf_core import Scheduler

from ._admit import ENDPOINTS, Admission
from ._build import LazyScheduler
from ._calls import CallRegistry, usage_tokens
from ._fail_open import REFUSALS, fail_open
from ._labels import OpsLabels
from ._orphans import OrphanPolicy
from ._pool_routing import PoolRouting
from ._recorder import OpsRecorder
from ._routes import mount_status_routes
from ._stats import HandlerStats, TokenRates
from ._stream_pump import StreamPump, backend_answered, passthrough, quiet_superseded_log, refusal_http_error
from .settings import PluginSettings, load_settings
from ._startup import check_redis_in_background, log_startup_line, run_startup_checks
from ._status import handler_status, live_status, start_status_server

__all__ = ["SJFHandler", "ENDPOINTS"]


class SJFHandler(CustomLogger):
    """LiteLLM ``CustomLogger`` that admits requests in predicted SJF order per backend.

    Args:
        settings: :class:`~litellm_sjf.settings.PluginSettings` (default: read from the
            environment now; ValueError on bad settings, see :mod:`litellm_sjf.settings`).
        scheduler: a ready :class:`sjf_core.Scheduler` (default: built from settings
            on first use, or by :meth:`start`'s preload).

    Every hook LiteLLM must discover is defined on this class itself (LiteLLM skips
    inherited hooks silently, DESIGN.md).
    """

    def __init__(self, settings: PluginSettings | None = None, scheduler: Scheduler | None = None):
        super().__init__()
        self.settings = settings or load_settings()
        #: recent completions and the ranking accuracy over time (the operator's view)
        self.recorder = OpsRecorder()
        #: model names per backend and pool, labels per tenant (the operator's view)
        self.labels = OpsLabels()
        self.recorder.model_of = self.labels.group_of
        #: the proxy's event loop, once known (the status port computes the status there)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._sched = LazyScheduler(self.settings, scheduler, on_build=self._listen)
        self.stats = HandlerStats()
        self.rates = TokenRates()
        self._calls = CallRegistry(self.stats, self.rates)
        self._admission = Admission(self.settings, self._sched.get, self._calls, self.stats, self.labels)
        self._orphans = OrphanPolicy(self.settings, self._calls, self.stats)
        self._pool = PoolRouting(self.settings, self._admission, self._calls, self.stats)
        self._pump = StreamPump(self.settings, self._calls, self.stats, self._orphans)
        self._status_server = None
        self._started = False
        self._start_lock = threading.Lock()

    def start(self) -> None:
        """Proxy start-up, once (idempotent): ``/sjf/status`` and ``/sjf/`` on the proxy's
        own port (:mod:`litellm_sjf._routes`), LiteLLM's log of a superseded request (409)
        at INFO, not ERROR (:func:`~litellm_sjf._stream_pump.quiet_superseded_log`), the
        status server (``status_port``), the
        start-up checks' warnings, a background PING of a configured Redis store, and the scheduler's build and model load in a daemon
        thread (not when ``disabled``). Never raises for a busy port or a failed preload."""
        with self._start_lock:
            if self._started:
                return
            self._started = True
        self._note_loop()
        on_proxy = mount_status_routes(self)
        quiet_superseded_log()
        if self.settings.status_port is not None:
            self._status_server = start_status_server(self, self.settings.status_port)
        log_startup_line(self.settings, on_proxy)
        run_startup_checks(self.settings)
        check_redis_in_background(self.settings)
        if not self.settings.disabled:
            self._sched.preload_in_background()

    def _listen(self, scheduler: Scheduler) -> None:
        """The scheduler was built: feed the operator's view from its queues' events."""
        memory = getattr(scheduler, "memory", None)
        self.recorder._accuracy = None if memory is None else memory.online_accuracy
        scheduler.extend(listener=self.recorder)

    def _note_loop(self) -> None:
        if self.loop is None:
            try:
                self.loop = asyncio.get_running_loop()
            except RuntimeError:  # not on a loop (yet): the first hook notes it
                pass

    @property
    def scheduler(self) -> Scheduler:
        """The scheduler (built on first use from the settings)."""
        return self._sched.get()

    @property
    def counters(self) -> dict[str, int]:
        """``status()["counters"]``: a read-only copy of :attr:`stats`."""
        return self.stats.as_dict()

    # ---- hooks: admission ---------------------------------------------------------------
    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
        """Score the request and remember it; never waits; removes only LiteLLM's
        ``priority`` field from ``data`` (ours now)."""
        if self.loop is None:
            self._note_loop()
        self._admission.remember(data, call_type, user_api_key_dict)
        return None

    async def async_pre_call_deployment_hook(self, kwargs, call_type):
        """Wait for a slot on the chosen deployment's backend. Returns None (no change)."""
        try:
            await self._admission.admit(kwargs, call_type)
        except REFUSALS as exc:
            raise refusal_http_error(exc) from None
        return None

    async def async_filter_deployments(self, model, healthy_deployments, messages, request_kwargs=None,
                                       parent_otel_span=None):
        """Routing (before LiteLLM's strategy picks): a group of several serial backends waits
        in its pool and keeps only the deployments of the backend handed over; anything
        else is returned unchanged."""
        try:
            return await self._pool.filter(model, healthy_deployments, messages, request_kwargs)
        except REFUSALS as exc:
            raise refusal_http_error(exc) from None

    # ---- hooks: release -----------------------------------------------------------------
    async def async_post_call_success_hook(self, data, user_api_key_dict, response):
        """Non-streaming success: release with the answer tokens from ``usage``."""
        with fail_open(self.stats, "litellm_sjf success hook failed"):
            call = self._calls.find(data)
            if call is not None and not call.stream and not call.draining:
                self._calls.release(call, usage_tokens(response), "success")
        return None

    async def async_post_call_failure_deployment_hook(self, request_data, exception, call_type, fallback_depth=None):
        """A deployment attempt failed (in the request's own task, before the proxy's
        failure hook): release now, or after an idle probe if the backend may still be
        generating. The call stays known: a retry or a fallback queues again."""
        call = None
        with fail_open(self.stats, "litellm_sjf deployment failure hook failed"):
            call = self._calls.find(request_data)
        self._pool.attempt_failed(call, exception)
        self._orphans.attempt_failed(call, backend_answered(exception))
        return None

    async def async_post_call_failure_hook(self, request_data, original_exception, user_api_key_dict,
                                           traceback_str=None):
        """Any failure (backend error, 499 disconnect, pre-call rejection): release (a
        client that left a running non-streamed answer: after an idle probe)."""
        call = None
        with fail_open(self.stats, "litellm_sjf failure hook failed"):
            call = self._calls.find(request_data)
        self._orphans.request_failed(call, original_exception)
        return None

    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        """Backup release (runs later, on a background worker)."""
        self._orphans.backup(kwargs, response_obj, end_time, forget=True)

    async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):
        """Backup release of a failed attempt (runs later, on a background worker). The
        call is remembered: a fallback may re-run it, and must queue again."""
        self._orphans.backup(kwargs, None, end_time, forget=False)

    # ---- hooks: streaming ---------------------------------------------------------------
    async def async_post_call_streaming_iterator_hook(self, user_api_key_dict, response, request_data):
        """Pass the stream through; hold the slot until it ends or aborts (a stream we
        did not admit — fail-open, an expired lease — passes through untouched)."""
        call = None
        with fail_open(self.stats, "litellm_sjf streaming hook failed; the stream passes through"):
            found = self._calls.find(request_data)
            call = found if found is not None and found.running else None
        relay = passthrough(response) if call is None else self._pump.relay(call, response)
        try:
            async for item in relay:
                yield item
        finally:
            await relay.aclose()  # run the relay's release path now, not at garbage collection

    # ---- introspection ------------------------------------------------------------------
    def status(self) -> dict:
        """Read-only state: per-backend queues and the plugin's counters (no prompt text);
        the shape: :func:`litellm_sjf._status.handler_status`."""
        return handler_status(self._sched.peek(), self._calls, self.stats, self.rates, self.settings)

    async def live_status(self) -> dict:
        """:meth:`status` plus each queue's waiters and runners, recent completions and the
        ranking accuracy over time (no prompt text): :func:`litellm_sjf._status.live_status`.
        Await it on the proxy's loop."""
        return await live_status(self)
