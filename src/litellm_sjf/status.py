"""A read-only status endpoint for the plugin: ``GET /sjf/status`` (JSON) on 127.0.0.1.

Enabled by ``SJF_STATUS_PORT`` (see :mod:`litellm_sjf.settings`). It serves
:meth:`litellm_sjf.handler.SJFHandler.status`: per-backend slots, in-flight and waiting
counts, τ, queue counters and the plugin's counters. It never shows prompt text.
It runs in a daemon thread with the standard library's HTTP server, so it is up as
soon as the proxy imports the plugin.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger("litellm_sjf.status")


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
