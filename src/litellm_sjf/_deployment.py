"""What the plugin needs to know about the deployment LiteLLM picked: how to probe it and
how many slots it has.

* :func:`probe_target(kwargs) <probe_target>` reads the kwargs of
  ``async_pre_call_deployment_hook`` (``api_base``, ``model`` = ``provider/name``,
  ``custom_llm_provider``, ``api_key``, ``extra_headers``) and returns a
  :class:`ProbeTarget`, or None when the deployment has no ``api_base`` (a hosted API:
  nothing to probe). Never raises.
* :meth:`ProbeTarget.sender` gives the ``send`` callable of
  :meth:`sjf_core.admission._probe.ProbeGate.wait_idle`: the same ``api_base`` and
  credentials as the user's call, a fixed 1-token request (OpenAI-compatible
  ``/chat/completions`` with ``max_tokens: 1``, or Ollama's ``/api/generate`` with
  ``options.num_predict: 1`` for the ``ollama/`` and ``ollama_chat/`` providers). It is
  sent with httpx, outside LiteLLM, so none of LiteLLM's hooks (ours included) see it.
* :func:`backend_slots(target) <backend_slots>` asks the backend how many requests it
  runs at once (llama.cpp server: ``GET /props`` → ``total_slots``); returns
  ``(slots, why)`` with ``slots`` None when the backend cannot say. Never raises.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

from sjf_core import http_probe, note_fault

log = logging.getLogger("litellm_sjf")

#: timeout of the ``GET /props`` question, seconds
PROPS_TIMEOUT_S = 5.0
#: LiteLLM providers that speak Ollama's native API (probed with Ollama's ``/api/generate``):
#: LiteLLM's knowledge, so the plugin's, not the core's
OLLAMA_PROVIDERS = ("ollama", "ollama_chat")


@dataclass(frozen=True)
class ProbeTarget:
    """Where and how to probe one deployment (credentials kept in memory only)."""

    api_base: str
    api: str  # "openai" or "ollama"
    model: str | None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    def sender(self, timeout_s: float):
        """The ``send`` callable for :meth:`ProbeGate.wait_idle`."""
        return http_probe(self.api_base, self.api, self.model, self.headers, timeout_s)

    @property
    def root(self) -> str:
        """The server root (``api_base`` without a trailing ``/v1``)."""
        base = self.api_base.rstrip("/")
        return base[:-3] if base.endswith("/v1") else base


def provider_and_model(kwargs: Mapping[str, Any]) -> tuple[str, str | None]:
    """``(provider, backend model name)`` of a deployment call: ``custom_llm_provider``,
    else the prefix of ``model`` (``"ollama_chat/llama3"`` → ``("ollama_chat", "llama3")``);
    ``"openai"`` when neither says."""
    model = kwargs.get("model")
    model = model if isinstance(model, str) else None
    provider = kwargs.get("custom_llm_provider")
    if isinstance(provider, str) and provider:
        if model and model.startswith(provider + "/"):
            model = model[len(provider) + 1:]
        return provider, model
    if model and "/" in model:
        head, rest = model.split("/", 1)
        return head, rest
    return "openai", model


def probe_target(kwargs: Any) -> ProbeTarget | None:
    """The probe target of a deployment call (module docstring). Never raises."""
    try:
        if not isinstance(kwargs, Mapping):
            return None
        base = kwargs.get("api_base")
        if not isinstance(base, str) or not base.strip().lower().startswith(("http://", "https://")):
            return None
        provider, model = provider_and_model(kwargs)
        api = "ollama" if provider in OLLAMA_PROVIDERS else "openai"
        headers: dict[str, str] = {}
        extra = kwargs.get("extra_headers")
        if isinstance(extra, Mapping):
            headers.update({str(k): str(v) for k, v in extra.items() if isinstance(v, (str, int))})
        key = kwargs.get("api_key")
        if isinstance(key, str) and key:
            headers.setdefault("Authorization", f"Bearer {key}")
        return ProbeTarget(base.strip(), api, model, headers)
    except Exception:
        note_fault(log, "deployment unreadable for a probe; its orphans wait for the lease")
        return None


async def backend_slots(target: ProbeTarget) -> tuple[int | None, str]:
    """Ask the backend for its parallel slots: ``(slots or None, why)``. Never raises."""
    import httpx

    url = target.root + "/props"
    try:
        async with httpx.AsyncClient(timeout=PROPS_TIMEOUT_S, trust_env=False) as c:
            r = await c.get(url, headers=dict(target.headers))
        if r.status_code != 200:
            return None, f"GET /props answered HTTP {r.status_code}"
        n = r.json().get("total_slots")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            return None, "GET /props has no total_slots >= 1"
        return n, "GET /props total_slots"
    except Exception as exc:
        return None, f"GET /props failed ({type(exc).__name__})"
