"""Pool routing: the plugin chooses the deployment of a model group whose deployments are
serial backends (``async_filter_deployments``; docs/pool.md).

Contract:

* :meth:`PoolRouting.filter(model, deployments, messages, request_kwargs) <PoolRouting.filter>`
  is the body of :meth:`SJFHandler.async_filter_deployments`. It returns the deployments
  LiteLLM may pick from: the list unchanged when the request is not pooled (``pool: off``,
  the plugin disabled, fewer than two backends with an ``api_base``
  among the candidates, a hosted deployment among them, tags on the request, a call the
  pre-call hook did not score), else the deployments of the backend the pool handed the
  request to. The call then holds a running ticket on that backend's own queue; the
  deployment hook sees it and lets the request through (:mod:`litellm_sjf._admit`), and
  every release path is unchanged.
* Raises ``asyncio.CancelledError`` (the client left while queued: it leaves the pool,
  holds nothing) and the deliberate refusals (:data:`litellm_sjf._fail_open.REFUSALS`,
  answered as HTTP 429/409 by the handler); any other fault returns the list unchanged
  (fail-open: the deployment hook's per-backend queue still bounds the backend).
* :meth:`PoolRouting.attempt_failed(call, exc) <PoolRouting.attempt_failed>`: an attempt whose
  backend refused the connection or answered 5xx takes that member out of rotation (its
  health check brings it back). Never raises.

Candidates are narrowed first as LiteLLM's later filters would: only the lowest ``order``,
without ``_excluded_deployment_ids`` (weighted failover) and, unless that leaves nothing,
without ``_retry_skipped_deployment_ids``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Mapping

from sjf_core import note_fault

from ._calls import Call, CallRegistry
from ._deployment import probe_target
from ._fail_open import REFUSALS, fail_open, log_fault
from ._stats import HandlerStats

log = logging.getLogger("litellm_sjf")

#: timeout of a down member's health check (``GET <api_base>/models``), seconds
HEALTH_TIMEOUT_S = 3.0


def _params(d: Any) -> Mapping:
    p = d.get("litellm_params") if isinstance(d, Mapping) else None
    return p if isinstance(p, Mapping) else {}


def _order(d: Any) -> int | None:
    for src in (_params(d), d.get("model_info") if isinstance(d, Mapping) else None):
        v = src.get("order") if isinstance(src, Mapping) else None
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _id(d: Any) -> Any:
    info = d.get("model_info") if isinstance(d, Mapping) else None
    return info.get("id") if isinstance(info, Mapping) else None


def narrowed(deployments: list, request_kwargs: Mapping) -> list:
    """The candidates LiteLLM's filters after ours would leave (module docstring)."""
    orders = [o for o in (_order(d) for d in deployments) if o is not None]
    out = [d for d in deployments if _order(d) == min(orders)] if orders else list(deployments)
    excluded = request_kwargs.get("_excluded_deployment_ids") or ()
    out = [d for d in out if _id(d) not in excluded]
    skipped = request_kwargs.get("_retry_skipped_deployment_ids") or ()
    return [d for d in out if _id(d) not in skipped] or out


def down_cause(exc: Any) -> str | None:
    """Why a failed attempt takes its backend out of rotation, or None (a timeout, a 4xx)."""
    try:
        import litellm

        if isinstance(exc, litellm.Timeout):
            return None
        if isinstance(exc, litellm.APIConnectionError):
            return "connection failed"
    except Exception:
        note_fault(log, "litellm_sjf could not classify a failed attempt; the backend stays in rotation")
        return None
    code = getattr(exc, "status_code", None)
    if isinstance(code, int) and 500 <= code < 600:
        return f"HTTP {code}"
    return None


def _tagged(request_kwargs: Mapping) -> bool:
    for key in ("metadata", "litellm_metadata"):
        meta = request_kwargs.get(key)
        if isinstance(meta, Mapping) and meta.get("tags"):
            return True
    return False


