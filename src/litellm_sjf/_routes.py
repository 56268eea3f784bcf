"""The operator's view on the LiteLLM proxy's own port: ``GET /sjf/status`` and ``GET /sjf/``.

:func:`mount_status_routes(handler) <mount_status_routes>` adds two routes to the running
proxy's FastAPI app (``litellm.proxy.proxy_server.app``), behind LiteLLM's own key check
(``litellm.proxy.auth.user_api_key_auth.user_api_key_auth``, the dependency LiteLLM's routes
use): the master key, or a key LiteLLM lets reach a management route (an admin's; other keys
get 401/403 from LiteLLM, as on its own admin routes). LiteLLM has no API for a callback to
add routes; a FastAPI app takes routes at any time, and ours go first in its table so that
no catch-all route of LiteLLM's shadows them.

* ``/sjf/status``: the live status JSON (:meth:`SJFHandler.live_status`, no prompt text).
* ``/sjf/``: a page (``litellm_sjf/static/status.html``, plain HTML and a little JS) that
  polls ``/sjf/status``. A browser cannot send a bearer key when it opens a page, so both
  routes also take HTTP Basic credentials (any user name, the key as the password), which
  are handed to LiteLLM's check as ``Bearer <key>``; the page's 401 asks the browser for
  them (``WWW-Authenticate: Basic``), and the browser then sends them with the page's polls.
* Both answer a key LiteLLM refused (400 "No connected db." without a database, or 401) as
  401 with a message saying the key was refused (quoting LiteLLM's); the page adds the Basic
  challenge, so that a browser asks again.
* A request with no key at all (none of the headers LiteLLM's check reads) is answered 401
  here, before LiteLLM's check: LiteLLM 1.106.12 without a database answers it 500 (its
  error handler imports ``prisma``), on its own routes too. This only ever refuses; a key,
  right or wrong, is LiteLLM's to judge, and so is every request when the proxy runs a
  ``custom_auth``.

Returns True when the routes are (or were already) mounted, False outside a LiteLLM proxy
or when LiteLLM lacks those names (then only ``SJF_STATUS_PORT`` serves the status). Never
raises. What LiteLLM's key check answers, on 1.106.12 and on the newest release:
``docs/litellm.md`` ("The operator's view").
"""

from __future__ import annotations

import base64
import binascii
import inspect
import json
import logging
import sys
from functools import lru_cache
from importlib import resources
from typing import Any

log = logging.getLogger("litellm_sjf")

STATUS_PATH = "/sjf/status"
PAGE_PATH = "/sjf/"
_CHALLENGE = (b"www-authenticate", b'Basic realm="clairvoyant-sjf", charset="UTF-8"')


def _no_key(path: str) -> bytes:
    """The 401 body for a request to ``path`` that carries no key (the route asked for named)."""
    msg = f"Authentication Error, No api key passed in. {path} needs the proxy's master key or an admin key"
    return json.dumps({"error": {"message": msg, "type": "auth_error", "param": None, "code": "401"}}).encode()


@lru_cache(maxsize=1)
def page_html() -> str:
    """The status page (static: it holds no data; its script reads ``/sjf/status``)."""
    return resources.files("litellm_sjf").joinpath("static/status.html").read_text(encoding="utf-8")


def _basic_key(value: bytes) -> bytes | None:
    """The password of an HTTP Basic credential (``user:key``, base64), or None."""
    try:
        user_pass = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    _, sep, key = user_pass.partition(b":")
    return key if sep and key else None


def key_headers(auth: Any) -> frozenset[bytes]:
    """The (lower-case) header names LiteLLM's key check reads: its ``Security(APIKeyHeader)``
    parameters, found in its signature (they differ between releases)."""
    names = set()
    for param in inspect.signature(auth).parameters.values():
        name = getattr(getattr(getattr(param.default, "dependency", None), "model", None), "name", None)
        if isinstance(name, str):
            names.add(name.lower().encode("latin-1"))
    return frozenset(names) or frozenset({b"authorization"})


def _judged_by_litellm(headers: list, names: frozenset[bytes]) -> bool:
    """False for a request without any key, unless the proxy runs a ``custom_auth``."""
    gs = getattr(sys.modules.get("litellm.proxy.proxy_server"), "general_settings", None) or {}
    if gs.get("custom_auth"):
        return True
    extra = str(gs.get("litellm_key_header_name") or "").lower().encode("latin-1")
    return any((name in names or name == extra) and value.strip() for name, value in headers)


async def _refuse(send, challenge: bool, path: str) -> None:
    body = _no_key(path)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 401, "headers": headers + ([_CHALLENGE] if challenge else [])})
    await send({"type": "http.response.body", "body": body})


def _refused_body(original: bytes, path: str = PAGE_PATH) -> bytes:
    """The 401 body for a key LiteLLM's check refused on ``path``, quoting LiteLLM's own message."""
    try:
        said = str((json.loads(original or b"{}").get("error") or {}).get("message") or "")
    except (ValueError, AttributeError):
        said = original[:200].decode("utf-8", "replace")
    msg = f"Authentication Error: the key was refused. {path} needs the proxy's master key or an admin key"
    return json.dumps({"error": {"message": msg + (f" (LiteLLM's key check said: {said})" if said else ""),
                                 "type": "auth_error", "param": None, "code": "401"}}).encode()


