"""Admission: score a request in the pre-call hook, queue it for a slot after routing.

* :meth:`Admission.remember(data, call_type, user) <Admission.remember>` — pre-call hook:
  scores the prompt (one predictor call), records a :class:`~litellm_sjf._calls.Call`
  under ``data["litellm_call_id"]``; never waits. It removes LiteLLM's ``priority`` from
  ``data`` (ours, :func:`litellm_sjf._tenancy.consume_intent`) and changes nothing else.
  Call types we do not schedule and shapes without a call id pass through (counted).
* :meth:`Admission.admit(kwargs, call_type) <Admission.admit>` — deployment hook: takes a
  ticket on the chosen deployment's backend queue (normalised ``api_base``, or the named
  ``queue``) and waits for a slot. Raises only ``asyncio.CancelledError`` (the client left
  while queued: the ticket leaves the queue) and the deliberate refusals
  :data:`~litellm_sjf._fail_open.REFUSALS` (the call's slot released and forgotten first);
  any other fault of the queue (or of the pre-call hook) sends the request to the
  backend's last-resort gate (:mod:`sjf_core.admission._last_resort`: FIFO, the backend's
  slots, shared with the normal queue), never unscheduled.

A retry of the same call on the same backend keeps its slot; a re-run on another backend
(fallback) hands the old slot back first. A refused call stays refused: LiteLLM's router
retries a 409 or a 429 like a backend's (``num_retries``, 2 unless set), and a retry of a
call the plugin had forgotten would otherwise reach the backend unscheduled; it gets the
same refusal at once (kept for :data:`REFUSAL_MEMORY_S`). A request LiteLLM is certain to reject after
routing (:mod:`litellm_sjf._validate`) takes no ticket. ``slots: auto`` asks the backend
once, before its queue is made (:func:`litellm_sjf._deployment.backend_slots`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Mapping

from sjf_core import AdmissionRejected, LastResort, Superseded, backend_key, note_fault

from ._calls import Call, CallRegistry
from ._fail_open import REFUSALS, fail_open, log_fault
from ._stats import HandlerStats
from ._deployment import OLLAMA_PROVIDERS, backend_slots, probe_target, provider_and_model
from ._labels import OpsLabels, deployment_names, tenant_label
from .settings import AUTO
from ._tenancy import consume_intent, identity
from ._validate import rejected_reason

log = logging.getLogger("litellm_sjf")

#: LiteLLM call types the plugin schedules, and the endpoint whose text it scores.
ENDPOINTS = {
    "completion": "chat/completions", "acompletion": "chat/completions",
    "text_completion": "completions", "atext_completion": "completions",
    "responses": "responses", "aresponses": "responses",
    # an embedding call holds a slot of its model's runner (an Ollama box's embedding model)
    "embedding": "embeddings", "aembedding": "embeddings", "embeddings": "embeddings",
}
#: how long a refusal is repeated to the router's retries of the same call (seconds)
REFUSAL_MEMORY_S = 600.0
#: request fields the queue may read (lengths, tenants, intent; never the prompt)
META_KEYS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "metadata", "litellm_metadata")


def _call_type_name(call_type: Any) -> str:
    return str(getattr(call_type, "value", call_type) or "")


class Admission:
    """Pre-call scoring and post-routing queueing (module docstring). ``scheduler``: a
    callable returning the :class:`sjf_core.Scheduler` (built on first use)."""

    def __init__(self, settings: Any, scheduler: Callable[[], Any], calls: CallRegistry, stats: HandlerStats,
                 labels: OpsLabels | None = None):
        self.settings = settings
        self.labels = labels if labels is not None else OpsLabels()
        self.scheduler = scheduler
        self.calls = calls
        self.stats = stats
        self._auto_slots: dict[str, asyncio.Future] = {}
        self._spare: LastResort | None = None  # gates of the plugin's own, if no scheduler builds
        #: litellm_call_id -> (refusal, when): what a router retry of a refused call gets
        self._refused: dict[str, tuple[BaseException, float]] = {}

    def _refuse(self, call: Call | None, exc: BaseException) -> None:
        """Remember ``exc`` for the router's retries of ``call``; drop old refusals."""
        now = time.monotonic()
        if len(self._refused) > 256:
            self._refused = {k: v for k, v in self._refused.items() if now - v[1] < REFUSAL_MEMORY_S}
        if call is not None:
            self._refused[call.cid] = (exc, now)

    def _refused_before(self, kwargs: Any) -> BaseException | None:
        cid = kwargs.get("litellm_call_id") if isinstance(kwargs, Mapping) else None
        hit = self._refused.get(cid) if isinstance(cid, str) else None
        if hit is None or time.monotonic() - hit[1] >= REFUSAL_MEMORY_S:
            return None
        return hit[0]

    # ---- pre-call -----------------------------------------------------------------------
    def remember(self, data: Any, call_type: Any, user_api_key_dict: Any) -> None:
        """Score and record one request (module docstring). Never raises: on an internal
        fault the request is recorded unscored, and its admission goes to the last-resort
        gate (:meth:`admit`)."""
        try:
            self._remember(data, call_type, user_api_key_dict)
        except Exception as exc:
            self.stats.fail_open += 1
            self._remember_fault(data, call_type, exc)

    def _remember(self, data: Any, call_type: Any, user_api_key_dict: Any) -> None:
        if self.settings.disabled:
            return
        endpoint = ENDPOINTS.get(_call_type_name(call_type))
        if endpoint is None or not isinstance(data, dict):
            self.stats.passthrough += 1
            return
        cid = data.get("litellm_call_id")
        if not isinstance(cid, str) or not cid:
            self.stats.passthrough += 1
            return
        calls = self.calls
        calls.prune()
        psr = data.get("proxy_server_request")
        psr_id = id(psr)
        # A re-run of the same HTTP request (fallback) under a new call id: the old
        # attempt is over, hand its slot back.
        old = calls.by_request(psr_id) if psr is not None else None
        if old is not None and old.cid != cid and not old.draining:
            calls.release(old, None, "rerun")
        # an embedding has no answer to predict: unscored (FCFS order in its runner's queue)
        prediction = self.scheduler().predict(data, endpoint) if endpoint != "embeddings" else None
        if prediction is not None:
            self.stats.scored += 1
        else:
            self.stats.unscored += 1
        headers = psr.get("headers") if isinstance(psr, Mapping) else None
        meta_body = {k: data[k] for k in META_KEYS if k in data}
        consume_intent(data, meta_body)  # LiteLLM's `priority` is ours, never forwarded
        call = Call(cid, psr_id, endpoint, prediction, meta_body,
                    dict(headers) if isinstance(headers, Mapping) else None, bool(data.get("stream")))
        call.api_key, call.team = identity(user_api_key_dict)
        call.tenant_label = tenant_label(user_api_key_dict, self.settings.fairness)
        calls.add(call, has_psr=psr is not None)

    def _remember_fault(self, data: Any, call_type: Any, exc: BaseException) -> None:
        """Record a call whose pre-call work failed, unscored and marked with ``exc``
        (best effort, never raises): its deployment hook queues it at the gate."""
        try:
            endpoint = ENDPOINTS.get(_call_type_name(call_type))
            cid = data.get("litellm_call_id") if isinstance(data, dict) else None
            if endpoint is None or not isinstance(cid, str) or not cid or self.calls.find(data) is not None:
                return
            meta_body = {k: data[k] for k in META_KEYS if k in data}
            consume_intent(data, meta_body)  # never raises (it notes its own fault)
            call = Call(cid, id(data.get("proxy_server_request")), endpoint, None, meta_body, None,
                        bool(data.get("stream")))
            call.fault = exc
            self.calls.add(call, has_psr=data.get("proxy_server_request") is not None)
        except Exception:
            log_fault("litellm_sjf could not record a request after a pre-call fault; it passes unscheduled")

    # ---- after routing ------------------------------------------------------------------
    async def admit(self, kwargs: Any, call_type: Any) -> None:
        """Queue the call for a slot on the chosen backend and wait (module docstring).
        An internal fault of the queue sends it to the backend's last-resort gate."""
        refused = self._refused_before(kwargs)
        if refused is not None:  # the router retries a refusal: refused again, never sent
            raise refused
        call = None
        try:
            with fail_open(self.stats, "litellm_sjf could not find a request's record; it passes unscheduled"):
                call = self.calls.find(kwargs)
            if call is None or call.done:
                return
            try:
                if call.fault is not None:
                    raise call.fault
                ticket = await self._ticket(call, kwargs, call_type)
                if ticket is not None:
                    await self._wait(call, ticket)
            except REFUSALS:
                raise
            except Exception as exc:
                await self._gate(call, kwargs, exc)
        except AdmissionRejected as exc:
            self.stats.rejected_429 += 1
            if call is not None:
                self.calls.release(call, None, "failure")
            self._refuse(call, exc)
            raise

    async def _gate(self, call: Call, kwargs: Any, fault: BaseException) -> None:
        """Wait at the backend's last-resort gate (FIFO, its slots, no predictor, no store:
        :mod:`sjf_core.admission._last_resort`) after ``fault``; the slot is released on
        the call's usual paths."""
        self.stats.fail_open += 1
        self.stats.gated += 1
        call.fault = None
        old = call.ticket
        if old is not None:
            try:
                old.release(None)  # whatever it holds: the gate's slot replaces it
            except Exception:
                log_fault("litellm_sjf ticket release failed; its lease will free the slot")
        backend = call.backend or self._backend_of(kwargs)
        if call.probe is None:
            call.probe = probe_target(kwargs)
        ticket = self._last_resort().ticket(backend, fault)
        call.ticket, call.backend = ticket, backend
        self.named(call, kwargs)
        await self._wait(call, ticket)

    def _backend_of(self, kwargs: Any) -> str:
        api_base = kwargs.get("api_base") if isinstance(kwargs, Mapping) else None
        try:
            backend = self.settings.queue_key(api_base) if api_base else backend_key(f"model:{kwargs.get('model')}")
            return self.runner_of(backend, kwargs)
        except Exception:
            note_fault(log, "queue name of a deployment not found; its URL is the queue key")
            return backend_key(api_base)

    def runner_of(self, backend: str, params: Any) -> str:
        """The queue key of a deployment (``kwargs`` of the deployment hook, or a deployment's
        ``litellm_params``) whose box has been read: its model's runner when the box runs
        models side by side (docs/boxes.md), else ``backend``. A named ``queue`` and
        ``boxes: off`` keep the backend's key (one queue for the URL)."""
        if not getattr(self.settings, "boxes", True) or not isinstance(params, Mapping) or \
                not backend.startswith(("http://", "https://")):
            return backend
        return self.scheduler().queue_key(backend, provider_and_model(params)[1])

    async def read_box(self, backend: str, params: Any) -> str:
        """Read the deployment's box once (its first request waits for it), then
        :meth:`runner_of`. Never raises: a box that cannot be read is one queue."""
        if not getattr(self.settings, "boxes", True) or not isinstance(params, Mapping) or \
                not backend.startswith(("http://", "https://")):
            return backend
        target = probe_target(params)
        if target is not None:
            provider = provider_and_model(params)[0]
            with fail_open(self.stats, "litellm_sjf could not read a box; its URL is one queue"):
                await self.scheduler().read_box(backend, target.api_base, target.headers,
                                                "ollama" if provider in OLLAMA_PROVIDERS else None)
        return self.runner_of(backend, params)

    def _last_resort(self) -> LastResort:
        """The scheduler's gates, or (no scheduler could be built) the plugin's own."""
        try:
            lr = getattr(self.scheduler(), "last_resort", None)
            if isinstance(lr, LastResort):
                return lr
        except Exception:  # the scheduler itself is what failed: the plugin's spare gate
            note_fault(log, "the scheduler's last-resort gate unavailable; the plugin's own gate is used")
        if self._spare is None:
            self._spare = LastResort(self._spare_slots, self.settings.lease_ttl_s)
        return self._spare

    def _spare_slots(self, key: str) -> int:
        n = self.settings.slots_for(key)
        return n if isinstance(n, int) else 1

    async def _ticket(self, call: Call, kwargs: Mapping, call_type: Any) -> Any:
        """A new ticket for ``call`` on its backend, or None (keep the slot it has, or no slot)."""
        if call.probe_task is not None and not call.probe_task.done():
            await asyncio.shield(call.probe_task)  # a retry after a timeout waits until the backend is idle
        if rejected_reason(kwargs, call_type) is not None:
            # LiteLLM refuses it before it reaches the backend: no slot, no wait
            self.stats.rejected_early += 1
            self.calls.release(call, None, "failure")
            return None
        api_base = kwargs.get("api_base")
        backend = self.settings.queue_key(api_base) if api_base else backend_key(f"model:{kwargs.get('model')}")
        call.probe = probe_target(kwargs)
        sched = self.scheduler()
        if self.settings.slots_for(backend) == AUTO and backend not in sched.backend_slots:
            await self._resolve_auto_slots(backend, call.probe)
        backend = await self.read_box(backend, kwargs)  # after slots: auto, which the runners take
        t = call.ticket
        if t is not None:
            if t.running and call.backend == backend:
                t.renew()  # a retry of this call on the same backend keeps its slot
                call.acquired_wall = time.time()  # backup events of the failed attempt must not release it
                return None
            if t.waiting:
                return None  # still waiting for its slot
            if t.running:
                t.release(None)  # re-run on another backend: hand the old slot back
                self.stats.released_rerun += 1
        ticket = sched.ticket(backend, call.meta_body, call.endpoint, call.headers, arrival=call.arrival,
                              prediction=call.prediction, api_key=call.api_key, team=call.team,
                              request_id=call.request_id)
        call.ticket = ticket
        call.backend = backend
        self.named(call, kwargs)
        return ticket

    def named(self, call: Call, kwargs: Any) -> None:
        """Note the call's model names and tenant label for the operator's view. Never raises."""
        try:
            call.group, call.deployment = deployment_names(kwargs)
            api_base = kwargs.get("api_base") if isinstance(kwargs, Mapping) else None
            self.labels.backend_seen(call.backend, call.group, call.deployment, api_base)
            self.labels.ticket_seen(call.ticket, call.group, call.stream)
            entry = getattr(call.ticket, "entry", None)
            self.labels.tenant_seen(getattr(entry, "tenant", None), call.tenant_label)
        except Exception:
            note_fault(log, "litellm_sjf: model names of a request not noted; the status shows its URL only",
                       level=logging.DEBUG)

    async def _wait(self, call: Call, ticket: Any) -> None:
        try:
            await ticket.acquire()
        except asyncio.CancelledError:
            self.stats.cancelled_queued += 1
            self.calls.forget(call)
            raise
        except Superseded as exc:
            self.stats.superseded_409 += 1
            self.calls.forget(call)
            self._refuse(call, exc)
            raise
        self.stats.admitted += 1
        call.acquired_wall = time.time()

    async def resolve_auto_slots_of(self, targets: Mapping) -> None:
        """``slots: auto`` of several backends (``{backend key: ProbeTarget or None}``)."""
        sched = self.scheduler()
        for key, target in targets.items():
            backend = key.partition("|")[0]  # a runner's slots are its backend's
            if self.settings.slots_for(backend) == AUTO and backend not in sched.backend_slots:
                await self._resolve_auto_slots(backend, target)

    async def _resolve_auto_slots(self, backend: str, target) -> None:
        """``slots: auto``: ask the backend once (concurrent first requests share the answer)."""
        fut = self._auto_slots.get(backend)
        if fut is None:
            from sjf_core import backend_label

            fut = self._auto_slots[backend] = asyncio.get_running_loop().create_future()
            n, why = (await backend_slots(target)) if target is not None else (None, "the deployment has no api_base")
            label = backend_label(backend)
            if n is None:
                n = 1
                log.warning("litellm_sjf: slots: auto for %s: %s; using 1 slot", label, why)
            else:
                log.info("litellm_sjf: slots: auto for %s: %d (%s)", label, n, why)
            self.scheduler().set_slots(backend, n)
            fut.set_result(n)
        await asyncio.shield(fut)
