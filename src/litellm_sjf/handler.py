"""The LiteLLM proxy callback: predictive SJF admission per serial backend.

How a request flows (DESIGN.md "LiteLLM facts"):

1. ``async_pre_call_hook`` (the request's own task): score the prompt (cheap, one
   ONNX call) and remember the prediction and arrival time under the request's
   ``litellm_call_id``. Nothing waits here, so no slot is taken before the
   deployment is known.
2. ``async_pre_call_deployment_hook`` (after the router picked a deployment, once per
   attempt): take a ticket on the queue of that deployment's ``api_base`` and wait
   for a slot. With ``general_settings.cancel_on_disconnect: true`` a client that
   leaves while waiting cancels this wait at once: the ticket leaves the queue and
   the request never reaches the backend (invariant 7).
3. Release, exactly once, on whichever path ends the request:

   =============================  ==================================================
   path                           where the slot is released
   =============================  ==================================================
   non-streaming success          ``async_post_call_success_hook`` (answer tokens
                                  from ``usage`` feed τ)
   streaming                      the stream pump's ``finally`` (see below)
   failure, 499, backend error    ``async_post_call_failure_hook``
   anything missed                ``async_log_success_event`` /
                                  ``async_log_failure_event`` (backup), then the
                                  ticket lease (``lease_ttl_s``) as a safety net
   =============================  ==================================================

   Release is idempotent (tickets), de-duplicated by ``litellm_call_id`` and by the
   identity of the request's ``proxy_server_request`` (a client may set its own
   call id). A retry of the same call on the same backend keeps its slot; a re-run
   on another backend (fallback) hands the old slot back first.

**Keeping "slot free" equal to "backend free" after a client disconnect.** Some
backends stop generating when their client goes away; others (llama-cpp-python's
server) keep generating the orphaned answer, so the next request would queue inside
the backend behind it. Per backend, ``on_disconnect`` chooses:

* ``"drain"`` (default, paper §3.4): a streamed answer is read to its end in a
  background task (LiteLLM's close of the upstream stream is deferred until then),
  and only then is the slot released. A non-streamed answer cannot be drained —
  LiteLLM cancels its upstream call — so the slot is held for the estimated rest of
  the generation (predicted tokens at the backend's measured tokens/s, minus the
  time already spent; at most ``orphan_hold_max_s``; at least ``orphan_grace_s``,
  the time a backend that does stop needs to notice the disconnect).
* ``"release"``: release at the disconnect. Right for backends that stop
  generating when the connection closes (Ollama, llama.cpp's server).

**Fail-open** (invariant 5). A plugin fault never fails a request: a hook that
raises internally lets the request through (without a slot if need be), counted in
``status()["counters"]["fail_open"]`` and logged without prompt text. Calls that
cannot be scored (embeddings, images, audio, unknown shapes) pass through untouched.
The plugin never modifies the request sent to the backend. The one deliberate
refusal is overload control: :class:`sjf_core.errors.AdmissionRejected` becomes HTTP
429 with a ``Retry-After`` header.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from typing import Any, Mapping

from litellm.integrations.custom_logger import CustomLogger

from sjf_core.errors import AdmissionRejected
from sjf_core.scheduler import Scheduler, backend_key

from .settings import PluginSettings, load_settings

log = logging.getLogger("litellm_sjf")

#: LiteLLM call types the plugin schedules, and the endpoint whose text it scores.
ENDPOINTS = {
    "completion": "chat/completions", "acompletion": "chat/completions",
    "text_completion": "completions", "atext_completion": "completions",
    "responses": "responses", "aresponses": "responses",
}
_META_KEYS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "metadata", "litellm_metadata")
_STALE_S = 900.0  # an unadmitted call record older than this is forgotten
_END = object()


class _Err:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException):
        self.exc = exc


class _Call:
    """What the plugin remembers about one request (no prompt text)."""

    __slots__ = ("cid", "psr_id", "endpoint", "prediction", "arrival", "created", "meta_body", "headers", "stream",
                 "ticket", "backend", "acquired_wall", "draining", "done", "released_at")

    def __init__(self, cid, psr_id, endpoint, prediction, meta_body, headers, stream):
        self.cid = cid
        self.psr_id = psr_id
        self.endpoint = endpoint
        self.prediction = prediction
        self.arrival = time.monotonic()
        self.created = self.arrival
        self.meta_body = meta_body
        self.headers = headers
        self.stream = stream
        self.ticket = None
        self.backend = None
        self.acquired_wall = None
        self.draining = False
        self.done = False
        self.released_at = None


def _call_type_name(call_type: Any) -> str:
    return str(getattr(call_type, "value", call_type) or "")


def _usage_tokens(obj: Any) -> int | None:
    """Answer tokens from a response or chunk's ``usage`` (completion or output tokens)."""
    usage = getattr(obj, "usage", None)
    if usage is None and isinstance(obj, Mapping):
        usage = obj.get("usage")
    if usage is None:
        resp = getattr(obj, "response", None)  # responses API stream events
        usage = getattr(resp, "usage", None) if resp is not None else None
    if usage is None:
        return None
    for name in ("completion_tokens", "output_tokens"):
        v = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
    return None


