"""The plugin's read-only status: :func:`handler_status`, :func:`live_status`, and the
``SJF_STATUS_PORT`` server.

* :func:`handler_status` assembles ``SJFHandler.status()`` (synchronous, counters): ``{"backends":
  {key: {"slots", "in_flight", "waiting", "store", "tau_s", "tau_used", "stats", "promotion",
  "slowdown"[, "tenants"]}}, "pools", "boxes" (docs/boxes.md: per box its kind, cap, models
  loaded, loads, and per model runner its queue), "tracked_calls", "draining", "tokens_per_s", "counters",
  "probes", "memory", "last_resort", "settings"}`` — numbers, names and hashes, never prompt text.
  ``counters`` are the plugin's (:class:`litellm_sjf._stats.HandlerStats`) plus
  ``store_fail_open``: requests the Redis store admitted through its per-process queue while
  Redis was unreachable (its queues' ``stats.failopen``); each backend's ``store`` says
  "local", "redis" or "redis unreachable (fail-open)" / "(fail-closed)".
  ``promotion`` / ``slowdown`` per backend are the rule its queue's policy runs and the
  slowdown that rule runs with (None if unknown, or for a rule that reads no slowdown:
  ``settings.slowdown`` is the same value, so the two agree); ``tau_used`` says whether that
  rule reads τ (the served-work rules, the default among them, use τ only as their off
  switch); ``settings`` holds the effective values (the defaults filled in), not only what
  was set.
* :func:`live_status` (async, on the proxy's event loop) adds what the operator's view
  shows: per backend ``queue`` (who runs, who waits in which order, predicted tokens and
  class, waited, band, tenant, when the guard promotes each:
  :meth:`sjf_core.AdmissionQueue.view`), ``recent`` completions (predicted vs
  actual) and ``accuracy_history`` (:class:`litellm_sjf._recorder.OpsRecorder`), per pool
  ``queue`` (its waiters, and those reserved for a member: :meth:`PoolQueue.view`),
  ``counter_groups`` (:func:`litellm_sjf._stats.grouped`), the model names and tenant labels
  (:meth:`litellm_sjf._labels.OpsLabels.annotate`), each waiter's ``promote_in_s`` /
  ``start_in_s`` (:mod:`litellm_sjf._estimates`) and ``generated_at`` (Unix time); its
  floats rounded for reading (:func:`rounded`: tokens to 0.1, the rest to 0.001).
* :func:`start_status_server` serves the live status as JSON at
  ``http://127.0.0.1:PORT/sjf/status`` (``SJF_STATUS_PORT``) from a daemon thread with the
  standard library's HTTP server, computing it on the proxy's loop; None if the port is
  taken. The proxy's own port serves it too (:mod:`litellm_sjf._routes`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sjf_core import note_fault, probe_stats

from ._estimates import add_estimates
from ._stats import grouped
from ._tenancy import tenant_status

log = logging.getLogger("litellm_sjf._status")


def _promotion_name(policy: Any) -> str | None:
    rule = getattr(policy, "promotion", None)
    if rule is None or isinstance(rule, str):
        return rule
    return getattr(rule, "name", None) or type(rule).__name__


def _tau_used(rule: str | None) -> bool | None:
    """Whether promotion rule ``rule`` reads τ (None: unknown)."""
    from sjf_core.policy.promotion import RULES

    cls = RULES.get(rule) if rule else None
    return None if cls is None else bool(getattr(cls, "uses_tau", True))


def _rule_slowdown(policy: Any) -> float | None:
    """The ``slowdown`` its promotion rule runs with (the served-work rules "work-bound" and
    "work-aging"), None when the rule reads none: one answer for the settings and each
    backend. Never raises."""
    try:
        v = getattr(policy.new_promotion(), "slowdown", None)
    except Exception:  # no policy object (a custom scheduler's queue): not known
        note_fault(log, "litellm_sjf status: a queue's promotion rule unknown; slowdown not shown",
                   level=logging.DEBUG)
        return None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _effective_settings(s: Any) -> dict:
    """The settings block: the policy the queues run, defaults filled in."""
    promotion, slowdown = s.promotion, None
    try:
        policy = s.config.make_policy()
        promotion, slowdown = policy.promotion, _rule_slowdown(policy)
    except Exception:  # a bad policy fails the build, and is reported there
        note_fault(log, "litellm_sjf status: the policy could not be made; settings as given", level=logging.DEBUG)
    return {"policy": s.policy, "tau": str(s.tau), "tau_used": _tau_used(promotion), "promotion": promotion,
            "slowdown": slowdown, "slots": s.slots, "fairness": s.fairness, "on_disconnect": s.on_disconnect,
            "probe_timeout_s": s.probe_timeout_s, "pool": s.pool}


def _queue_status(q: Any) -> dict:
    try:
        stats = dict(vars(q.stats))
    except TypeError:
        stats = {}
    tau = q.tau_s
    policy = getattr(q, "policy", None)
    out = {"slots": q.slots, "in_flight": q.in_flight, "waiting": q.waiting, "store": _store_state(q),
           "tau_s": None if math.isinf(tau) else tau, "tau_used": _tau_used(_promotion_name(policy)), "stats": stats,
           "promotion": _promotion_name(policy), "slowdown": _rule_slowdown(policy)}
    try:
        tenants = tenant_status(q)
    except Exception:
        note_fault(log, "tenant status unavailable", level=logging.DEBUG)
        tenants = None
    if tenants is not None:
        out["tenants"] = tenants
    return out


def _store_state(q: Any) -> str:
    """"local", "redis", or "redis unreachable (fail-open)" / "(fail-closed)" while it is down."""
    if not hasattr(q, "degraded"):
        return "local"
    if not q.degraded:
        return "redis"
    return f"redis unreachable (fail-{getattr(q, 'fail_mode', 'open')})"


def _last_resort_status(scheduler: Any) -> dict:
    """The last-resort gates' counts (``{"by_kind", "backends"}``), empty without a scheduler."""
    lr = getattr(scheduler, "last_resort", None)
    return lr.status() if lr is not None else {"by_kind": {}, "backends": {}}


