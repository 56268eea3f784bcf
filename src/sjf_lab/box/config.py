"""Settings of an emulated box: the models it serves on one URL and how it holds them.

Contract: :class:`ModelSpec` (one model: speed, slots, load time, size, kind) and
:class:`BoxConfig` (the models, how many are loaded at once, how answers share the box's
speed, keep-alive, the pending-queue discipline, eviction) are frozen and checked once, here:
a bad value raises ``ValueError`` naming the setting. :meth:`BoxConfig.from_dict` reads a
dict (a YAML/JSON file's content), :func:`parse_model_spec` one ``--box-model`` flag.
Nothing here imports the emulator.

Defaults follow Ollama: one slot per runner (``OLLAMA_NUM_PARALLEL=1``), 3 models loaded at
once (``OLLAMA_MAX_LOADED_MODELS`` = 3 per GPU), keep-alive 5 min (``OLLAMA_KEEP_ALIVE``), a
pending queue of 512 (``OLLAMA_MAX_QUEUE``) served strictly first come first served, and
embedding models with one slot. docs/boxes.md says what each setting models.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping

KINDS = ("llm", "embedding")
PENDING = ("fifo", "skip")
EVICT = ("lru", "name")
SHARE_BY = ("answers", "runners")


@dataclass(frozen=True)
class ModelSpec:
    """One model the box can serve.

    Attributes:
        name: the model name requests give (``"chat"``, ``"qwen2.5:0.5b"``). Ollama's
            listings show a name without a tag as ``name:latest``; requests may use either.
        tokens_per_s: its own speed (answer tokens per second, alone on the box); None: the
            emulator's ``tokens_per_s``. An embedding model reads its input at this rate.
        slots: answers its runner generates at once (``OLLAMA_NUM_PARALLEL``); None: the
            emulator's ``slots`` (1 for an embedding model, as Ollama loads them).
        load_s: seconds a load takes (the request that needs it waits).
        size_gb: memory it takes when loaded (``/api/ps`` ``size``; counts against
            ``BoxConfig.memory_gb``).
        kind: ``"llm"`` or ``"embedding"``.
        context_length: listed by ``/api/ps`` and LM Studio's listings.
    """

    name: str
    tokens_per_s: float | None = None
    slots: int | None = None
    load_s: float = 0.0
    size_gb: float = 1.0
    kind: str = "llm"
    context_length: int = 4096

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("box model: 'name' must be a non-empty string")
        where = f"box model {self.name!r}"
        if self.tokens_per_s is not None and not _positive(self.tokens_per_s):
            raise ValueError(f"{where}: tokens_per_s must be > 0, got {self.tokens_per_s!r}")
        if self.slots is not None and (isinstance(self.slots, bool) or not isinstance(self.slots, int)
                                       or self.slots < 1):
            raise ValueError(f"{where}: slots must be an integer >= 1, got {self.slots!r}")
        if not _number(self.load_s) or self.load_s < 0:
            raise ValueError(f"{where}: load_s must be >= 0, got {self.load_s!r}")
        if not _number(self.size_gb) or self.size_gb < 0:
            raise ValueError(f"{where}: size_gb must be >= 0, got {self.size_gb!r}")
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind must be one of {KINDS}, got {self.kind!r}")

    def speed(self, default: float) -> float:
        """Its tokens per second (``default`` when unset)."""
        return float(self.tokens_per_s if self.tokens_per_s is not None else default)

    def runner_slots(self, default: int) -> int:
        """Its runner's slots (``default`` when unset; 1 for an embedding model)."""
        if self.slots is not None:
            return int(self.slots)
        return 1 if self.kind == "embedding" else int(default)