class PoolRouting:
    """The pool side of the plugin (module docstring). ``admission``: the
    :class:`~litellm_sjf._admit.Admission` (scheduler, ``slots: auto``)."""

    def __init__(self, settings: Any, admission: Any, calls: CallRegistry, stats: HandlerStats):
        self.settings = settings
        self.admission = admission
        self.calls = calls
        self.stats = stats

    async def _pooled(self, deployments: Any, request_kwargs: Any) -> tuple[Call, dict] | None:
        """The call and its candidates by backend key, or None (not pooled)."""
        s = self.settings
        if s.disabled or not s.pool or not isinstance(deployments, list):
            return None
        if not isinstance(request_kwargs, Mapping) or _tagged(request_kwargs):
            return None
        call = self.calls.find(request_kwargs)
        if call is None or call.done:
            return None
        groups: dict[str, list] = {}
        for d in narrowed(deployments, request_kwargs):
            base = _params(d).get("api_base")
            if not isinstance(base, str) or not base.strip().lower().startswith(("http://", "https://")):
                return None  # a hosted deployment in the group: LiteLLM's own routing
            key = await self.admission.read_box(s.queue_key(base), _params(d))
            groups.setdefault(key, []).append(d)
        return (call, groups) if len(groups) >= 2 else None

    async def filter(self, model: Any, deployments: Any, messages: Any, request_kwargs: Any) -> Any:
        """See the module docstring."""
        found = None
        with fail_open(self.stats, "litellm_sjf pool routing failed; LiteLLM routes the request"):
            found = await self._pooled(deployments, request_kwargs)
            if found is not None:
                call, groups = found
                kept = await self._keep(call, groups)
                if kept is not None:
                    return kept
                await self.admission.resolve_auto_slots_of(
                    {k: probe_target(_params(ds[0])) for k, ds in groups.items()})
        if found is None:
            return deployments
        call, groups = found
        key = await self._wait(call, groups, model)
        return deployments if key is None else groups[key]

    async def _keep(self, call: Call, groups: dict) -> list | None:
        """A retry of a call that still holds a slot: keep it if its member is a healthy
        candidate (the retry goes there), else hand it back. Returns the deployments kept."""
        if call.probe_task is not None and not call.probe_task.done():
            await asyncio.shield(call.probe_task)  # a retry after a timeout waits until the backend is idle
        t = call.ticket
        if t is None or not t.running:
            return None
        pools = self.admission.scheduler().pools
        member = pools.members.get(call.backend) if pools is not None else None
        if call.backend in groups and (member is None or member.healthy):
            t.renew()
            call.acquired_wall = time.time()
            return groups[call.backend]
        t.release(None)  # re-run on another backend: hand the old slot back
        self.stats.released_rerun += 1
        return None

    async def _wait(self, call: Call, groups: dict, model: Any = None) -> str | None:
        """Wait in the pool; the backend key whose slot the call now holds (None: fail-open)."""
        sched = self.admission.scheduler()
        pool = None
        with fail_open(self.stats, "litellm_sjf pool unavailable; LiteLLM routes the request"):
            pool = sched.pool(groups)
            members = {m.key: m for m in pool.members}
            for key, ds in groups.items():
                if members[key].health_check is None:
                    members[key].health_check = health_check(probe_target(_params(ds[0])))
        if pool is None:
            return None
        meta = sched.meta(next(iter(groups)), call.meta_body, call.headers, call.api_key, call.team, call.request_id)
        labels = self.admission.labels  # the operator's view: the pool's model group, the tenant's label
        group = model if isinstance(model, str) and model else None
        labels.pool_seen(pool.name, group)
        labels.tenant_seen(getattr(meta, "tenant", None), call.tenant_label)

        def make_ticket(key: str):
            return sched.ticket(key, call.meta_body, call.endpoint, call.headers, arrival=call.arrival,
                                prediction=call.prediction, api_key=call.api_key, team=call.team,
                                request_id=call.request_id)

        try:
            ticket = await pool.admit(call.prediction, meta, call.arrival, make_ticket)
        except asyncio.CancelledError:
            self.stats.cancelled_queued += 1
            self.calls.forget(call)
            raise
        except REFUSALS:
            self.calls.release(call, None, "failure")
            raise
        except Exception:
            self.stats.fail_open += 1
            log_fault("litellm_sjf pool admission failed; LiteLLM routes the request")
            return None
        call.ticket, call.backend = ticket, ticket.queue.name
        call.probe = probe_target(_params(groups[call.backend][0]))
        params = _params(groups[call.backend][0])
        deployment = params.get("model")
        call.group, call.deployment = group, (deployment if isinstance(deployment, str) else None)
        labels.backend_seen(call.backend, group, call.deployment, params.get("api_base"))
        labels.ticket_seen(ticket, group, call.stream)
        call.acquired_wall = time.time()
        self.stats.admitted += 1
        self.stats.pooled += 1
        return call.backend

    def attempt_failed(self, call: Call | None, exc: Any) -> None:
        """See the module docstring."""
        with fail_open(self.stats, "litellm_sjf pool health update failed"):
            pools = self.admission.scheduler().pools if call is not None else None
            member = pools.members.get(call.backend) if pools is not None and call.backend else None
            cause = down_cause(exc) if member is not None else None
            if cause is not None:
                member.mark_down(cause)


def health_check(target: Any):
    """An async callable: True when the deployment's server answers ``GET <api_base>/models``
    (Ollama: ``GET /api/tags``) below HTTP 500. None when there is nothing to ask."""
    if target is None:
        return None

    async def check() -> bool:
        import httpx

        url = target.root + ("/api/tags" if target.api == "ollama" else "/v1/models")
        async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S, trust_env=False) as c:
            r = await c.get(url, headers=dict(target.headers))
        return r.status_code < 500

    return check
