"""The HTTP-library seam: the wrapper runs on ``httpx`` (openai 1.x/2.x) and ``httpx2`` (openai 3.x).

The two libraries have the same transport API (``AsyncBaseTransport.handle_async_request``,
``Response.stream`` an ``AsyncByteStream``, ``Request.extensions["timeout"]``, the same
exception names) but distinct classes, and each client checks that a response body is
an instance of *its* ``AsyncByteStream``. So the wrapper's classes are written once,
library-free, and :func:`flavour` derives, once per library, a subclass that also
inherits the library's base class (``type(name, (Impl, lib.Base), {"http": lib})``).

* :func:`lib_of_client` — which library an SDK's ``_client`` belongs to (or None).
* :func:`lib_of` / :func:`lib_of_transport` — which library a transport or byte stream
  belongs to (by its base class; duck-typed objects default to ``httpx``).
* :func:`flavour` — the cached per-library subclass of a wrapper class.

Only libraries already imported are considered (an ``httpx2`` client implies ``httpx2``
is in ``sys.modules``); ``httpx`` is a dependency of this package and always available.
``httpx2.alias_httpx()`` (``import httpx`` resolving to ``httpx2``) yields one library.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import httpx

#: Module names of the supported HTTP libraries, in lookup order.
LIBRARY_NAMES = ("httpx2", "httpx")


@dataclass(frozen=True)
class HttpLib:
    """One HTTP library (``httpx`` or ``httpx2``): the module and the names the wrapper uses."""

    module: ModuleType

    @property
    def name(self) -> str:
        """The module's name ("httpx" or "httpx2")."""
        return self.module.__name__

    def __getattr__(self, attr: str) -> Any:  # AsyncClient, AsyncBaseTransport, Response, PoolTimeout, ...
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self.module, attr)


HTTPX = HttpLib(httpx)


def libraries() -> tuple[HttpLib, ...]:
    """The supported HTTP libraries imported in this process (distinct modules; ``httpx`` last)."""
    out: list[HttpLib] = []
    for name in LIBRARY_NAMES:
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "AsyncClient", None) is not None \
                and all(o.module is not mod for o in out):
            out.append(HttpLib(mod))
    if all(o.module is not httpx for o in out):
        out.append(HTTPX)
    return tuple(out)


def lib_of_client(http: Any) -> HttpLib | None:
    """The library whose ``AsyncClient`` ``http`` is, or None (not an async client of either)."""
    for lib in libraries():
        if isinstance(http, lib.module.AsyncClient):
            return lib
    return None


def lib_of(obj: Any, base_attr: str) -> HttpLib:
    """The library whose class ``base_attr`` (e.g. "AsyncBaseTransport", "AsyncByteStream")
    ``obj`` is an instance of; ``httpx`` if neither (duck-typed objects)."""
    for lib in libraries():
        base = getattr(lib.module, base_attr, None)
        if base is not None and isinstance(obj, base):
            return lib
    return HTTPX


def lib_of_transport(transport: Any) -> HttpLib:
    """The library whose ``AsyncBaseTransport`` ``transport`` subclasses; ``httpx`` if neither."""
    return lib_of(transport, "AsyncBaseTransport")


_lock = threading.Lock()
_flavours: dict[tuple[type, str, int], type] = {}


def flavour(impl: type, lib: HttpLib, base_attr: str) -> type:
    """The subclass of ``impl`` that also inherits ``getattr(lib.module, base_attr)``.

    The class has ``http = lib`` (the library, for its Response and exceptions) and the
    same ``__name__`` as ``impl``. Made once per (impl, library) and cached.
    """
    key = (impl, base_attr, id(lib.module))
    cls = _flavours.get(key)
    if cls is None:
        with _lock:
            cls = _flavours.get(key)
            if cls is None:
                base = getattr(lib.module, base_attr)
                cls = type(impl.__name__, (impl, base), {"http": lib, "__module__": impl.__module__,
                                                          "__qualname__": f"{impl.__qualname__}[{lib.name}]"})
                _flavours[key] = cls
    return cls