@dataclass(frozen=True)
class BoxConfig:
    """How the box holds its models.

    Attributes:
        models: the models it can serve (at least one; names distinct).
        max_loaded: models loaded at once (``OLLAMA_MAX_LOADED_MODELS``; default 3).
        memory_gb: the box's memory; models whose ``size_gb`` sum above it do not fit
            together (None: only ``max_loaded`` limits).
        share: how answers running side by side share the box's speed: each runs at
            ``tokens_per_s / (1 + share * (n - 1))`` where ``n`` is how many run at once (see
            ``share_by``). 0: they do not slow each other; 1 (default): the box's throughput
            is split evenly (two answers each at half their own speed).
        share_by: what ``n`` counts: ``"answers"`` (default: every answer generating on the
            box) or ``"runners"`` (model runners generating: a runner's parallel slots are
            batched and do not slow each other).
        keep_alive_s: an idle model is unloaded this long after its last request
            (``OLLAMA_KEEP_ALIVE``, 300 s); negative: never. A request's ``keep_alive``
            overrides it for its model, as in Ollama.
        pending: ``"fifo"`` (Ollama: a request that cannot get its model yet holds every later
            request back) or ``"skip"`` (llama-swap: requests for a loaded model are served
            while others wait for a swap).
        evict: which idle model makes room: ``"lru"`` (least recently used, default) or
            ``"name"`` (Ollama's ``findRunnerToUnload``: shortest keep-alive, then name).
        max_queue: requests waiting in the pending queue at most (``OLLAMA_MAX_QUEUE``);
            one more is refused with HTTP 503.
        preload: models loaded at start, without a load.
        unload_s: seconds an unload takes before the room is free (default 0).
    """

    models: tuple = ()
    max_loaded: int = 3
    memory_gb: float | None = None
    share: float = 1.0
    share_by: str = "answers"
    keep_alive_s: float = 300.0
    pending: str = "fifo"
    evict: str = "lru"
    max_queue: int = 512
    preload: tuple = ()
    unload_s: float = 0.0

    def __post_init__(self):
        models = tuple(m if isinstance(m, ModelSpec) else model_from(m) for m in self.models)
        object.__setattr__(self, "models", models)
        object.__setattr__(self, "preload", tuple(self.preload))
        if not models:
            raise ValueError("box: 'models' needs at least one model")
        names = [m.name for m in models]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"box: model names must be distinct, repeated: {sorted(dup)}")
        if isinstance(self.max_loaded, bool) or not isinstance(self.max_loaded, int) or self.max_loaded < 1:
            raise ValueError(f"box: max_loaded must be an integer >= 1, got {self.max_loaded!r}")
        if self.memory_gb is not None and not _positive(self.memory_gb):
            raise ValueError(f"box: memory_gb must be > 0 or None, got {self.memory_gb!r}")
        if not _number(self.share) or not 0.0 <= self.share <= 1.0:
            raise ValueError(f"box: share must be in [0, 1], got {self.share!r}")
        for key, allowed in (("share_by", SHARE_BY), ("pending", PENDING), ("evict", EVICT)):
            if getattr(self, key) not in allowed:
                raise ValueError(f"box: {key} must be one of {allowed}, got {getattr(self, key)!r}")
        if not _number(self.keep_alive_s):
            raise ValueError(f"box: keep_alive_s must be a number of seconds, got {self.keep_alive_s!r}")
        if isinstance(self.max_queue, bool) or not isinstance(self.max_queue, int) or self.max_queue < 1:
            raise ValueError(f"box: max_queue must be an integer >= 1, got {self.max_queue!r}")
        if not _number(self.unload_s) or self.unload_s < 0:
            raise ValueError(f"box: unload_s must be >= 0, got {self.unload_s!r}")
        for p in self.preload:
            if self.find(p) is None:
                raise ValueError(f"box: preload names an unknown model {p!r}; models: {names}")
        if len(self.preload) > self.max_loaded:
            raise ValueError(f"box: preload lists {len(self.preload)} models, more than max_loaded={self.max_loaded}")

    def find(self, name: Any) -> ModelSpec | None:
        """The model a request's ``model`` names: exact, or Ollama's ``:latest`` tag added
        or dropped. None when the box has no such model."""
        if not isinstance(name, str) or not name:
            return None
        for cand in (name, name + ":latest", name[:-7] if name.endswith(":latest") else None):
            for m in self.models:
                if m.name == cand:
                    return m
        return None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "BoxConfig":
        """From a dict (keys as the attributes; ``models`` a list of dicts or of
        ``--box-model`` strings). Raises ValueError naming an unknown key."""
        if not isinstance(d, Mapping):
            raise ValueError("box config must be a mapping")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"box config: unknown key(s) {unknown}; known: {sorted(known)}")
        kw = dict(d)
        kw["models"] = tuple(model_from(m) for m in kw.get("models") or ())
        return cls(**kw)


def model_from(m: Any) -> ModelSpec:
    """A :class:`ModelSpec` from a dict, a ``--box-model`` string or a ModelSpec."""
    if isinstance(m, ModelSpec):
        return m
    if isinstance(m, str):
        return parse_model_spec(m)
    if isinstance(m, Mapping):
        known = {f.name for f in dataclasses.fields(ModelSpec)}
        unknown = sorted(set(m) - known)
        if unknown:
            raise ValueError(f"box model: unknown key(s) {unknown}; known: {sorted(known)}")
        return ModelSpec(**m)
    raise ValueError(f"box model must be a mapping or a 'name[:key=value,...]' string, got {m!r}")


_SPEC_KEYS = {"tokens_per_s": float, "tps": float, "slots": int, "load_s": float, "load": float,
              "size_gb": float, "kind": str, "context_length": int}
_ALIASES = {"tps": "tokens_per_s", "load": "load_s"}


def parse_model_spec(text: str) -> ModelSpec:
    """``NAME`` or ``NAME,key=value,...`` (keys: tokens_per_s|tps, slots, load_s|load, size_gb,
    kind, context_length), e.g. ``chat,tps=200,load=3`` or ``qwen2.5:0.5b,tps=400``.
    Raises ValueError naming the bad part."""
    name, _, rest = str(text).partition(",")
    kw: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or key not in _SPEC_KEYS:
            raise ValueError(f"--box-model {text!r}: bad part {part!r}; keys: {sorted(_SPEC_KEYS)}")
        try:
            kw[_ALIASES.get(key, key)] = _SPEC_KEYS[key](value.strip())
        except ValueError:
            raise ValueError(f"--box-model {text!r}: {key} needs a {_SPEC_KEYS[key].__name__}, got {value!r}") from None
    return ModelSpec(name=name.strip(), **kw)


_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def keep_alive_seconds(value: Any) -> float | None:
    """A request's Ollama ``keep_alive`` in seconds: a number (seconds), or a Go duration
    string (``"5m"``, ``"1h30m"``, ``"-1"``); negative: forever. None when absent or
    unreadable (the box's own keep-alive applies; Ollama would answer 400, the emulator
    stays lenient)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if _number(value) else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.lstrip("+-")
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(a + b for a, b in parts) != text:
        return None
    return sign * sum(float(a) * _GO_UNITS[b] for a, b in parts)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")


def _positive(x: Any) -> bool:
    return _number(x) and x > 0


def ollama_name(name: str) -> str:
    """How Ollama lists a model: ``name:latest`` when the name has no tag."""
    return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"


__all__ = ["ModelSpec", "BoxConfig", "parse_model_spec", "keep_alive_seconds", "model_from", "ollama_name", "KINDS", "PENDING", "EVICT",
           "SHARE_BY"]