def _log_fault(what: str) -> None:
    """Log an internal fault without the exception's message or locals (they could carry
    prompt text, DESIGN.md invariant 6): the exception type and where it was raised."""
    import sys
    import traceback

    exc = sys.exc_info()[1]
    where = ""
    if exc is not None and exc.__traceback__ is not None:
        fr = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" at {fr.filename.rsplit('/', 1)[-1]}:{fr.lineno}"
    log.error("%s (%s%s)", what, type(exc).__name__ if exc else "?", where)


def _defer_aclose(response: Any, replacement) -> tuple | None:
    """Make LiteLLM's close of the upstream stream call ``replacement`` instead.

    On client disconnect the proxy calls ``aclose()`` on the stream it handed to the
    iterator hook; we receive it wrapped in a slotted boundary object that forwards
    attributes to ``_source``. Shadow ``aclose`` on the first object that takes an
    instance attribute (measured on litellm 1.106.12). Returns ``(obj, had_own)`` to
    undo it, or None when the stream cannot be patched (then no drain).
    """
    obj = response
    for _ in range(4):
        if obj is None or not hasattr(obj, "aclose"):
            return None
        try:
            had_own = "aclose" in object.__getattribute__(obj, "__dict__")
        except AttributeError:
            had_own = None
        if had_own is not None:
            if had_own:
                return None
            try:
                object.__setattr__(obj, "aclose", replacement)
                return (obj, had_own)
            except (AttributeError, TypeError):
                return None
        try:
            obj = object.__getattribute__(obj, "_source")
        except AttributeError:
            return None
    return None


def _undo_defer(closer: tuple | None) -> None:
    if closer is not None:
        try:
            object.__delattr__(closer[0], "aclose")
        except AttributeError:
            pass


async def _restore_aclose(closer: tuple | None) -> None:
    """Undo :func:`_defer_aclose` and close the stream for real."""
    if closer is None:
        return
    _undo_defer(closer)
    await closer[0].aclose()


