"""The LiteLLM proxy callback: predictive SJF admission per serial backend.

How a request flows (DESIGN.md "LiteLLM facts"):

1. ``async_pre_call_hook`` (the request's own task): score the prompt (cheap, one
   ONNX call) and remember the prediction and arrival time under the request's
   ``litellm_call_id``. Nothing waits here, so no slot is taken before the
   deployment is known.
2. ``async_pre_call_deployment_hook`` (after the router picked a deployment, once per
   attempt): take a ticket on the queue of that deployment's backend (its normalised
   ``api_base``, or the ``queue`` named for it) and wait for a slot. A request LiteLLM
   is certain to reject after this hook (:mod:`litellm_sjf.validate`) takes no ticket.
   With ``general_settings.cancel_on_disconnect: true`` a client that leaves while
   waiting cancels this wait at once: the ticket leaves the queue and the request never
   reaches the backend (invariant 7). ``slots: auto`` asks the backend its slots
   before its queue is made (:func:`litellm_sjf.deployment.backend_slots`).
3. Release, exactly once, on whichever path ends the request:

   =============================  ==================================================
   path                           where the slot is released
   =============================  ==================================================
   non-streaming success          ``async_post_call_success_hook`` (answer tokens
                                  from ``usage`` feed τ)
   streaming                      the stream pump's ``finally`` (see below)
   backend answered an error      ``async_post_call_failure_deployment_hook`` (in the
                                  request's task, at once)
   timeout, dropped connection    the same hook, after an idle probe (below)
   client left (499), other       ``async_post_call_failure_hook``
   anything missed                ``async_log_success_event`` /
                                  ``async_log_failure_event`` (backup), then the
                                  ticket lease (``lease_ttl_s``) as a safety net
   =============================  ==================================================

   Release is idempotent (tickets), de-duplicated by ``litellm_call_id`` and by the
   identity of the request's ``proxy_server_request`` (a client may set its own
   call id). A retry of the same call on the same backend keeps its slot; a re-run
   on another backend (fallback) hands the old slot back first.

**Keeping "slot free" equal to "backend free" after a client disconnect.** Some
backends stop generating when their client goes away; others keep generating the
orphaned answer (llama-cpp-python for non-streamed calls, Ollama until its next token),
so the next request would queue inside the backend behind it. Per backend,
``on_disconnect`` chooses:

* ``"probe"`` (default): keep the slot, let LiteLLM close the upstream call, and send
  the backend one tiny request of our own through the same deployment (same
  ``api_base`` and credentials, 1 answer token; :mod:`sjf_core.admission._probe`, at most
  one in flight per backend). A FIFO backend answers it only once the orphan is over,
  whether it stopped at the disconnect or generated to the end; the slot is released
  when the probe returns. A probe that fails or takes longer than ``probe_timeout_s``
  leaves the slot to its lease (``lease_ttl_s``). The same for streams and non-streamed
  calls, so nobody needs to know how their backend behaves. Probes go out with httpx,
  not through LiteLLM: no hook (ours included) sees them.
* ``"drain"`` (paper §3.4): a streamed answer is read to its end in a background task
  (LiteLLM's close of the upstream stream is deferred until then), and only then is
  the slot released; a non-streamed one (LiteLLM cancels it) is probed.
* ``"release"``: release at the disconnect (an override for a backend known to stop
  at once).

**Fail-open** (invariant 5). A plugin fault never fails a request: a hook that
raises internally lets the request through (without a slot if need be), counted in
``status()["counters"]["fail_open"]`` and logged without prompt text. Calls that
cannot be scored (embeddings, images, audio, unknown shapes) pass through untouched.
The plugin never modifies the request sent to the backend, but for one field:
LiteLLM's ``priority`` is consumed (removed in the pre-call hook and used as a
strict priority band, litellm#7144; :mod:`litellm_sjf.tenancy`). Tenants (``fairness``)
and defaults: :mod:`sjf_core.policy._tenants`. A request superseded while queued
(``x-sjf-supersede``) gets HTTP 409 at once. The one other deliberate
refusal is overload control: :class:`sjf_core._errors.AdmissionRejected` becomes HTTP
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

from sjf_core.admission._probe import probe_gate, probe_stats
from sjf_core._errors import AdmissionRejected, Superseded
from sjf_core._scheduler import Scheduler, backend_key
from sjf_core.ext._metrics import start_metrics

from .deployment import backend_slots, probe_target
from .settings import AUTO, PluginSettings, load_settings
from .startup import run_startup_checks
from .tenancy import consume_intent, identity, superseded_error, tenant_status
from .validate import rejected_reason

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
                 "ticket", "backend", "acquired_wall", "draining", "done", "released_at", "probe", "orphaned",
                 "probe_task", "api_key", "team")

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
        self.probe = None  # ProbeTarget of the deployment it runs on
        self.orphaned = False  # a stream whose client left: the idle probe releases it
        self.probe_task = None
        self.api_key = None
        self.team = None


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


def _label(key: str) -> str:
    from sjf_core.ext._metrics import backend_label

    return backend_label(key)


def _backend_answered(exc: Any) -> bool:
    """True when a failed attempt got an HTTP error answer from the backend (so the
    backend is done with it); False for a timeout, a broken connection or anything
    unknown (the backend may still be generating)."""
    try:
        import litellm

        if isinstance(exc, (litellm.Timeout, litellm.APIConnectionError)):
            return False
    except Exception:
        return False
    code = getattr(exc, "status_code", None)
    return isinstance(code, int) and 400 <= code < 600 and code not in (408, 499)


async def _close_after(pump: asyncio.Task, response: Any) -> None:
    """Wait for a cancelled stream pump, then close the upstream stream (so a backend
    that stops on disconnect sees it before the idle probe queues behind it)."""
    await asyncio.wait({pump})
    close = getattr(response, "aclose", None)
    if close is not None:
        await close()


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
            "released_probe", "drained", "drain_aborted", "drain_unavailable", "orphan_probes", "probe_failed",
            "probe_unavailable", "rejected_early", "fail_open", "duplicate_call_ids",
            "superseded_409"), 0)
        self._auto_slots: dict[str, asyncio.Future] = {}
        self._drain_warned: set[str] = set()
        self._status_server = None
        if self.settings.status_port is not None:
            from .status import start_status_server

            self._status_server = start_status_server(self, self.settings.status_port)
        run_startup_checks(self.settings)
        if not self.settings.disabled:
            # build the scheduler and load the model now, off the event loop: the first
            # request that has to wait (a burst on a fresh proxy) must not pay for it
            threading.Thread(target=self._preload, name="sjf-preload", daemon=True).start()

    def _preload(self) -> None:
        try:
            self.scheduler.preload()
        except Exception:  # fail-open: the scheduler is built again on first use
            log.debug("litellm_sjf: preload failed; the scheduler is built on first use", exc_info=True)

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
            sched = getattr(importlib.import_module(mod), attr or "make_scheduler")()
        else:
            sched = Scheduler(s.scheduler_config())  # "auto" slots: asked per backend on first use
        start_metrics(s.config)  # SJF_METRICS_PORT: the explicit start (never by building a Scheduler)
        return sched

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
            was_running = t.running
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
        """Score the request and remember it; never waits; removes only LiteLLM's
        ``priority`` field from ``data`` (ours now)."""
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
            consume_intent(data, meta_body)  # LiteLLM's `priority` is ours, never forwarded
            call = _Call(cid, psr_id, endpoint, prediction, meta_body,
                         dict(headers) if isinstance(headers, Mapping) else None, bool(data.get("stream")))
            call.api_key, call.team = identity(user_api_key_dict)
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
            if call.probe_task is not None and not call.probe_task.done():
                await asyncio.shield(call.probe_task)  # a retry after a timeout waits until the backend is idle
            if rejected_reason(kwargs, call_type) is not None:
                # LiteLLM refuses it before it reaches the backend: no slot, no wait
                self.counters["rejected_early"] += 1
                self._release(call, None, "failure")
                return None
            api_base = kwargs.get("api_base")
            backend = self.settings.queue_key(api_base) if api_base else backend_key(f"model:{kwargs.get('model')}")
            call.probe = probe_target(kwargs)
            if self.settings.slots_for(backend) == AUTO and backend not in self.scheduler.backend_slots:
                await self._resolve_auto_slots(backend, call.probe)
            t = call.ticket
            if t is not None:
                if t.running and call.backend == backend:
                    t.renew()  # a retry of this call on the same backend keeps its slot
                    call.acquired_wall = time.time()  # backup events of the failed attempt must not release it
                    return None
                if t.state in ("new", "queued"):
                    return None
                if t.running:
                    t.release(None)  # re-run on another backend: hand the old slot back
                    self.counters["released_rerun"] += 1
            ticket = self.scheduler.ticket(backend, call.meta_body, call.endpoint, call.headers,
                                           arrival=call.arrival, prediction=call.prediction,
                                           api_key=call.api_key, team=call.team)
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
        except Superseded:
            self.counters["superseded_409"] += 1
            self._forget(call)
            raise superseded_error() from None
        except Exception:
            self.counters["fail_open"] += 1
            _log_fault("litellm_sjf admission failed; request passes unscheduled")
            return None
        self.counters["admitted"] += 1
        call.acquired_wall = time.time()
        return None

    async def _resolve_auto_slots(self, backend: str, target) -> None:
        """``slots: auto``: ask the backend once (concurrent first requests share the answer)."""
        fut = self._auto_slots.get(backend)
        if fut is None:
            fut = self._auto_slots[backend] = asyncio.get_running_loop().create_future()
            n, why = (await backend_slots(target)) if target is not None else (None, "the deployment has no api_base")
            label = _label(backend)
            if n is None:
                n = 1
                log.warning("litellm_sjf: slots: auto for %s: %s; using 1 slot", label, why)
            else:
                log.info("litellm_sjf: slots: auto for %s: %d (%s)", label, n, why)
            self.scheduler.set_slots(backend, n)
            fut.set_result(n)
        await asyncio.shield(fut)

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

    async def async_post_call_failure_deployment_hook(self, request_data, exception, call_type, fallback_depth=None):
        """A deployment attempt failed (in the request's own task, before the proxy's
        failure hook and the background logger). An error the backend answered frees the
        slot at once; a timeout or a broken connection (the backend may still be
        generating) frees it after an idle probe. The call stays known: a retry or a
        fallback queues again."""
        try:
            call = self._find(request_data)
            t = call.ticket if call is not None else None
            if call is None or call.draining or t is None or not t.running:
                return None
            if _backend_answered(exception):
                self._release(call, None, "failure", forget=False)
            else:
                self._probe_orphan(call, forget=False)
        except Exception:
            self.counters["fail_open"] += 1
            _log_fault("litellm_sjf deployment failure hook failed")
        return None

    async def async_post_call_failure_hook(self, request_data, original_exception, user_api_key_dict,
                                           traceback_str=None):
        """Any failure (backend error, 499 disconnect, pre-call rejection): release (a
        client that left a running non-streamed answer: after an idle probe)."""
        try:
            call = self._find(request_data)
            if call is not None and not call.draining:
                if self._client_left_mid_answer(call, original_exception):
                    self._probe_orphan(call)
                else:
                    self._release(call, None, "failure")
        except Exception:
            self.counters["fail_open"] += 1
            _log_fault("litellm_sjf failure hook failed")
        return None

    def _client_left_mid_answer(self, call: _Call, exc: Any) -> bool:
        """True when ``exc`` is LiteLLM's 499 (client disconnected) for a running
        non-streamed call: the backend may still be generating."""
        t = call.ticket
        return (getattr(exc, "status_code", None) == 499 and t is not None and t.running
                and not call.stream)

    def _probe_orphan(self, call: _Call, forget: bool = True, before=None) -> None:
        """Hold the slot of an answer nobody reads until the backend is idle: release
        when an idle probe returns (``on_disconnect: release``, or no ``api_base`` to
        probe: release now). ``before``: a coroutine to await first (a stream's close)."""
        t = call.ticket
        if t is None or not t.running:
            return
        if self.settings.on_disconnect_for(call.backend) == "release" or call.probe is None:
            if call.probe is None:
                self.counters["probe_unavailable"] += 1
            call.orphaned = False
            self._release(call, None, "failure", forget=forget)
            return
        self.counters["orphan_probes"] += 1
        call.draining = True
        call.probe_task = self._spawn(self._release_when_idle(call, forget, before))

    async def _release_when_idle(self, call: _Call, forget: bool, before) -> None:
        t = call.ticket
        ok = False
        try:
            if before is not None:
                try:
                    await asyncio.wait_for(before, 30)
                except BaseException:
                    log.debug("closing an orphaned stream failed", exc_info=True)
            timeout = self.settings.probe_timeout_s
            wait = asyncio.ensure_future(probe_gate(call.backend).wait_idle(call.probe.sender(timeout), timeout))
            every = max(0.05, self.settings.lease_ttl_s / 4)
            while not wait.done():
                await asyncio.wait({wait}, timeout=every)
                if not wait.done():
                    t.renew()  # the orphan may run longer than the lease
            ok = wait.result()
        except Exception:
            self.counters["fail_open"] += 1
            _log_fault("litellm_sjf idle probe failed")
        finally:
            call.draining = False
            call.orphaned = False
            if ok:
                self.counters["released_probe"] += 1
                self._release(call, None, "failure", forget=forget)
            else:
                # the backend's state is unknown: the slot stays taken until its lease
                # expires (lease_ttl_s), the safety net of every ticket
                self.counters["probe_failed"] += 1
                self._forget(call)

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
                if call.draining or call.stream or t is None or not t.running or call.acquired_wall is None:
                    continue
                # only the attempt this event reports on: a retry admitted after it ended is not touched
                end = end_time.timestamp() if hasattr(end_time, "timestamp") else None
                if end is not None and call.acquired_wall > end + 0.001:
                    continue
                # LiteLLM logs a client's disconnect (499) before it runs the failure hook
                if not forget and self._client_left_mid_answer(call, kwargs.get("exception")):
                    self._probe_orphan(call)
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
            if call is not None and (call.ticket is None or not call.ticket.running):
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
        mode = self.settings.on_disconnect_for(call.backend)
        drain = mode == "drain"
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
            if closer is None:  # cannot keep LiteLLM from closing it: probe instead
                self.counters["drain_unavailable"] += 1
                if call.backend not in self._drain_warned:
                    self._drain_warned.add(call.backend)
                    log.warning("litellm_sjf: the streams of backend %s cannot be drained (on_disconnect: drain); "
                                "orphaned streams are probed instead", _label(call.backend))
                drain, mode = False, "probe"
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
                elif mode == "probe" and call.probe is not None:
                    # the backend may go on generating for nobody: hold the slot until it is idle
                    call.orphaned = True
                    pump.cancel()
                    self._probe_orphan(call, before=_close_after(pump, response))
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
            if not call.orphaned:  # an orphaned stream is released by its idle probe
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
                try:
                    tenants = tenant_status(q)
                except Exception:
                    tenants = None
                if tenants is not None:
                    backends[key]["tenants"] = tenants
        calls = [c for cs in list(self._calls.values()) for c in list(cs)]
        probes = {k: v for k, v in probe_stats().items() if k in backends}
        return {"backends": backends, "tracked_calls": len(calls), "draining": sum(1 for c in calls if c.draining),
                "tokens_per_s": dict(self._rates), "counters": dict(self.counters), "probes": probes,
                "memory": sched.memory_status() if sched is not None else {"enabled": False},
                "settings": {"policy": self.settings.policy, "tau": str(self.settings.tau),
                             "promotion": self.settings.promotion, "slots": self.settings.slots,
                             "fairness": self.settings.fairness,
                             "on_disconnect": self.settings.on_disconnect,
                             "probe_timeout_s": self.settings.probe_timeout_s}}