class _RefusedKey:
    """ASGI ``send`` for our routes: a 400 or 401 can only be LiteLLM refusing the key (the
    routes take no input; without a database LiteLLM answers 400 "No connected db." to a key
    that is not the master key), so it goes out as 401 with a message that says so (and, on
    the page, the Basic challenge, so that a browser asks again). Other answers pass as they are."""

    def __init__(self, send: Any, challenge: bool, path: str = PAGE_PATH):
        self.send, self.challenge, self.path = send, challenge, path
        self.start: dict | None = None  # the held response start of a refusal
        self.body = b""

    async def __call__(self, message: dict) -> None:
        if message["type"] == "http.response.start" and message.get("status") in (400, 401):
            self.start = message
            return
        if self.start is None or message["type"] != "http.response.body":
            await self.send(message)
            return
        self.body += message.get("body", b"")
        if message.get("more_body"):
            return
        body = _refused_body(self.body, self.path)
        headers = [(k, v) for k, v in self.start.get("headers", []) if k.lower() not in (b"content-length", b"content-type")]
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await self.send(dict(self.start, status=401, headers=headers + ([_CHALLENGE] if self.challenge else [])))
        await self.send({"type": "http.response.body", "body": body})


def with_basic_auth(inner: Any, challenge: bool, names: frozenset[bytes], path: str = PAGE_PATH) -> Any:
    """ASGI app around the route ``path``'s own: no key at all → 401; ``Authorization: Basic``
    becomes ``Bearer <password>`` before LiteLLM's key check reads it; a refused key → 401
    (:class:`_RefusedKey`); with ``challenge``, a 401 asks for Basic credentials. Each 401's
    message names ``path``, the route asked for."""

    async def app(scope, receive, send):
        headers = []
        for name, value in scope.get("headers") or []:
            if name == b"authorization" and value[:6].lower() == b"basic ":
                key = _basic_key(value[6:])
                value = b"Bearer " + key if key is not None else value
            headers.append((name, value))
        if not _judged_by_litellm(headers, names):
            await _refuse(send, challenge, path)
            return
        scope = dict(scope, headers=headers)
        await inner(scope, receive, _RefusedKey(send, challenge, path))

    return app


def _cli_option(argv: list[str], name: str) -> str | None:
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def page_url(argv: list[str] | None = None) -> str:
    """Where the page is, for the start-up line: ``http://HOST:PORT/sjf/`` from the ``--host``
    / ``--port`` LiteLLM's CLI was started with (a wildcard host shown as 127.0.0.1), else
    ``"/sjf/ on the proxy's port"`` (LiteLLM then took them from its ``HOST`` / ``PORT``
    variables or its defaults, 0.0.0.0:4000, which the plugin does not read). Never raises."""
    argv = sys.argv if argv is None else argv
    port = _cli_option(argv, "--port")
    if port is None:
        return f"{PAGE_PATH} on the proxy's port"
    host = _cli_option(argv, "--host") or "0.0.0.0"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}{PAGE_PATH}"


def _proxy_app() -> tuple[Any, Any] | None:
    ps = sys.modules.get("litellm.proxy.proxy_server")
    if ps is None:
        return None
    from litellm.proxy.auth.user_api_key_auth import user_api_key_auth

    app = getattr(ps, "app", None)
    return None if app is None else (app, user_api_key_auth)


def mount_status_routes(handler: Any) -> bool:
    """Mount ``/sjf/status`` and ``/sjf/`` on the running proxy (module docstring)."""
    try:
        found = _proxy_app()
        if found is None:
            return False
        app, auth = found
        if any(getattr(r, "path", None) == STATUS_PATH for r in app.router.routes):
            return True
        from fastapi import Depends
        from fastapi.responses import HTMLResponse, JSONResponse
        from fastapi.routing import APIRoute

        async def sjf_status():
            return JSONResponse(await handler.live_status(), headers={"Cache-Control": "no-store"})

        async def sjf_page():
            return HTMLResponse(page_html(), headers={"Cache-Control": "no-store"})

        routes, names = [], key_headers(auth)
        for path, endpoint, challenge in ((STATUS_PATH, sjf_status, False), (PAGE_PATH, sjf_page, True)):
            route = APIRoute(path, endpoint, methods=["GET"], dependencies=[Depends(auth)], include_in_schema=False)
            route.app = with_basic_auth(route.app, challenge, names, path)
            routes.append(route)
        app.router.routes[:0] = routes
        log.debug("litellm_sjf: status routes mounted at %s", PAGE_PATH)  # the start-up line names them
        return True
    except Exception as exc:  # an other LiteLLM: the status stays on SJF_STATUS_PORT only
        log.warning("litellm_sjf: could not add /sjf/status to the proxy's port (%s); set SJF_STATUS_PORT "
                    "to serve it on a port of its own", type(exc).__name__)
        return False
