"""One queue key per real backend (:func:`normalise`), and how a key is shown (:func:`backend_label`).

``normalise(url) -> str``. Never raises. Two URLs that reach the same server on the
same machine get the same key, so their deployments share one admission queue:

* scheme and host are lower-cased; ``localhost``, ``127.0.0.1``, ``::1`` / ``[::1]`` and
  ``0.0.0.0`` become ``127.0.0.1``;
* a default port (80 for http, 443 for https) is dropped;
* the API root and ``/v1`` are one backend (Ollama's native API at ``/`` and its
  OpenAI-compatible one at ``/v1``; llama.cpp's server answers both): the key of
  either is ``scheme://host[:port]/v1``;
* a trailing slash, a query and a fragment are dropped; credentials are kept (two
  accounts on one host are one machine, but the key is never logged with them:
  :func:`backend_label` strips them).

Anything that is not an ``http(s)://`` URL (``"model:gpt"``, ``"default"``) is only
stripped of surrounding blanks and trailing slashes.
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import urlsplit, urlunsplit

LOOPBACK = "127.0.0.1"
_LOOPBACK_ALIASES = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "::", "localhost.localdomain", "ip6-localhost"}
_DEFAULT_PORTS = {"http": 80, "https": 443}
_API_ROOT = "/v1"

__all__ = ["normalise", "backend_label", "LOOPBACK"]


def normalise(url: Any) -> str:
    """The queue key of a backend base URL (see the module docstring). Never raises. Each
    distinct URL text is parsed once per process (the keys are remembered)."""
    return _normalised(str(url if url is not None else "default").strip())


@functools.lru_cache(maxsize=4096)
def _normalised(s: str) -> str:
    try:
        parts = urlsplit(s)
        scheme = parts.scheme.lower()
        host = parts.hostname  # lower-cased, brackets removed
        if scheme not in _DEFAULT_PORTS or not host:
            return s.rstrip("/") or "default"
        port = parts.port
    except ValueError:  # a bad port or bracket: keep the text as the key
        return s.rstrip("/") or "default"
    if host in _LOOPBACK_ALIASES:
        host = LOOPBACK
    if ":" in host:
        host = f"[{host}]"
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (userinfo + "@" if userinfo else "") + host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    path = parts.path.rstrip("/")
    if path in ("", _API_ROOT):
        path = _API_ROOT
    return f"{scheme}://{netloc}{path}"


def backend_label(key: Any) -> str:
    """A queue key as logs, messages and the ``backend`` metrics label show it: the URL
    without credentials, query or fragment. Never raises; at most 200 characters."""
    s = str(key or "default")
    try:
        parts = urlsplit(s)
        if parts.scheme and parts.netloc:
            host = parts.netloc.rsplit("@", 1)[-1]
            s = urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        pass
    # A label must encode as UTF-8, or the whole exposition (LiteLLM's /metrics too) fails.
    return s[:200].encode("utf-8", "replace").decode("utf-8")