class SJFHandler(CustomLogger):
    """LiteLLM ``CustomLogger`` that admits requests in predicted SJF order per backend.

    Args:
        settings: :class:`~litellm_sjf.settings.PluginSettings` (default: read from the
            environment, see :mod:`litellm_sjf.settings`).
        scheduler: a ready :class:`sjf_core.Scheduler` (default: built from settings,
            lazily, on first use).

    Every hook LiteLLM must discover is defined on this class itself (LiteLLM skips
    inherited hooks silently, DESIGN.md).
    """

    def __init__(self, settings: PluginSettings | None = None, scheduler: Scheduler | None = None):
        super().__init__()
        self.settings = settings or load_settings()
        self._scheduler = scheduler
        self._sched_lock = threading.Lock()
        self._calls: dict[str, list[_Call]] = {}
        self._by_psr: dict[int, _Call] = {}  # id(proxy_server_request) -> live call
        self._tasks: set[asyncio.Task] = set()
        self._rates: dict[str, float] = {}  # backend -> EWMA answer tokens/s
        self._last_prune = time.monotonic()
        self.counters = dict.fromkeys((
            "scored", "unscored", "passthrough", "admitted", "rejected_429", "cancelled_queued",
            "released_success", "released_stream", "released_failure", "released_backup", "released_rerun",
            "drained", "drain_aborted", "drain_unavailable", "orphan_holds", "fail_open", "duplicate_call_ids"), 0)
        self._status_server = None
        if self.settings.status_port is not None:
            from .status import start_status_server

            self._status_server = start_status_server(self, self.settings.status_port)

    # ---- scheduler ----------------------------------------------------------------------
    @property
    def scheduler(self) -> Scheduler:
        """The scheduler (built on first use from the settings)."""
        if self._scheduler is None:
            with self._sched_lock:
                if self._scheduler is None:
                    self._scheduler = self._build_scheduler()
        return self._scheduler

    def _build_scheduler(self) -> Scheduler:
        s = self.settings
        if s.scheduler_factory:
            import importlib

            mod, _, attr = s.scheduler_factory.partition(":")
            factory = getattr(importlib.import_module(mod), attr or "make_scheduler")
            return factory()
        opts = s.policy_options()
        return Scheduler(predictor=s.predictor, policy=s.policy, tau=opts.pop("tau"), slots=s.slots,
                         backend_slots=s.backend_slots, lease_ttl_s=s.lease_ttl_s, policy_options=opts,
                         overload=s.overload, backend_overload=s.backend_overload or None,
                         rate_limit=s.rate_limit, backend_rate_limits=s.backend_rate_limits or None,
                         redis_url=s.redis_url, redis_options=s.redis or None)

    # ---- call records -------------------------------------------------------------------
    def _find(self, data: Any) -> _Call | None:
        if not isinstance(data, Mapping):
            return None
        cid = data.get("litellm_call_id")
        calls = self._calls.get(cid) if isinstance(cid, str) else None
        if not calls:
            return None
        psr_id = id(data.get("proxy_server_request"))
        for c in calls:
            if c.psr_id == psr_id:
                return c
        return calls[0] if len(calls) == 1 else None

    def _forget(self, call: _Call) -> None:
        call.done = True
        if self._by_psr.get(call.psr_id) is call:
            del self._by_psr[call.psr_id]
        calls = self._calls.get(call.cid)
        if calls is not None:
            try:
                calls.remove(call)
            except ValueError:
                pass
            if not calls:
                self._calls.pop(call.cid, None)

    def _release(self, call: _Call, answer_tokens: int | None, reason: str, forget: bool = True) -> bool:
        """Release the call's slot (idempotent); forget the call unless ``forget`` is False
        (an attempt ended but the request may be re-run, e.g. on a fallback deployment).
        Returns True if a slot was freed."""
        t = call.ticket
        freed = False
        if t is not None:
            was_running = t.state == "running"
            try:
                freed = bool(t.release(answer_tokens))
            except Exception:
                self.counters["fail_open"] += 1
                _log_fault("ticket release failed; the lease will free the slot")
            if freed and was_running:
                self.counters["released_" + reason] += 1
                self._observe_rate(call, answer_tokens)
        call.released_at = time.monotonic()
        if forget:
            self._forget(call)
        return freed

    def _observe_rate(self, call: _Call, answer_tokens: int | None) -> None:
        t = call.ticket
        if not answer_tokens or t is None or call.backend is None:
            return
        service_s = time.monotonic() - t.entry.dispatched_at
        if not (service_s > 0.05) or not math.isfinite(service_s):
            return
        rate = answer_tokens / service_s
        old = self._rates.get(call.backend)
        self._rates[call.backend] = rate if old is None else old + 0.2 * (rate - old)

    def _prune(self) -> None:
        now = time.monotonic()
        if now - self._last_prune < 30:
            return
        self._last_prune = now
        for calls in list(self._calls.values()):
            for c in list(calls):
                t = c.ticket
                stale = t is None and now - c.created > _STALE_S
                finished = (t is not None and t.state in ("released", "cancelled") and not c.draining
                            and now - (c.released_at or c.created) > 60)
                if stale or finished:
                    self._forget(c)

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- hooks: admission ---------------------------------------------------------------
    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
        """Score the request and remember it; never waits, never modifies ``data``."""
        try:
            if self.settings.disabled:
                return None
            endpoint = ENDPOINTS.get(_call_type_name(call_type))
            if endpoint is None or not isinstance(data, dict):
                self.counters["passthrough"] += 1
                return None
            cid = data.get("litellm_call_id")
            if not isinstance(cid, str) or not cid:
                self.counters["passthrough"] += 1
                return None
            self._prune()
            psr = data.get("proxy_server_request")
            psr_id = id(psr)
            # A re-run of the same HTTP request (fallback) under a new call id: the old
            # attempt is over, hand its slot back.
            old = self._by_psr.get(psr_id) if psr is not None else None
            if old is not None and old.cid != cid and not old.draining:
                self._release(old, None, "rerun")
            prediction = self.scheduler.predict(data, endpoint)
            self.counters["scored" if prediction is not None else "unscored"] += 1
            headers = psr.get("headers") if isinstance(psr, Mapping) else None
            meta_body = {k: data[k] for k in _META_KEYS if k in data}
            call = _Call(cid, psr_id, endpoint, prediction, meta_body,
                         dict(headers) if isinstance(headers, Mapping) else None, bool(data.get("stream")))
            calls = self._calls.setdefault(cid, [])
            if calls:
                self.counters["duplicate_call_ids"] += 1
            calls.append(call)
            if psr is not None:
                self._by_psr[psr_id] = call
        except Exception:
            self.counters["fail_open"] += 1
            _log_fault("litellm_sjf pre-call hook failed; request passes unscheduled")
        return None

    async def async_pre_call_deployment_hook(self, kwargs, call_type):
        """Wait for a slot on the chosen deployment's backend. Returns None (no change)."""
        try:
            call = self._find(kwargs)
            if call is None or call.done:
                return None
            backend = backend_key(kwargs.get("api_base") or f"model:{kwargs.get('model')}")
            t = call.ticket
            if t is not None:
                if t.state == "running" and call.backend == backend:
                    t.renew()  # a retry of this call on the same backend keeps its slot
                    call.acquired_wall = time.time()  # backup events of the failed attempt must not release it
                    return None
                if t.state in ("new", "queued"):
                    return None
                if t.state == "running":
                    t.release(None)  # re-run on another backend: hand the old slot back
                    self.counters["released_rerun"] += 1
            ticket = self.scheduler.ticket(backend, call.meta_body, call.endpoint, call.headers,
                                           arrival=call.arrival, prediction=call.prediction)
            call.ticket = ticket
            call.backend = backend
        except AdmissionRejected as exc:
            raise self._reject(exc, call)
        except Exception:
            self.counters["fail_open"] += 1
            _log_fault("litellm_sjf could not queue a request; it passes unscheduled")
            return None
        try:
            await ticket.acquire()
        except asyncio.CancelledError:
            self.counters["cancelled_queued"] += 1
            self._forget(call)
            raise
        except AdmissionRejected as exc:
            raise self._reject(exc, call)
        except Exception:
            self.counters["fail_open"] += 1
            _log_fault("litellm_sjf admission failed; request passes unscheduled")
            return None
        self.counters["admitted"] += 1
        call.acquired_wall = time.time()
        return None

    def _reject(self, exc: AdmissionRejected, call: _Call | None):
        from fastapi import HTTPException

        self.counters["rejected_429"] += 1
        if call is not None:
            self._release(call, None, "failure")
        retry = max(1, int(math.ceil(exc.retry_after_s)))
        return HTTPException(status_code=429, detail=f"SJF admission rejected: {exc.reason}; retry after {retry} s",
                             headers={"Retry-After": str(retry)})

    # ---- hooks: release -----------------------------------------------------------------
    async def async_post_call_success_hook(self, data, user_api_key_dict, response):
        """Non-streaming success: release with the answer tokens from ``usage``."""
        try:
            call = self._find(data)
            if call is not None and not call.stream and not call.draining:
                self._release(call, _usage_tokens(response), "success")
        except Exception:
            self.counters["fail_open"] += 1
            _log_fault("litellm_sjf success hook failed")
        return None

    async def async_post_call_failure_hook(self, request_data, original_exception, user_api_key_dict,
                                           traceback_str=None):
        """Any failure (backend error, 499 disconnect, pre-call rejection): release."""
        try:
            call = self._find(request_data)
            if call is not None and not call.draining:
                if self._client_left_mid_answer(call, original_exception):
                    self._hold_orphan(call)
                else:
                    self._release(call, None, "failure")
        except Exception:
            self.counters["fail_open"] += 1
            _log_fault("litellm_sjf failure hook failed")
        return None

    def _client_left_mid_answer(self, call: _Call, exc: Any) -> bool:
        """True when ``exc`` is LiteLLM's 499 (client disconnected) for a non-streamed
        call running on a ``drain`` backend: the backend may still be generating."""
        t = call.ticket
        return (getattr(exc, "status_code", None) == 499 and t is not None and t.state == "running"
                and not call.stream and self.settings.on_disconnect_for(call.backend) == "drain")

    def _hold_orphan(self, call: _Call) -> None:
        """A non-streamed answer whose client left: LiteLLM cancelled the upstream call,
        but the backend may still be generating. Hold the slot for the estimated rest."""
        t = call.ticket
        rate = self._rates.get(call.backend)
        expected = call.prediction.expected_tokens if call.prediction is not None else None
        # at least a grace period: even a backend that stops on disconnect notices it a
        # moment later, and a request sent meanwhile would find it still busy
        hold = self.settings.orphan_grace_s
        if rate and expected:
            elapsed = time.monotonic() - t.entry.dispatched_at
            hold = max(hold, min(self.settings.orphan_hold_max_s, expected / rate - elapsed))
        if hold <= 0:
            self._release(call, None, "failure")
            return
        self.counters["orphan_holds"] += 1
        call.draining = True

        def _done():
            call.draining = False
            self._release(call, None, "failure")

        asyncio.get_running_loop().call_later(hold, _done)

    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        """Backup release (runs later, on a background worker)."""
        self._backup_release(kwargs, response_obj, end_time, forget=True)

    async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):
        """Backup release of a failed attempt (runs later, on a background worker). The
        call is remembered: a fallback may re-run it, and must queue again."""
        self._backup_release(kwargs, None, end_time, forget=False)

    def _backup_release(self, kwargs, response_obj, end_time, forget: bool) -> None:
        try:
            if not isinstance(kwargs, Mapping):
                return
            cid = kwargs.get("litellm_call_id")
            for call in list(self._calls.get(cid, ()) if isinstance(cid, str) else ()):
                t = call.ticket
                if call.draining or call.stream or t is None or t.state != "running" or call.acquired_wall is None:
                    continue
                # only the attempt this event reports on: a retry admitted after it ended is not touched
                end = end_time.timestamp() if hasattr(end_time, "timestamp") else None
                if end is not None and call.acquired_wall > end + 0.001:
                    continue
                # LiteLLM logs a client's disconnect (499) before it runs the failure hook
                if not forget and self._client_left_mid_answer(call, kwargs.get("exception")):
                    self._hold_orphan(call)
                    continue
                self._release(call, _usage_tokens(response_obj), "backup", forget=forget)
        except Exception:
            self.counters["fail_open"] += 1
            _log_fault("litellm_sjf backup release failed")

    # ---- hooks: streaming ---------------------------------------------------------------
    async def async_post_call_streaming_iterator_hook(self, user_api_key_dict, response, request_data):
        """Pass the stream through; hold the slot until it ends or aborts.

        The upstream stream is read by a pump task, so a client that disconnects
        cancels only this generator. In ``drain`` mode the pump then reads the
        backend's answer to its end before releasing (paper §3.4).
        """
        try:
            call = self._find(request_data)
            if call is not None and (call.ticket is None or call.ticket.state != "running"):
                call = None  # not admitted by us (fail-open or expired lease): pass through
        except Exception:
            self.counters["fail_open"] += 1
            call = None
        if call is None:
            async for item in response:
                yield item
            return
        call.stream = True
        queue: asyncio.Queue = asyncio.Queue()
        drain = self.settings.on_disconnect_for(call.backend) == "drain"
        closer = None  # (object LiteLLM will close, its real aclose) while we may drain
        close_requested = asyncio.Event()
        pump: asyncio.Task | None = None
        if drain:

            async def deferred_aclose():
                # LiteLLM closes the upstream stream when the client leaves. While the
                # answer is still coming, the pump drains it and closes it at the end.
                if pump is not None and not pump.done():
                    if not call.draining:
                        call.draining = True
                        self.counters["drained"] += 1
                    close_requested.set()
                    return
                await _restore_aclose(closer)

            closer = _defer_aclose(response, deferred_aclose)
            if closer is None:  # cannot keep LiteLLM from closing it: behave as "release"
                self.counters["drain_unavailable"] += 1
                drain = False
        pump = self._spawn(self._pump(call, response, queue, closer, close_requested))
        finished = False
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    finished = True
                    break
                if isinstance(item, _Err):
                    finished = True
                    raise item.exc
                yield item
        finally:
            if not finished and not pump.done():
                # the client went away mid-stream
                if drain:
                    if not call.draining:
                        call.draining = True
                        self.counters["drained"] += 1
                else:
                    pump.cancel()

    async def _pump(self, call: _Call, response, queue: asyncio.Queue, closer, close_requested) -> None:
        tokens = None
        chunks = 0
        ttl = self.settings.lease_ttl_s
        last_renew = time.monotonic()
        drain_started = None
        try:
            it = response.__aiter__()
            while True:
                try:
                    item = await it.__anext__()
                except StopAsyncIteration:
                    break
                chunks += 1
                n = _usage_tokens(item)
                if n is not None:
                    tokens = n
                now = time.monotonic()
                if now - last_renew > ttl / 4:
                    call.ticket.renew()
                    last_renew = now
                if call.draining:
                    drain_started = drain_started or now
                    if now - drain_started > self.settings.drain_max_s:
                        self.counters["drain_aborted"] += 1
                        break
                else:
                    queue.put_nowait(item)
            queue.put_nowait(_END)
        except asyncio.CancelledError:
            queue.put_nowait(_END)
            raise
        except BaseException as exc:  # upstream error: the consumer re-raises it for LiteLLM
            queue.put_nowait(_Err(exc))
        finally:
            try:
                if closer is not None:
                    if close_requested.is_set():
                        await _restore_aclose(closer)
                    else:
                        _undo_defer(closer)
            except Exception:
                log.debug("closing a drained stream failed", exc_info=True)
            call.draining = False
            self._release(call, tokens, "stream")

    # ---- introspection ------------------------------------------------------------------
    def status(self) -> dict:
        """Read-only state: per-backend queues and the plugin's counters (no prompt text).

        ``{"backends": {URL: {"slots", "in_flight", "waiting", "tau_s", "stats": {...}}},
        "tracked_calls": int, "draining": int, "tokens_per_s": {URL: float}, "counters": {...},
        "memory": {...}}`` (``memory``: the length memory's evidence counters and online
        ranking accuracy, :meth:`sjf_core.memory.LengthMemory.status`)
        """
        backends = {}
        sched = self._scheduler
        if sched is not None:
            for key, q in list(sched.queues.items()):
                try:
                    stats = dict(vars(q.stats))
                except TypeError:
                    stats = {}
                tau = q.tau_s
                backends[key] = {"slots": q.slots, "in_flight": q.in_flight, "waiting": q.waiting,
                                 "tau_s": None if math.isinf(tau) else tau, "stats": stats}
        calls = [c for cs in list(self._calls.values()) for c in list(cs)]
        return {"backends": backends, "tracked_calls": len(calls), "draining": sum(1 for c in calls if c.draining),
                "tokens_per_s": dict(self._rates), "counters": dict(self.counters),
                "memory": sched.memory_status() if sched is not None else {"enabled": False},
                "settings": {"policy": self.settings.policy, "tau": str(self.settings.tau),
                             "promotion": self.settings.promotion, "slots": self.settings.slots,
                             "on_disconnect": self.settings.on_disconnect}}
