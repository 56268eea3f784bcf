"""clairvoyant-sjf as a LiteLLM proxy callback: predictive SJF admission per serial backend.

Add one line to the proxy's ``config.yaml``::

    litellm_settings:
      callbacks: ["litellm_sjf.proxy_handler_instance"]
    general_settings:
      cancel_on_disconnect: true     # a client that leaves while queued leaves the queue

Settings come from ``SJF_*`` environment variables and/or a file named by ``SJF_CONFIG``
(see :mod:`litellm_sjf.settings` and ``examples/litellm_config.yaml``). How requests
are held and released: :mod:`litellm_sjf.handler`.

Importing this package builds nothing and does not import LiteLLM (nor, through it,
aiohttp): :class:`SJFHandler` subclasses LiteLLM's ``CustomLogger`` and loads on first
access. :data:`proxy_handler_instance` is made on first access (LiteLLM's, when it loads its callbacks at proxy start-up): the settings are read
then and :meth:`SJFHandler.start` runs once. Bad settings: in the proxy's start-up, one FATAL
line naming every problem and the process ends (status 3, no traceback); elsewhere a ValueError
with the same message.
"""

from __future__ import annotations

import threading as _threading

from typing import TYPE_CHECKING as _TYPE_CHECKING

from .settings import PluginSettings, load_settings

if _TYPE_CHECKING:
    from .handler import SJFHandler

_lock = _threading.Lock()
_instance: SJFHandler | None = None


def _handler(start: bool) -> "SJFHandler":
    global _instance
    from .handler import SJFHandler  # LiteLLM is imported here, not by `import litellm_sjf`

    with _lock:
        if _instance is None:
            try:
                _instance = SJFHandler()
            except ValueError as exc:  # a bad setting: the FATAL line naming every problem, and
                from ._startup import end_failed_start, fatal  # in the proxy's start-up, the end

                fatal(exc)
                end_failed_start()
                raise
        inst = _instance
    if start:
        inst.start()
        globals()["proxy_handler_instance"] = inst  # later lookups skip __getattr__
    return inst


def __getattr__(name: str):
    #: ``proxy_handler_instance``: the instance LiteLLM loads from
    #: ``litellm_settings.callbacks`` (it must be an instance), started on first access.
    if name == "proxy_handler_instance":
        return _handler(start=True)
    if name == "SJFHandler":
        from .handler import SJFHandler

        return SJFHandler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"proxy_handler_instance", "SJFHandler"})


def status() -> dict:
    """Read-only state of :data:`proxy_handler_instance` (queues and counters, no prompt
    text); made, not started, if nothing asked for it yet."""
    return _handler(start=False).status()


__all__ = ["proxy_handler_instance", "SJFHandler", "PluginSettings", "load_settings", "status"]
