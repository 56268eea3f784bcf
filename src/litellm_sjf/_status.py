"""The plugin's read-only status: :func:`handler_status`, and ``GET /sjf/status`` serving it.

* :func:`handler_status` assembles ``SJFHandler.status()``: ``{"backends": {key: {"slots",
  "in_flight", "waiting", "tau_s", "stats", "promotion", "slowdown"[, "tenants"]}},
  "tracked_calls", "draining", "tokens_per_s", "counters", "probes", "memory",
  "last_resort", "settings"}`` — numbers, names and hashes, never prompt text. ``promotion`` /
  ``slowdown`` per backend are the rule its queue's policy runs (None if unknown).
* :func:`start_status_server` serves it as JSON at ``http://127.0.0.1:PORT/sjf/status``
  (``SJF_STATUS_PORT``, see :mod:`litellm_sjf.settings`) from a daemon thread with the
  standard library's HTTP server; None if the port is taken.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sjf_core import note_fault, probe_stats

from ._tenancy import tenant_status

log = logging.getLogger("litellm_sjf._status")


def _promotion_name(policy: Any) -> str | None:
    rule = getattr(policy, "promotion", None)
    if rule is None or isinstance(rule, str):
        return rule
    return getattr(rule, "name", None) or type(rule).__name__


def _queue_status(q: Any) -> dict:
    try:
        stats = dict(vars(q.stats))
    except TypeError:
        stats = {}
    tau = q.tau_s
    policy = getattr(q, "policy", None)
    slowdown = getattr(policy, "slowdown", None)
    out = {"slots": q.slots, "in_flight": q.in_flight, "waiting": q.waiting,
           "tau_s": None if math.isinf(tau) else tau, "stats": stats,
           "promotion": _promotion_name(policy),
           "slowdown": float(slowdown) if isinstance(slowdown, (int, float)) else None}
    try:
        tenants = tenant_status(q)
    except Exception:
        note_fault(log, "tenant status unavailable", level=logging.DEBUG)
        tenants = None
    if tenants is not None:
        out["tenants"] = tenants
    return out


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
    return {"backends": backends, "tracked_calls": tracked, "draining": draining,
            "tokens_per_s": rates.as_dict(), "counters": stats.as_dict(), "probes": probes,
            "memory": scheduler.memory_status() if scheduler is not None else {"enabled": False},
            "last_resort": _last_resort_status(scheduler),
            "settings": {"policy": s.policy, "tau": str(s.tau), "promotion": s.promotion, "slowdown": s.slowdown,
                         "slots": s.slots, "fairness": s.fairness, "on_disconnect": s.on_disconnect,
                         "probe_timeout_s": s.probe_timeout_s}}


def start_status_server(handler, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer | None:
    """Serve ``handler.status()`` at ``http://host:port/sjf/status``; None if the port is taken."""

    class _Req(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server API)
            if self.path.rstrip("/") != "/sjf/status":
                self.send_error(404)
                return
            for _ in range(3):  # the loop thread may mutate dicts while we copy them
                try:
                    body = json.dumps(handler.status()).encode()
                    break
                except RuntimeError:
                    continue
            else:
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
