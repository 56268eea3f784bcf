"""What the emulator says about its models, in each real server's words.

Contract: :class:`ModelRoutes` adds read-only listings (and llama-swap's ``/unload``) to the
emulator's app; each lists the box's models as that server lists its own. Without a box the
emulator is a box of one model, always loaded. Nothing here changes a request's path.

* Ollama: ``GET /api/ps`` (loaded models, loading ones included, as Ollama lists them: ``name``
  / ``model`` with the ``:latest`` tag, ``size`` / ``size_vram`` in bytes, ``digest``,
  ``details``, ``expires_at`` (RFC 3339), ``context_length``; the latest expiry first),
  ``GET /api/tags`` (every model), ``GET /v1/models``.
* LM Studio: ``GET /api/v0/models`` and ``/api/v0/models/{id}`` (``state``: ``loaded`` /
  ``not-loaded``, ``type``: ``llm`` / ``embeddings``), ``GET /api/v1/models`` (``models[]``
  with ``loaded_instances[].config.parallel`` = the runner's slots).
* llama-swap: ``GET /running`` (``{"running": [{"model", "state": "ready" | "starting" |
  "stopping", "cmd", "proxy", "ttl", "name", "description"}]}``), ``GET|POST /unload``
  (unload every model; busy ones when their requests end), and ``POST /emulator/unload``
  (the same, answering ``{"unloaded": n}``) for benchmarks between bursts.
"""

from __future__ import annotations

import hashlib
import time
from datetime import datetime, timezone

from aiohttp import web

from sjf_lab.box.config import ModelSpec, ollama_name

_FOREVER = "2318-01-01T00:00:00Z"  # what Ollama shows for a model kept loaded forever


class ModelRoutes:
    """The listings of one emulator (module docstring)."""

    def __init__(self, emulator):
        self.emu = emulator

    def add(self, router) -> None:
        router.add_get("/api/ps", self.ollama_ps)
        router.add_get("/api/v0/models", self.lmstudio_v0)
        router.add_get("/api/v0/models/{model:.+}", self.lmstudio_v0_one)
        router.add_get("/api/v1/models", self.lmstudio_v1)
        router.add_get("/running", self.llama_swap_running)
        router.add_get("/unload", self.unload_text)
        router.add_post("/unload", self.unload_text)
        router.add_post("/emulator/unload", self.unload_json)

    # ---- one view over a box or the one-model emulator ----------------------------------------
    def entries(self) -> list[dict]:
        """Each model: ``spec``, ``state`` ("not-loaded", "loading", "ready", "unloading"),
        ``slots``, ``expires`` (monotonic s, None: never)."""
        emu, now = self.emu, time.monotonic()
        box = emu.box
        if box is None:
            spec = ModelSpec(emu.config.model, emu.config.tokens_per_s, int(emu.config.slots))
            return [{"spec": spec, "state": "ready", "slots": int(emu.config.slots), "expires": None}]
        out = []
        for spec in box.config.models:
            r = box.runners.get(spec.name)
            out.append({"spec": spec, "state": r.phase if r else "not-loaded", "slots": box.slots_of(spec),
                        "expires": r.expires_at(now) if r else None})
        return out

    def ollama_models(self) -> list[dict]:
        """``/api/tags`` entries (every model)."""
        return [_ollama_entry(e["spec"]) for e in self.entries()]

    def openai_models(self) -> list[dict]:
        """``/v1/models`` entries (every model)."""
        return [{"id": e["spec"].name, "object": "model", "created": 0, "owned_by": "sjf-emulator"}
                for e in self.entries()]

    # ---- Ollama ---------------------------------------------------------------------------------
    async def ollama_ps(self, request: web.Request) -> web.Response:
        models = []
        for e in self.entries():
            if e["state"] not in ("loading", "ready"):
                continue
            d = _ollama_entry(e["spec"])
            d.update(expires_at=_wall(e["expires"]), size_vram=d["size"], context_length=e["spec"].context_length)
            models.append(d)
        models.sort(key=lambda d: d["expires_at"], reverse=True)
        return web.json_response({"models": models})

    # ---- LM Studio ------------------------------------------------------------------------------
    def _lms_v0(self, e: dict) -> dict:
        spec = e["spec"]
        return {"id": spec.name, "object": "model", "type": "embeddings" if spec.kind == "embedding" else "llm",
                "publisher": "sjf-emulator", "arch": "emulator", "compatibility_type": "gguf", "quantization": "Q4_0",
                "state": "loaded" if e["state"] == "ready" else "not-loaded",
                "max_context_length": spec.context_length}

    async def lmstudio_v0(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [self._lms_v0(e) for e in self.entries()]})

    async def lmstudio_v0_one(self, request: web.Request) -> web.Response:
        name = request.match_info["model"]
        for e in self.entries():
            if e["spec"].name == name:
                return web.json_response(self._lms_v0(e))
        return web.json_response({"error": f"Model '{name}' not found"}, status=404)

    async def lmstudio_v1(self, request: web.Request) -> web.Response:
        out = []
        for e in self.entries():
            spec = e["spec"]
            inst = [{"id": spec.name, "config": {"context_length": spec.context_length, "parallel": e["slots"]}}]
            out.append({"type": "embedding" if spec.kind == "embedding" else "llm", "publisher": "sjf-emulator",
                        "key": spec.name, "display_name": spec.name, "architecture": "emulator",
                        "quantization": {"name": "Q4_0", "bits_per_weight": 4}, "size_bytes": _bytes(spec),
                        "params_string": None, "loaded_instances": inst if e["state"] == "ready" else [],
                        "max_context_length": spec.context_length, "format": "gguf"})
        return web.json_response({"models": out})

    # ---- llama-swap -----------------------------------------------------------------------------
    async def llama_swap_running(self, request: web.Request) -> web.Response:
        states = {"loading": "starting", "ready": "ready", "unloading": "stopping"}
        ttl = self.emu.box.config.keep_alive_s if self.emu.box is not None else 0
        running = [{"model": e["spec"].name, "state": states[e["state"]], "cmd": "", "proxy": "",
                    "ttl": int(ttl) if ttl > 0 else 0, "name": "", "description": ""}
                   for e in self.entries() if e["state"] in states]
        running.sort(key=lambda d: d["model"])
        return web.json_response({"running": running})

    def _unload(self) -> int:
        box = self.emu.box
        return box.unload_all() if box is not None else 0

    async def unload_text(self, request: web.Request) -> web.Response:
        self._unload()
        return web.Response(text="OK")

    async def unload_json(self, request: web.Request) -> web.Response:
        return web.json_response({"unloaded": self._unload()})


def _bytes(spec: ModelSpec) -> int:
    return int(round(spec.size_gb * 1e9))


def _ollama_entry(spec: ModelSpec) -> dict:
    name = ollama_name(spec.name)
    return {"name": name, "model": name, "modified_at": "2026-01-01T00:00:00Z", "size": _bytes(spec),
            "digest": hashlib.sha256(name.encode()).hexdigest(),
            "details": {"parent_model": "", "format": "gguf", "family": "emulator", "families": ["emulator"],
                        "parameter_size": "", "quantization_level": "Q4_0"}}


def _wall(expires_monotonic: float | None) -> str:
    """A monotonic time as Ollama's RFC 3339 ``expires_at``."""
    if expires_monotonic is None:
        return _FOREVER
    t = time.time() + (expires_monotonic - time.monotonic())
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = ["ModelRoutes"]
