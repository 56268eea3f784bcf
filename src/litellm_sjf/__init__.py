"""clairvoyant-sjf as a LiteLLM proxy callback: predictive SJF admission per serial backend.

Add one line to the proxy's ``config.yaml``::

    litellm_settings:
      callbacks: ["litellm_sjf.proxy_handler_instance"]
    general_settings:
      cancel_on_disconnect: true     # a client that leaves while queued leaves the queue

Settings come from ``SJF_*`` environment variables and/or a file named by ``SJF_CONFIG``
(see :mod:`litellm_sjf.settings` and ``examples/litellm_config.yaml``). How requests
are held and released: :mod:`litellm_sjf.handler`.
"""

from __future__ import annotations

from .handler import SJFHandler
from .settings import PluginSettings, load_settings

#: The instance LiteLLM loads from ``litellm_settings.callbacks`` (it must be an instance).
proxy_handler_instance = SJFHandler()


def status() -> dict:
    """Read-only state of :data:`proxy_handler_instance` (queues and counters, no prompt text)."""
    return proxy_handler_instance.status()


__all__ = ["proxy_handler_instance", "SJFHandler", "PluginSettings", "load_settings", "status"]