def handler_status(scheduler: Any, calls: Any, stats: Any, rates: Any, settings: Any) -> dict:
    """The plugin's status (module docstring). ``scheduler`` None: not built yet."""
    backends = {}
    if scheduler is not None:
        for key, q in list(scheduler.queues.items()):
            backends[key] = _queue_status(q)
    tracked, draining = calls.snapshot()
    probes = {k: v for k, v in probe_stats().items() if k in backends}
    s = settings
    counters = stats.as_dict()
    # the Redis store's own fail-open (Redis unreachable: admitted through the per-process queue)
    counters["store_fail_open"] = sum(int(getattr(q.stats, "failopen", 0)) for q in
                                      (scheduler.queues.values() if scheduler is not None else ()))
    pools = scheduler.pools.status() if scheduler is not None and scheduler.pools is not None else []
    boxes = scheduler.box_status() if scheduler is not None else []
    return {"backends": backends, "pools": pools, "boxes": boxes, "tracked_calls": tracked, "draining": draining,
            "tokens_per_s": rates.as_dict(), "counters": counters, "probes": probes,
            "memory": scheduler.memory_status() if scheduler is not None else {"enabled": False},
            "last_resort": _last_resort_status(scheduler),
            "settings": _effective_settings(s)}


async def live_status(handler: Any, limit: int = 100) -> dict:
    """``handler.status()`` plus the queues' views, recent completions and the accuracy
    history (module docstring). Run it on the loop that owns the queues. Never raises for a
    queue that cannot be read (its ``queue`` is then ``{"error": type name}``)."""
    doc = handler.status()
    sched = handler._sched.peek()
    for key, q in list(sched.queues.items()) if sched is not None else []:
        try:
            view = await q.view(limit)
        except Exception as exc:  # e.g. Redis unreachable: the counters above still tell
            note_fault(log, "litellm_sjf status: a queue could not be read; its counters only")
            view = {"error": type(exc).__name__}
        doc["backends"].setdefault(key, {})["queue"] = view
    await _pool_views(doc, sched, limit)
    handler.recorder.sample()  # at most one accuracy sample per interval, also while idle
    doc["recent"] = handler.recorder.recent()
    doc["accuracy_history"] = handler.recorder.accuracy_history()
    doc["counter_groups"] = grouped(doc["counters"])
    labels = getattr(handler, "labels", None)
    if labels is not None:
        labels.annotate(doc, handler._calls.live())
    add_estimates(doc)
    doc["generated_at"] = time.time()
    return rounded(doc)


async def _pool_views(doc: dict, sched: Any, limit: int) -> None:
    """Each pool's ``queue``: who waits in it, in dispatch order (``pools[i]`` by name)."""
    registry = getattr(sched, "pools", None) if sched is not None else None
    by_name = {p.get("name"): p for p in doc.get("pools") or []}
    for pool in list(registry.pools.values()) if registry is not None else []:
        row = by_name.get(pool.name)
        if row is None:
            continue
        try:
            row["queue"] = await pool.view(limit)
        except Exception as exc:  # e.g. Redis unreachable: the pool's counters above still tell
            note_fault(log, "litellm_sjf status: a pool's queue could not be read; its counters only")
            row["queue"] = {"error": type(exc).__name__}


def rounded(x: Any, key: str = "") -> Any:
    """``x`` with its floats rounded for people to read: token counts (keys ending in
    ``_tokens``, ``served_work``) to 0.1, everything else (seconds, rates, accuracies, Unix
    times) to 0.001. The order of equal-rounded values is not the point of the view."""
    if isinstance(x, float):
        return round(x, 1 if key.endswith("_tokens") or key == "served_work" else 3) if math.isfinite(x) else x
    if isinstance(x, dict):
        return {k: rounded(v, str(k)) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [rounded(v, key) for v in x]
    return x


def status_from_thread(handler: Any, timeout_s: float = 5.0) -> dict:
    """:func:`live_status` computed on the proxy's loop, for a caller on another thread;
    the counters alone (``handler.status()``) before the loop is known."""
    loop = handler.loop
    if loop is not None and loop.is_running():
        return asyncio.run_coroutine_threadsafe(live_status(handler), loop).result(timeout_s)
    return handler.status()


def start_status_server(handler, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer | None:
    """Serve the live status at ``http://host:port/sjf/status``; None if the port is taken."""

    class _Req(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server API)
            if self.path.rstrip("/") != "/sjf/status":
                self.send_error(404)
                return
            try:
                body = json.dumps(status_from_thread(handler)).encode()
            except Exception:  # the loop is busy or stopping
                note_fault(log, "litellm_sjf status server: no status from the proxy's loop; answered 503")
                self.send_error(503)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # keep the proxy's log clean
            pass

    try:
        server = ThreadingHTTPServer((host, int(port)), _Req)
    except OSError as exc:
        log.error("litellm_sjf status server could not bind %s:%s (%s); status disabled", host, port, exc.strerror)
        return None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="litellm-sjf-status", daemon=True).start()
    log.info("litellm_sjf status on http://%s:%d/sjf/status", host, server.server_address[1])
    return server
