"""Pieces of litellm_sjf._routes that need no proxy: the start-up URL of the page, the HTTP
Basic credential it accepts, the refusal of a request without a key (the rest runs against
a real proxy in tests/integration/test_litellm_ops.py)."""

from __future__ import annotations

import asyncio
import base64

from litellm_sjf._routes import _basic_key, page_url, with_basic_auth


def test_page_url_follows_the_proxy_command_line():
    assert page_url(["litellm", "--config", "c.yaml", "--port", "4001"]) == "http://127.0.0.1:4001/sjf/"
    assert page_url(["litellm", "--host=10.0.0.5", "--port=8080"]) == "http://10.0.0.5:8080/sjf/"
    assert page_url(["litellm", "--host", "::1", "--port", "9000"]) == "http://[::1]:9000/sjf/"
    assert page_url(["litellm", "--config", "c.yaml"]) == "/sjf/ on the proxy's port"


def test_basic_credentials_give_the_password_as_the_key():
    enc = base64.b64encode(b"ops:sk-123").strip()
    assert _basic_key(enc) == b"sk-123"
    assert _basic_key(base64.b64encode(b"no-colon")) is None
    assert _basic_key(b"%%%not-base64") is None


def _call(app, headers):
    sent = []

    async def send(m):
        sent.append(m)

    async def run():
        await app({"type": "http", "headers": headers}, None, send)

    asyncio.run(run())
    return sent


def test_a_request_without_a_key_is_refused_before_litellm_and_a_basic_key_becomes_bearer():
    seen = []

    async def inner(scope, receive, send):
        seen.append(dict(scope["headers"]))
        await send({"type": "http.response.start", "status": 200, "headers": []})

    app = with_basic_auth(inner, challenge=True, names=frozenset({b"authorization", b"x-litellm-api-key"}))
    sent = _call(app, [(b"accept", b"text/html")])
    assert sent[0]["status"] == 401 and (b"www-authenticate", sent[0]["headers"][-1][1]) == sent[0]["headers"][-1]
    assert not seen  # LiteLLM's check never ran
    basic = b"Basic " + base64.b64encode(b"ops:sk-123")
    assert _call(app, [(b"authorization", basic)])[0]["status"] == 200
    assert seen[-1][b"authorization"] == b"Bearer sk-123"
    assert _call(app, [(b"x-litellm-api-key", b"sk-1")])[0]["status"] == 200  # another header LiteLLM reads


def test_each_401_names_the_route_asked_for():
    """Before: the JSON route's 401 said "/sjf/ needs ..." (the page's path)."""
    import json

    async def inner(scope, receive, send):
        await send({"type": "http.response.start", "status": 400, "headers": []})  # LiteLLM refusing a key
        await send({"type": "http.response.body", "body": b'{"error": {"message": "No connected db."}}'})

    names = frozenset({b"authorization"})
    for path in ("/sjf/status", "/sjf/"):
        app = with_basic_auth(inner, challenge=path == "/sjf/", names=names, path=path)
        for headers in ([], [(b"authorization", b"Bearer sk-wrong")]):
            sent = _call(app, headers)
            msg = json.loads(sent[-1]["body"])["error"]["message"]
            assert sent[0]["status"] == 401 and f"{path} needs the proxy's master key" in msg, msg
            other = "/sjf/ needs" if path == "/sjf/status" else "/sjf/status needs"
            assert other not in msg
