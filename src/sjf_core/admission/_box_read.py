"""Learn a box from the box: what kind of server it is, its models, which are loaded.

Contract: :func:`read_box` asks a server's own listings (GET only, metadata, no prompt) and
returns a :class:`BoxReport`, or None when none answers as a many-model server (a plain
OpenAI-compatible server: one queue per URL, as before). :func:`read_loaded` re-reads only
which models are loaded. Both never raise. httpx is imported on first use (the ``adapter``
extra), as for the idle probe.

What is read (docs/boxes.md, "What is read, what is assumed"):

* **Ollama**: ``GET /api/tags`` (every installed model: the catalogue) and ``GET /api/ps``
  (the loaded ones). Ollama names without a tag mean ``:latest``.
* **LM Studio**: ``GET /api/v1/models`` (``models[].key``, ``loaded_instances[]`` with
  ``config.parallel``: the runner's slots), else ``GET /api/v0/models`` (``data[].id``,
  ``state``: ``loaded`` / ``not-loaded``).
* **llama-swap**: ``GET /running`` (``running[].model``, ``state``) and ``GET /v1/models``.
* **llama.cpp router** (``llama-server`` without ``-m``): ``GET /models``
  (``data[].id``, ``status.value``: ``loaded`` / ``unloaded``).

Probed in that order (a ``hint`` of "ollama", from LiteLLM's Ollama providers, asks Ollama only).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

log = logging.getLogger("sjf_core.admission.boxes")

#: each GET of a listing, seconds
READ_TIMEOUT_S = 2.0
#: the whole reading of one box, seconds (its first request waits at most this)
READ_TOTAL_S = 4.0


@dataclass
class BoxReport:
    """What a box said about itself."""

    kind: str  # "ollama", "lmstudio", "llama-swap", "llama.cpp-router"
    catalogue: set = field(default_factory=set)  # model names it serves
    loaded: set = field(default_factory=set)  # model names loaded (or loading) now
    slots: dict = field(default_factory=dict)  # model -> runner slots, where the box says


def ollama_names(name: str) -> set:
    """The names Ollama treats as one model (``m`` and ``m:latest``)."""
    n = str(name)
    return {n, n[:-7]} if n.endswith(":latest") else {n, n + ":latest"}


async def _get(client, url: str, headers: Mapping[str, str]) -> Any:
    try:
        r = await client.get(url, headers=dict(headers))
        if r.status_code != 200:
            return None
        return r.json()
    except Exception as exc:  # a listing that does not answer says "not this kind"
        log.debug("box listing %s unreadable (%s)", url.rsplit("/", 1)[-1], type(exc).__name__)
        return None


def _names(items: Any, key: str) -> set:
    return {str(d[key]) for d in items if isinstance(d, Mapping) and isinstance(d.get(key), str)} \
        if isinstance(items, list) else set()


async def _ollama(c, root: str, h: Mapping) -> BoxReport | None:
    ps = await _get(c, root + "/api/ps", h)
    if not isinstance(ps, Mapping) or not isinstance(ps.get("models"), list):
        return None
    tags = await _get(c, root + "/api/tags", h)
    cat = _names(tags.get("models"), "name") if isinstance(tags, Mapping) else set()
    loaded = _names(ps["models"], "name") | _names(ps["models"], "model")
    return BoxReport("ollama", {x for n in cat for x in ollama_names(n)}, {x for n in loaded for x in ollama_names(n)})


async def _lmstudio(c, root: str, h: Mapping) -> BoxReport | None:
    v1 = await _get(c, root + "/api/v1/models", h)
    if isinstance(v1, Mapping) and isinstance(v1.get("models"), list):
        rep = BoxReport("lmstudio")
        for m in v1["models"]:
            key = m.get("key") if isinstance(m, Mapping) else None
            if not isinstance(key, str):
                continue
            rep.catalogue.add(key)
            inst = m.get("loaded_instances") or []
            if inst:
                rep.loaded.add(key)
                par = (inst[0].get("config") or {}).get("parallel") if isinstance(inst[0], Mapping) else None
                if isinstance(par, int) and not isinstance(par, bool) and par >= 1:
                    rep.slots[key] = par
        return rep
    v0 = await _get(c, root + "/api/v0/models", h)
    if not isinstance(v0, Mapping) or not isinstance(v0.get("data"), list):
        return None
    data = [d for d in v0["data"] if isinstance(d, Mapping)]
    return BoxReport("lmstudio", _names(data, "id"), {d["id"] for d in data if d.get("state") == "loaded"
                                                      and isinstance(d.get("id"), str)})


async def _llama_swap(c, root: str, h: Mapping) -> BoxReport | None:
    run = await _get(c, root + "/running", h)
    if not isinstance(run, Mapping) or not isinstance(run.get("running"), list):
        return None
    models = await _get(c, root + "/v1/models", h)
    cat = _names(models.get("data"), "id") if isinstance(models, Mapping) else set()
    live = {d["model"] for d in run["running"] if isinstance(d, Mapping) and isinstance(d.get("model"), str)
            and d.get("state") in ("ready", "starting")}
    return BoxReport("llama-swap", cat | live, live)


async def _llama_router(c, root: str, h: Mapping) -> BoxReport | None:
    got = await _get(c, root + "/models", h)
    data = got.get("data") if isinstance(got, Mapping) else None
    if not isinstance(data, list) or not any(isinstance(d, Mapping) and isinstance(d.get("status"), Mapping)
                                             for d in data):
        return None
    data = [d for d in data if isinstance(d, Mapping) and isinstance(d.get("id"), str)]
    loaded = {d["id"] for d in data if isinstance(d.get("status"), Mapping)
              and d["status"].get("value") in ("loaded", "loading")}
    return BoxReport("llama.cpp-router", {d["id"] for d in data}, loaded)


READERS = {"ollama": _ollama, "lmstudio": _lmstudio, "llama-swap": _llama_swap, "llama.cpp-router": _llama_router}


def _root(api_base: str) -> str:
    base = str(api_base).rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


async def read_box(api_base: str, headers: Mapping[str, str] | None = None, hint: str | None = None,
                   kinds: tuple | None = None) -> BoxReport | None:
    """What the server at ``api_base`` says it is (module docstring). Never raises."""
    try:
        import httpx

        order = kinds or ((hint,) if hint in READERS else tuple(READERS))

        async def ask():
            async with httpx.AsyncClient(timeout=READ_TIMEOUT_S, trust_env=False) as c:
                for kind in order:
                    rep = await READERS[kind](c, _root(api_base), headers or {})
                    if rep is not None:
                        return rep
            return None

        return await asyncio.wait_for(ask(), READ_TOTAL_S)
    except Exception:  # noqa: BLE001 - not knowing the box is the plain case
        log.debug("box listing of %s unreadable", type(api_base).__name__)
    return None


async def read_loaded(api_base: str, kind: str, headers: Mapping[str, str] | None = None) -> set | None:
    """The models loaded now, as the box of ``kind`` lists them (None: no answer)."""
    rep = await read_box(api_base, headers, kinds=(kind,)) if kind in READERS else None
    return None if rep is None else rep.loaded


__all__ = ["BoxReport", "read_box", "read_loaded", "ollama_names", "READERS", "READ_TOTAL_S"]
