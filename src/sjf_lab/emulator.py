"""A serial LLM backend emulator: a real HTTP server (aiohttp) speaking the OpenAI API and Ollama's.

It stands in for Ollama / llama.cpp / LM Studio in tests, the demo and benchmarks
(DESIGN.md "Benchmark protocol"). It serves ``slots`` requests at a time (default 1);
the others wait inside the emulator in FIFO order, like a real serial server. Tokens
are generated at ``tokens_per_s`` tokens per second, emitted in ticks of
``tick_s`` seconds (not one sleep per token).

Answer lengths come from a **trace** (JSONL) that the scheduler never reads. The
emulator extracts the scored text of each request itself (chat: the last user
message; completions: ``prompt``; responses: the last user input), hashes it with
SHA-256 and looks the hash up. Trace lines (one JSON object each)::

    {"prompt": "...", "response_tokens": 512}           # or "answer_tokens"
    {"sha256": "<hex of the scored text>", "answer_tokens": 40, "fault": "500"}

Unknown prompts get a length from a seeded fallback distribution that depends only
on (seed, prompt hash), so the same prompt gets the same length in every run: random with
respect to what the prompt asks, so without a trace the emulator is a load generator, not
a test of ordering (``sjf emulate`` warns; ``sjf emulate --trace demo`` serves the demo's
prompts with their recorded lengths).

Endpoints: ``POST /v1/chat/completions`` (and ``/chat/completions``; streaming SSE
and not, with ``usage``), ``POST /v1/completions``, ``POST /v1/responses`` (simple),
``POST /v1/embeddings`` (answered at once, outside the slots), ``GET /v1/models``, ``GET /health``, ``GET /emulator/stats``, ``POST /emulator/reset``,
``POST /emulator/wait-start`` (``{"hash": 12 hex of a prompt's SHA-256, "timeout": s}``: answers when a user
request with that prompt got its slot, so that a client can leave *mid-answer*).
``max_tokens`` / ``max_completion_tokens`` / ``max_output_tokens`` cap the answer
(``finish_reason: "length"``).

Ollama's native API on the same port and the same slots: ``POST /api/chat`` (scored
text: the last user message) and ``POST /api/generate`` (``prompt``). They stream NDJSON
(``application/x-ndjson``, one JSON object a line) unless the body says
``"stream": false``; ``options.num_predict`` caps the answer (``done_reason:
"length"``). Each line carries ``model``, ``created_at``, ``done`` and ``message``
(chat) or ``response`` (generate); the last one (``done: true``) adds ``done_reason``,
``prompt_eval_count``, ``eval_count`` and the ``*_duration`` fields (nanoseconds).
``GET /api/tags``, ``GET /api/version`` and ``POST /api/show`` answer at once.

**A box of several models** (``EmulatorConfig(box=BoxConfig(...))``, ``sjf emulate
--box-model ...``; :mod:`sjf_lab.box`, docs/boxes.md): one URL serves several models the way
Ollama does: a runner per model with its own ``slots``, at most ``max_loaded`` models loaded,
a load time per model (a request for an unloaded model waits in the box's pending queue,
FIFO, for room and pays the load; an idle model is evicted least recently used first), a
speed per model, and answers running side by side sharing the box's speed. Requests are
routed by their ``model`` (unknown: 404). Embedding calls (``/v1/embeddings``,
``/api/embed``, ``/api/embeddings``) go through their model's runner. Listings:
``/api/ps``, ``/api/tags``, ``/v1/models`` (Ollama), ``/api/v0/models``, ``/api/v1/models``
(LM Studio; ``/api/v0/chat/completions`` etc. add LM Studio's ``stats``), ``/running`` and
``/unload`` (llama-swap) (:mod:`sjf_lab.box.routes`). Ollama's answers carry real
``load_duration`` / ``eval_duration`` / ``total_duration`` (ns) in both modes.

llama.cpp server's ``GET /props`` answers ``{"total_slots": slots, ...}`` (unless
``props=False``: then 404, as a server that cannot say).

Fault injection (a trace line's ``fault`` field, or the request header
``x-emulator-fault``): ``"500"`` / ``"503"`` / ``"429"`` (that HTTP status, returned
once the request holds its slot), ``"drop"`` (close the connection without an answer),
``"drop-mid"`` (generate half the answer, streaming it if asked, then drop the
connection), ``"hold"`` (take the slot, then wait until ``POST /emulator/release``
before generating: lets a test hold the backend busy while it builds a queue),
``"timeout"`` (take the slot and answer nothing until the client gives up).

Probe faults (``probe_fault``, or ``POST /emulator/probe-fault`` with ``{"fault", "at",
"rate"}``): the idle probes of :mod:`sjf_core.admission._probe` (``x-sjf-probe``) get
``"500"`` / ``"503"`` / ``"429"`` or ``"timeout"`` (no answer until the client gives up),
each probe with probability ``probe_fault_rate`` (seeded). ``probe_fault_at="slot"``
(default): once the probe holds its slot, after the requests ahead of it (a backend that
failed the probe itself); ``"arrival"``: at once, without a slot (Ollama's 503 when its own
queue is full, or a proxy in between). Counted in ``probe_faults``.

Client disconnects (``on_disconnect``):

* ``"stop"``: stop generating at the next tick and free the slot (a queued request
  whose client left is dropped from the FIFO), like llama.cpp's server and Ollama (at
  its next token);
* ``"continue"``: keep generating until the answer is done: the slot stays busy, and a
  queued orphan is still served;
* ``"stop-streams"``: a stream stops at its next chunk, a non-streamed answer keeps
  generating to its end (llama-cpp-python's server, DESIGN.md "Real backends").

Every request that got a slot is recorded in ``stats()["order"]`` with ``t_in`` (it
reached the emulator), ``t_start`` (it got a slot), ``t_out`` (its handler returned:
the answer, or the orphan's generation, ended), all ``time.monotonic()`` seconds, and
``probe`` (it carried the ``x-sjf-probe`` header of :mod:`sjf_core.admission._probe`).
Probes take a slot like any request but are counted apart (``probes``,
``probes_in_flight``, ``max_probes_in_flight``): ``in_flight`` / ``max_in_flight``
count user requests only.
:func:`max_overlap` and :func:`idle_gaps` compute the backend's real concurrency and
idle time from these records.

Privacy: the emulator keeps only prompt hashes; its stats never contain prompt text.

Use in-process (``port = await Emulator(cfg).start()``, or :func:`start_in_thread`
for synchronous code) or as ``sjf emulate``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import random
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from aiohttp import web

from sjf_lab.data_rows import TRACE_TOKEN_FIELDS, answer_tokens_of
from sjf_lab.box.fifo import FifoSlots
from sjf_lab.box.formats import EMBED_APIS, embed_inputs, embedding_answer
from sjf_lab.box.config import keep_alive_seconds
from sjf_lab.box.lane import BoxLane, SerialLane
from sjf_lab.box.routes import ModelRoutes
from sjf_lab.emulator_wire import _Format, _words

log = logging.getLogger("sjf_lab.emulator")

FAULT_HEADER = "x-emulator-fault"
REQUEST_ID_HEADER = "x-emulator-request-id"
PROBE_HEADER = "x-sjf-probe"  # sjf_core.admission._probe marks its idle probes with it
FAULTS = ("500", "503", "429", "drop", "drop-mid", "hold", "timeout")
PROBE_FAULTS = ("500", "503", "429", "timeout")
PROBE_FAULT_AT = ("slot", "arrival")
DISCONNECT_MODES = ("stop", "continue", "stop-streams")


def prompt_hash(text: str) -> str:
    """SHA-256 hex digest of a scored prompt text (UTF-8): the trace key."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def short_hash(text: str) -> str:
    """The 12-hex-digit prefix of :func:`prompt_hash`, as listed in the service order."""
    return prompt_hash(text)[:12]


# ---- scored text (the backend's own view; it never imports the scheduler) -------------
def _content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, Mapping) and isinstance(p.get("text"), str):
                parts.append(p["text"])
        return "\n".join(parts) if parts else None
    return None


def request_text(body: Any, endpoint: str) -> str:
    """The text the emulator hashes for a request ("" when there is none).

    chat/completions: the last ``user`` message (string or text parts joined by "\\n");
    completions: ``prompt`` (first element of a list); responses: ``input`` as a
    string, or the last user item of an input list.
    """
    if not isinstance(body, Mapping):
        return ""
    if endpoint in ("completions", "ollama-generate"):
        p = body.get("prompt")
        if isinstance(p, list):
            p = p[0] if p else ""
        return p if isinstance(p, str) else ""
    items = body.get("messages") if endpoint in ("chat", "ollama-chat") else body.get("input")
    if isinstance(items, str):
        return items
    if isinstance(items, list):
        for m in reversed(items):
            if isinstance(m, Mapping) and m.get("role", "user") == "user":
                t = _content_text(m.get("content"))
                if t is not None:
                    return t
    return ""


# ---- trace ----------------------------------------------------------------------------
@dataclass(frozen=True)
class TraceItem:
    """One trace entry: the answer length (tokens, >= 0) and an optional fault."""

    tokens: int
    fault: str | None = None


class Trace:
    """Prompt hash → answer length (and fault), with a seeded fallback for unknown prompts.

    Args:
        items: prompt SHA-256 hex → :class:`TraceItem`.
        seed: seed of the fallback distribution.
        fallback: fallback mixture as ((weight, median tokens), ...); each class is
            log-normal (σ = 0.35) around its median. Default: 60% ~60, 25% ~400,
            15% ~1100 tokens (the Short/Medium/Long medians of the shared data).
    """

    DEFAULT_FALLBACK = ((0.60, 60.0), (0.25, 400.0), (0.15, 1100.0))

    def __init__(self, items: Mapping[str, TraceItem] | None = None, seed: int = 0, fallback=None):
        self.items = dict(items or {})
        self.seed = int(seed)
        self.fallback = tuple(fallback or self.DEFAULT_FALLBACK)

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], seed: int = 0) -> "Trace":
        """Build from dicts with ``prompt`` or ``sha256``, and ``answer_tokens``,
        ``response_tokens`` or ``completion_tokens`` (int >= 0; :mod:`sjf_lab.data_rows`);
        optional ``fault`` (one of :data:`FAULTS`).

        Raises:
            ValueError: a record without a key or a length, or an unknown fault.
        """
        items = {}
        for i, r in enumerate(records):
            h = r.get("sha256")
            if h is None and isinstance(r.get("prompt"), str):
                h = prompt_hash(r["prompt"])
            tok = answer_tokens_of(r, TRACE_TOKEN_FIELDS)
            if not isinstance(h, str) or isinstance(tok, bool) or not isinstance(tok, (int, float)) or tok < 0:
                raise ValueError(f"trace record {i}: needs 'prompt' or 'sha256' and the answer length >= 0 as "
                                 + " or ".join(repr(f) for f in TRACE_TOKEN_FIELDS))
            fault = r.get("fault")
            if fault is not None:
                fault = str(fault)
                if fault not in FAULTS:
                    raise ValueError(f"trace record {i}: unknown fault {fault!r}; choose from {FAULTS}")
            items[h] = TraceItem(int(tok), fault)
        return cls(items, seed)

    @classmethod
    def load(cls, path: str | Path | None, seed: int = 0) -> "Trace":
        """Read a JSONL trace file (None → empty trace, fallback only).

        Raises:
            FileNotFoundError: no such file.
            ValueError: a line that is not valid JSON or not a valid record (line number given).
        """
        if path is None:
            return cls(seed=seed)
        records = []
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from None
        return cls.from_records(records, seed)

    def lookup(self, text_hash: str) -> TraceItem:
        """The trace item of a prompt hash; unknown hashes get a seeded fallback length."""
        item = self.items.get(text_hash)
        if item is not None:
            return item
        rng = random.Random(f"{self.seed}:{text_hash}")
        total = sum(w for w, _ in self.fallback)
        u = rng.random() * total
        for w, median in self.fallback:
            u -= w
            if u <= 0:
                break
        return TraceItem(max(1, int(round(median * math.exp(rng.gauss(0.0, 0.35))))))


# ---- config and stats -------------------------------------------------------------------
@dataclass
class EmulatorConfig:
    """Emulator settings.

    Attributes:
        tokens_per_s: generation rate per slot (tokens per second, > 0).
        slots: requests generated at once (>= 1); the rest wait FIFO.
        trace: path of a JSONL trace, or None (fallback lengths only).
        trace_records: trace records given in memory (added after ``trace``).
        seed: seed of the fallback length distribution.
        on_disconnect: "stop", "continue" or "stop-streams" (see module docstring).
        tick_s: emission tick (seconds); tokens due are emitted once per tick.
        first_token_s: extra delay before the first token (prefill), seconds.
        model: model id listed by ``/v1/models`` (any requested model is accepted).
        props: answer llama.cpp's ``GET /props`` (``total_slots``); False: 404.
        probe_fault: what idle probes get (None: a normal 1-token answer), see the module
            docstring; probe_fault_at: "slot" or "arrival"; probe_fault_rate: the share of
            probes that get it (0..1).
        box: None (one serial model), or a :class:`sjf_lab.box.BoxConfig` (or its dict):
            several models on this URL, each with its own runner, loaded and unloaded as
            requests ask (``tokens_per_s`` and ``slots`` are then each model's defaults);
            see :mod:`sjf_lab.box` and docs/boxes.md.
    """

    tokens_per_s: float = 200.0
    slots: int = 1
    trace: str | None = None
    trace_records: list = field(default_factory=list)
    seed: int = 0
    on_disconnect: str = "stop"
    tick_s: float = 0.02
    first_token_s: float = 0.0
    model: str = "emulator"
    props: bool = True
    probe_fault: str | None = None
    probe_fault_at: str = "slot"
    probe_fault_rate: float = 1.0
    box: Any = None

    def __post_init__(self):
        if not self.tokens_per_s > 0:
            raise ValueError("tokens_per_s must be > 0")
        if int(self.slots) < 1:
            raise ValueError("slots must be >= 1")
        if self.on_disconnect not in DISCONNECT_MODES:
            raise ValueError(f"on_disconnect must be one of {DISCONNECT_MODES}, got {self.on_disconnect!r}")
        if not self.tick_s > 0:
            raise ValueError("tick_s must be > 0")
        check_probe_fault(self.probe_fault, self.probe_fault_at, self.probe_fault_rate)
        if self.box is not None:
            from sjf_lab.box.config import BoxConfig

            if not isinstance(self.box, BoxConfig):
                self.box = BoxConfig.from_dict(self.box)


def check_probe_fault(fault: str | None, at: str, rate: float) -> None:
    """Raises ValueError for a probe fault the emulator does not know."""
    if fault is not None and fault not in PROBE_FAULTS:
        raise ValueError(f"probe_fault must be one of {PROBE_FAULTS} or None, got {fault!r}")
    if at not in PROBE_FAULT_AT:
        raise ValueError(f"probe_fault_at must be one of {PROBE_FAULT_AT}, got {at!r}")
    if not 0.0 <= float(rate) <= 1.0:
        raise ValueError(f"probe_fault_rate must be in [0, 1], got {rate!r}")


@dataclass
class _Stats:
    received: int = 0
    in_flight: int = 0  # user requests received and not finished (waiting + generating); probes apart
    max_in_flight: int = 0
    probes: int = 0  # x-sjf-probe requests received
    probes_in_flight: int = 0
    max_probes_in_flight: int = 0
    probe_faults: int = 0  # probes answered with the configured probe fault
    generating: int = 0
    max_generating: int = 0
    waiting: int = 0
    served: int = 0  # full answers generated
    errors: int = 0  # injected HTTP errors
    dropped: int = 0  # injected connection drops
    disconnects: int = 0  # clients that left before their answer was done
    disconnects_queued: int = 0  # ... while waiting in the FIFO
    completion_tokens: int = 0
    bad_requests: int = 0
    embeddings: int = 0  # answered at once, outside the slots
    order: list = field(default_factory=list)


class _Disconnected(Exception):
    pass


# ---- the server ---------------------------------------------------------------------------
class Emulator:
    """The emulator server. One instance serves one port.

    Example::

        emu = Emulator(EmulatorConfig(tokens_per_s=500, trace="trace.jsonl"))
        port = await emu.start()          # binds 127.0.0.1:port (0 = free port)
        ...  # http://127.0.0.1:{port}/v1
        await emu.stop()
    """

    def __init__(self, config: EmulatorConfig | None = None, **kw):
        self.config = config or EmulatorConfig(**kw)
        self.trace = Trace.load(self.config.trace, self.config.seed)
        if self.config.trace_records:
            self.trace.items.update(Trace.from_records(self.config.trace_records, self.config.seed).items)
        self._slots: FifoSlots | None = None
        self.routes = ModelRoutes(self)
        self.box = None
        if self.config.box is not None:
            from sjf_lab.box.scheduler import Box

            self.box = Box(self.config.box, self.config.tokens_per_s, self.config.slots)
        self._stats = _Stats()
        self._peak_in_flight = 0  # since start: reset() keeps it (whole-run "never above slots")
        self._seq = 0
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.host = "127.0.0.1"
        self._t0 = time.monotonic()
        self._hold: asyncio.Event | None = None
        self.held = 0
        self._probe_rng = random.Random(self.config.seed)
        self._started: dict[str, float] = {}  # 12-hex prompt hash -> when a request with it got a slot
        self._start_waiters: dict[str, list[asyncio.Future]] = {}

    # ---- lifecycle ------------------------------------------------------------------------
    def app(self) -> web.Application:
        """The aiohttp application (routes only; no server)."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        r = app.router
        for prefix in ("/v1", ""):
            r.add_post(prefix + "/chat/completions", self._chat)
            r.add_post(prefix + "/completions", self._completions)
            r.add_post(prefix + "/responses", self._responses)
            r.add_post(prefix + "/embeddings", self._embeddings)
            r.add_get(prefix + "/models", self._models)
        for prefix in ("/api/v0",):  # LM Studio's REST API: OpenAI's answers plus ``stats``
            r.add_post(prefix + "/chat/completions", self._chat)
            r.add_post(prefix + "/completions", self._completions)
            r.add_post(prefix + "/embeddings", self._embeddings)
        r.add_post("/api/chat", self._ollama_chat)
        r.add_post("/api/generate", self._ollama_generate)
        r.add_post("/api/embed", self._ollama_embed)
        r.add_post("/api/embeddings", self._ollama_embeddings)
        self.routes.add(r)  # /api/ps, LM Studio's and llama-swap's listings (sjf_lab.box.routes)
        r.add_get("/api/tags", self._ollama_tags)
        r.add_get("/api/version", self._ollama_version)
        r.add_post("/api/show", self._ollama_show)
        r.add_get("/props", self._props)
        r.add_get("/health", self._health)
        r.add_get("/emulator/stats", self._stats_handler)
        r.add_post("/emulator/reset", self._reset_handler)
        r.add_post("/emulator/release", self._release_handler)
        r.add_post("/emulator/probe-fault", self._probe_fault_handler)
        r.add_post("/emulator/wait-start", self._wait_start_handler)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Start serving; returns the bound port (``port=0`` picks a free one)."""
        self._slots = FifoSlots(int(self.config.slots))
        if self.box is not None:
            self.box.preload()
        self._runner = web.AppRunner(self.app(), handler_cancellation=False, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self.host = host
        self.port = site._server.sockets[0].getsockname()[1]
        log.info("emulator on http://%s:%d/v1 (OpenAI API) and http://%s:%d (Ollama API: /api/chat, /api/generate, "
                 "/api/tags) (%s, on_disconnect=%s)", host, self.port, host, self.port, self.serving(),
                 self.config.on_disconnect)
        return self.port

    def serving(self) -> str:
        """What answers, for start-up lines: a box's models (each one's tokens/s, slots and load
        time) and its settings; else the one model's tokens/s and slots (a box does not use them)."""
        if self.box is None:
            return f"{self.config.tokens_per_s:g} tok/s, {self.config.slots} slot(s)"
        c = self.box.config
        return "box: " + ", ".join(
            f"{m.name} ({self.box.speed_of(m):g} tok/s, {self.box.slots_of(m)} slot(s), load {m.load_s:g} s)"
            for m in c.models) + (f"; max_loaded={c.max_loaded}, share={c.share:g}, pending={c.pending}, "
                                  f"keep_alive_s={c.keep_alive_s:g}")

    async def stop(self) -> None:
        """Stop serving and close open connections."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def base_url(self) -> str:
        """``http://host:port/v1`` (after :meth:`start`)."""
        return f"http://{self.host}:{self.port}/v1"

    # ---- stats ----------------------------------------------------------------------------
    def stats(self) -> dict:
        """Counters (a JSON-able dict; see ``GET /emulator/stats``). ``order`` lists the
        requests in the order they got a slot: ``{"seq", "hash" (12 hex of the prompt's
        SHA-256), "id" (x-emulator-request-id header or None), "tokens" (planned),
        "outcome" ("running", "held", "ok", "error", "dropped", "disconnected"),
        "keys" (the request body's top-level field names), "t_in" / "t_start" / "t_out"
        (monotonic seconds at which the request arrived / got a slot / its handler
        returned), "probe" (an ``x-sjf-probe`` request), "sjf_headers" (names of the
        ``x-sjf-*`` request headers it got), "stream", "api" ("chat",
        "completions", "responses", "ollama-chat", "ollama-generate"; in a box also "embeddings",
        "ollama-embed", "ollama-embeddings")}``; in a box each record adds ``model``, ``t_sched``
        (a loaded runner took it), ``load_s`` (seconds it waited for its model's load) and
        ``load`` (it started that load), and ``t_start`` is when it got one of its runner's slots.
        ``peak_in_flight``: the most user requests in flight at once since the emulator
        started; unlike ``max_in_flight`` it survives :meth:`reset`. ``box`` (a box only):
        :meth:`sjf_lab.box.scheduler.Box.stats` (loads, models loaded, per model in flight)."""
        d = asdict(self._stats)
        d["order"] = [dict(o) for o in self._stats.order]
        d.update(held=self.held, peak_in_flight=self._peak_in_flight, slots=self.config.slots, tokens_per_s=self.config.tokens_per_s,
                 on_disconnect=self.config.on_disconnect, trace_size=len(self.trace.items))
        if self.box is not None:
            d["box"] = self.box.stats()
        return d

    def reset(self) -> None:
        """Zero the counters (gauges of requests still open are kept; so is
        ``peak_in_flight``, the high-water mark since start)."""
        s = self._stats
        self._started.clear()
        if self.box is not None:
            self.box.reset()
        self._stats = _Stats(in_flight=s.in_flight, max_in_flight=s.in_flight, probes_in_flight=s.probes_in_flight,
                             max_probes_in_flight=s.probes_in_flight, generating=s.generating,
                             max_generating=s.generating, waiting=s.waiting)

    async def _stats_handler(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _reset_handler(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})

    def release_holds(self) -> int:
        """Let every request held by a ``"hold"`` fault go on; returns how many were held."""
        n = self.held
        if self._hold is not None:
            self._hold.set()
            self._hold = None
        return n

    async def _release_handler(self, request: web.Request) -> web.Response:
        return web.json_response({"released": self.release_holds()})

    def set_probe_fault(self, fault: str | None, at: str = "slot", rate: float = 1.0) -> None:
        """What later idle probes get (module docstring). Raises ValueError."""
        check_probe_fault(fault, at, rate)
        self.config.probe_fault, self.config.probe_fault_at, self.config.probe_fault_rate = fault, at, float(rate)

    async def _probe_fault_handler(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            self.set_probe_fault(body.get("fault"), body.get("at", "slot"), body.get("rate", 1.0))
        except Exception as exc:
            return _error(400, f"bad probe fault: {exc}", "invalid_request_error")
        return web.json_response({"fault": self.config.probe_fault, "at": self.config.probe_fault_at,
                                  "rate": self.config.probe_fault_rate})

    async def wait_start(self, hash12: str, timeout_s: float = 60.0) -> float | None:
        """When a user request with this prompt hash got a slot (monotonic s), waiting for
        it up to ``timeout_s``; None if it did not. Lets a client leave *mid-answer*."""
        if hash12 in self._started:
            return self._started[hash12]
        fut = asyncio.get_running_loop().create_future()
        self._start_waiters.setdefault(hash12, []).append(fut)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            return None
        finally:
            waiters = self._start_waiters.get(hash12, [])
            if fut in waiters:
                waiters.remove(fut)
            if not waiters:
                self._start_waiters.pop(hash12, None)

    def _mark_started(self, hash12: str, t: float) -> None:
        self._started[hash12] = t
        for fut in self._start_waiters.pop(hash12, []):
            if not fut.done():
                fut.set_result(t)

    async def _wait_start_handler(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            t = await self.wait_start(str(body["hash"]), float(body.get("timeout", 60.0)))
        except (KeyError, TypeError, ValueError):
            return _error(400, "body must be {hash, timeout}", "invalid_request_error")
        return web.json_response({"started": t is not None, "t_start": t})

    def _pick_probe_fault(self) -> str | None:
        c = self.config
        if c.probe_fault is None or self._probe_rng.random() >= c.probe_fault_rate:
            return None
        self._stats.probe_faults += 1
        return c.probe_fault

    def _arrive_probe(self) -> str | None:
        """Count an idle probe (apart, so "never more than slots" speaks of user requests);
        returns the probe fault it gets, if any."""
        s = self._stats
        s.probes += 1
        s.probes_in_flight += 1
        s.max_probes_in_flight = max(s.max_probes_in_flight, s.probes_in_flight)
        return self._pick_probe_fault()

    def _arrive_user(self) -> None:
        """Count a user request (``in_flight``, the maxima)."""
        s = self._stats
        s.in_flight += 1
        s.max_in_flight = max(s.max_in_flight, s.in_flight)
        self._peak_in_flight = max(self._peak_in_flight, s.in_flight)

    async def _fail_probe_now(self, request: web.Request, fault: str) -> web.Response:
        """A probe fault at arrival, without a slot (a full queue, a proxy in between)."""
        if fault == "timeout":
            await self._until_gone(request)
            return web.Response(status=499)
        return _error(int(fault), f"emulated probe error {fault}", "server_error")

    async def _until_gone(self, request: web.Request, limit_s: float = 3600.0) -> None:
        """Answer nothing until the client gives up (a hung backend or proxy)."""
        end = time.monotonic() + limit_s
        while not self._gone(request) and time.monotonic() < end:
            await asyncio.sleep(self.config.tick_s)

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": self.routes.openai_models()})

    # ---- endpoints ------------------------------------------------------------------------
    async def _chat(self, request):
        return await self._serve(request, "chat")

    async def _completions(self, request):
        return await self._serve(request, "completions")

    async def _responses(self, request):
        return await self._serve(request, "responses")

    async def _ollama_chat(self, request):
        return await self._serve(request, "ollama-chat")

    async def _ollama_generate(self, request):
        return await self._serve(request, "ollama-generate")

    async def _ollama_tags(self, request: web.Request) -> web.Response:
        if self.box is not None:
            return web.json_response({"models": self.routes.ollama_models()})
        return web.json_response({"models": [{"name": self.config.model, "model": self.config.model,
                                              "modified_at": "2026-01-01T00:00:00Z", "size": 0, "digest": "0" * 64,
                                              "details": {"format": "gguf", "family": "emulator"}}]})

    async def _ollama_version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.0.0-emulator"})

    async def _ollama_show(self, request: web.Request) -> web.Response:
        return web.json_response({"modelfile": "", "parameters": "", "template": "{{ .Prompt }}",
                                  "details": {"format": "gguf", "family": "emulator"}, "model_info": {},
                                  "capabilities": ["completion"]})

    async def _props(self, request: web.Request) -> web.Response:
        if not self.config.props or self.box is not None:  # a box (Ollama, LM Studio) has no /props
            return web.json_response({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}},
                                     status=404)
        return web.json_response({"total_slots": int(self.config.slots), "model_path": self.config.model,
                                  "default_generation_settings": {"n_ctx": 4096}})

    async def _ollama_embed(self, request: web.Request) -> web.StreamResponse:
        return await self._embed_at_once(request, "ollama-embed")

    async def _ollama_embeddings(self, request: web.Request) -> web.StreamResponse:
        return await self._embed_at_once(request, "ollama-embeddings")

    async def _embed_at_once(self, request: web.Request, api: str) -> web.StreamResponse:
        """In a box: through the model's runner like any request; else answered at once."""
        if self.box is not None:
            return await self._serve(request, api)
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError
        except Exception:
            return _error(400, "request body must be a JSON object", "invalid_request_error")
        self._stats.embeddings += 1
        return web.json_response(embedding_answer(api, body, str(body.get("model") or self.config.model)))

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        """Embeddings are answered at once (not queued): 8 deterministic floats per input. In a
        box, they go through the embedding model's runner like any request."""
        if self.box is not None:
            return await self._serve(request, "embeddings")
        try:
            body = await request.json()
            inputs = body.get("input")
        except Exception:
            return _error(400, "request body must be a JSON object", "invalid_request_error")
        inputs = inputs if isinstance(inputs, list) else [inputs]
        data = []
        for i, x in enumerate(inputs):
            d = hashlib.sha256(json.dumps(x).encode()).digest()
            data.append({"object": "embedding", "index": i, "embedding": [b / 255.0 for b in d[:8]]})
        self._stats.embeddings += 1
        return web.json_response({"object": "list", "data": data, "model": str(body.get("model") or self.config.model),
                                  "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}})

    @staticmethod
    def _gone(request: web.Request) -> bool:
        tr = request.transport
        return tr is None or tr.is_closing()

    async def _serve(self, request: web.Request, endpoint: str) -> web.StreamResponse:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError
        except Exception:
            self._stats.bad_requests += 1
            return _error(400, "request body must be a JSON object", "invalid_request_error")
        text = request_text(body, endpoint)
        h = prompt_hash(text)
        item = self.trace.lookup(h)
        fault = request.headers.get(FAULT_HEADER) or item.fault
        cap = _max_tokens(body)
        ollama = endpoint.startswith("ollama")
        n_tokens = item.tokens if cap is None else min(item.tokens, cap)
        finish = "length" if cap is not None and item.tokens > cap else "stop"
        stream = body.get("stream") is not False if ollama else bool(body.get("stream"))
        if endpoint in EMBED_APIS:  # a box's embedding call: its input's tokens, read at the model's speed
            n_tokens, finish, stream = sum(max(1, len(x) // 4) for x in embed_inputs(body)), "stop", False
        lane = self._lane(body, endpoint, probe=PROBE_HEADER in request.headers)
        if isinstance(lane, web.Response):
            return lane
        rid = request.headers.get(REQUEST_ID_HEADER)

        s = self._stats
        s.received += 1
        t_in = time.monotonic()
        rec = None
        probe = PROBE_HEADER in request.headers
        probe_fault = self._arrive_probe() if probe else self._arrive_user()
        fault = probe_fault or fault
        try:
            if probe_fault is not None and self.config.probe_fault_at == "arrival":
                return await self._fail_probe_now(request, probe_fault)
            # ---- wait for a slot (FIFO; in a box: the box's queue, the load, the runner's slots)
            got = await lane.acquire(request, self._wait_queued)
            if got is not True:
                return got
            # ---- holding a slot ---------------------------------------------------------
            s.generating += 1
            s.max_generating = max(s.max_generating, s.generating)
            self._seq += 1
            rec = {"seq": self._seq, "hash": h[:12], "id": rid, "tokens": n_tokens, "outcome": "running",
                   "keys": sorted(body), "t_in": round(t_in, 4), "t_start": round(time.monotonic(), 4),
                   "probe": probe, "stream": stream, "api": endpoint,
                   "sjf_headers": sorted(k.lower() for k in request.headers if k.lower().startswith("x-sjf-"))}
            rec.update(lane.record())
            s.order.append(rec)
            if not probe:
                self._mark_started(rec["hash"], rec["t_start"])
            try:
                return await self._generate(request, endpoint, body, text, n_tokens, finish, stream, fault, rec, lane)
            finally:
                s.generating -= 1
                lane.release()
        finally:
            lane.done()
            if probe:
                s.probes_in_flight -= 1
            else:
                s.in_flight -= 1
            if rec is not None:
                rec["t_out"] = round(time.monotonic(), 4)

    def _lane(self, body: Mapping, endpoint: str, probe: bool = False):
        """The request's lane (:mod:`sjf_lab.box.lane`): the serial slots, or its model's runner
        in the box; an error response for a model the box does not serve."""
        if self.box is None:
            return SerialLane(self._slots, self.config.tokens_per_s)
        spec = self.box.find(body.get("model"))
        if spec is None:
            self._stats.bad_requests += 1
            name = body.get("model")
            if endpoint.startswith("ollama"):
                return web.json_response({"error": f"model '{name}' not found"}, status=404 if name else 400)
            return _error(404, f"The model `{name}` does not exist.", "invalid_request_error")
        return BoxLane(self.box, spec, keep_alive_seconds(body.get("keep_alive")), probe=probe)

    async def _wait_queued(self, request: web.Request, fut: asyncio.Future, withdraw):
        """Wait for ``fut`` (a slot, a runner) while the client stays; True, or 499 after
        ``withdraw()`` when the client left first (``on_disconnect="stop"``)."""
        s = self._stats
        s.waiting += 1
        try:
            while True:
                if self.config.on_disconnect == "stop" and self._gone(request):
                    withdraw()  # hands a slot granted meanwhile on
                    s.disconnects += 1
                    s.disconnects_queued += 1
                    return web.Response(status=499)
                if fut.done():
                    return True
                await asyncio.wait([fut], timeout=self.config.tick_s)
        finally:
            s.waiting -= 1

    async def _generate(self, request, endpoint, body, text, n_tokens, finish, stream, fault, rec, lane):
        s = self._stats
        if fault in ("500", "503", "429", "drop", "timeout"):
            return await self._fail(request, fault, rec)
        if fault == "hold":
            if self._hold is None:
                self._hold = asyncio.Event()
            ev = self._hold
            self.held += 1
            rec["outcome"] = "held"
            waiter = asyncio.ensure_future(ev.wait())
            try:
                while not ev.is_set():
                    if self.config.on_disconnect == "stop" and self._gone(request):
                        return await self._client_gone(request, n_tokens, rec, 0)
                    await asyncio.wait([waiter], timeout=self.config.tick_s)
            finally:
                waiter.cancel()
                self.held -= 1
            rec["outcome"] = "running"
        stop_at = n_tokens // 2 if fault == "drop-mid" else None
        fmt = _Format(endpoint, body, self.config.model, self._seq, prompt_tokens=max(1, len(text) // 4), rec=rec,
                      first_token_s=self.config.first_token_s, lmstudio=request.path.startswith("/api/v0/"))
        resp = None
        if stream:
            ctype = "application/x-ndjson" if endpoint.startswith("ollama") else "text/event-stream"
            resp = web.StreamResponse(headers={"Content-Type": ctype, "Cache-Control": "no-cache"})
            try:
                await resp.prepare(request)
                for ev in fmt.stream_start():
                    await resp.write(ev)
            except (ConnectionError, RuntimeError):
                return await self._client_gone(request, n_tokens, rec, 0)
        produced = 0
        client_here = True
        t_start = time.monotonic() + self.config.first_token_s
        if self.config.first_token_s > 0:
            await asyncio.sleep(self.config.first_token_s)
        pace = lane.pace(t_start)  # tokens due over time: constant, or the box's shared speed
        try:
            while produced < n_tokens:
                due = min(n_tokens, pace.due(time.monotonic()))
                if stop_at is not None and due >= stop_at:
                    due = max(stop_at, produced)
                if due > produced:
                    chunk = _words(produced, due)
                    produced = due
                    if stream and client_here:
                        try:
                            if self._gone(request):
                                raise ConnectionResetError
                            await resp.write(fmt.stream_delta(chunk))
                        except (ConnectionError, RuntimeError):
                            client_here = False
                if client_here and not stream and self._gone(request):
                    client_here = False
                if stop_at is not None and produced >= stop_at:
                    rec["outcome"] = "dropped"
                    s.dropped += 1
                    s.completion_tokens += produced
                    _abort(request)
                    return resp if resp is not None else web.Response(status=500)
                if not client_here:
                    mode = self.config.on_disconnect
                    if mode == "stop" or (mode == "stop-streams" and stream):
                        return await self._client_gone(request, n_tokens, rec, produced, resp)
                if produced < n_tokens:
                    await asyncio.sleep(self.config.tick_s)
        finally:
            pace.close()
        s.completion_tokens += produced
        if not client_here:
            return await self._client_gone(request, n_tokens, rec, produced, resp, finished=True)
        rec["outcome"] = "ok"
        s.served += 1
        if stream:
            try:
                for ev in fmt.stream_end(n_tokens, finish):
                    await resp.write(ev)
                await resp.write_eof()
            except (ConnectionError, RuntimeError):
                rec["outcome"] = "disconnected"
                s.disconnects += 1
            return resp
        return web.json_response(fmt.full(_words(0, n_tokens), n_tokens, finish))

    async def _fail(self, request, fault: str, rec: dict):
        """A fault once the request holds its slot: an HTTP error, a dropped connection, or
        no answer until the client gives up."""
        s = self._stats
        if fault == "drop":
            rec["outcome"] = "dropped"
            s.dropped += 1
            _abort(request)
            return web.Response(status=500)  # never reaches the client
        if fault == "timeout":
            await self._until_gone(request)
            return await self._client_gone(request, 0, rec, 0)
        rec["outcome"] = "error"
        s.errors += 1
        return _error(int(fault), f"emulated backend error {fault}", "server_error")

    async def _client_gone(self, request, n_tokens, rec, produced, resp=None, finished=False):
        s = self._stats
        rec["outcome"] = "disconnected"
        s.disconnects += 1
        if not finished:
            s.completion_tokens += produced
        else:
            s.served += 1  # continue mode: the whole answer was generated for nobody
        return resp if resp is not None else web.Response(status=499)


# ---- formatting helpers ---------------------------------------------------------------------
def _max_tokens(body: Mapping) -> int | None:
    """The answer cap: ``max_completion_tokens`` / ``max_tokens`` / ``max_output_tokens``,
    or Ollama's ``options.num_predict`` (negative: no cap, as in Ollama)."""
    opts = body.get("options")
    cands = [body.get(k) for k in ("max_completion_tokens", "max_tokens", "max_output_tokens")]
    if isinstance(opts, Mapping):
        cands.append(opts.get("num_predict"))
    for v in cands:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
            return int(v)
    return None


def max_overlap(records: Iterable[Mapping[str, Any]], probes: bool = False) -> int:
    """The most requests the backend held at once, from ``stats()["order"]`` records
    (intervals ``[t_in, t_out]``; requests still open count up to now). Probe requests
    (``probe: true``) are left out unless ``probes``."""
    events = []
    now = time.monotonic()
    for r in records:
        if r.get("probe") and not probes:
            continue
        events.append((float(r["t_in"]), 1))
        events.append((float(r.get("t_out", now)), -1))
    events.sort(key=lambda e: (e[0], e[1]))  # an end at the same instant as a start goes first
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def idle_gaps(records: Iterable[Mapping[str, Any]]) -> list[tuple[int, float]]:
    """For each user request (probes left out) that arrived after every earlier one had
    ended: ``(seq, seconds the backend held none of them before it arrived)``. Sorted by
    arrival."""
    rs = sorted((r for r in records if not r.get("probe")), key=lambda r: float(r["t_in"]))
    out = []
    last_end = None
    for r in rs:
        t_in = float(r["t_in"])
        if last_end is not None and t_in >= last_end:
            out.append((int(r["seq"]), t_in - last_end))
        end = float(r.get("t_out", math.inf))
        last_end = end if last_end is None else max(last_end, end)
    return out


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status)


def _abort(request: web.Request) -> None:
    tr = request.transport
    if tr is not None:
        tr.abort()



# ---- running it from synchronous code ------------------------------------------------------
class EmulatorThread:
    """An :class:`Emulator` on its own event loop in a daemon thread (for sync code and
    module-scoped test fixtures). Use as a context manager or call :meth:`stop`.

    Attributes:
        emulator: the running :class:`Emulator`.
        port: the bound port.
        base_url: ``http://127.0.0.1:port/v1``.
    """

    def __init__(self, config: EmulatorConfig | None = None, host: str = "127.0.0.1", port: int = 0, **kw):
        self.emulator = Emulator(config, **kw)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sjf-emulator", daemon=True)
        self._thread.start()
        try:
            self.port = asyncio.run_coroutine_threadsafe(self.emulator.start(host, port), self._loop).result(30)
        except BaseException:
            self.stop()
            raise
        self.base_url = self.emulator.base_url

    def stats(self) -> dict:
        """A snapshot of the emulator's counters (taken on its loop)."""
        return self.call(self.emulator.stats)

    def reset(self) -> None:
        """Zero the emulator's counters."""
        self.call(self.emulator.reset)

    def release_holds(self) -> int:
        """Let requests held by a ``"hold"`` fault go on (see :meth:`Emulator.release_holds`)."""
        return self.call(self.emulator.release_holds)

    def unload_all(self) -> int:
        """A box: unload every model (busy ones when their requests end); returns how many
        were unloaded at once (0 without a box)."""
        box = self.emulator.box
        return self.call(box.unload_all) if box is not None else 0

    def set_probe_fault(self, fault: str | None, at: str = "slot", rate: float = 1.0) -> None:
        """What later idle probes get (see :meth:`Emulator.set_probe_fault`)."""
        self.call(self.emulator.set_probe_fault, fault, at, rate)

    def call(self, fn, *args):
        """Run a plain function on the emulator's loop and return its result."""
        async def _run():
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(_run(), self._loop).result(30)

    def stop(self) -> None:
        """Stop the server and the thread (idempotent)."""
        if self._loop.is_closed():
            return
        if self._loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(self.emulator.stop(), self._loop).result(30)
            except Exception:
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
        self._loop.close()

    def __enter__(self) -> "EmulatorThread":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_in_thread(config: EmulatorConfig | None = None, **kw) -> EmulatorThread:
    """Start an emulator in a background thread; returns the :class:`EmulatorThread`."""
    return EmulatorThread(config, **kw)


__all__ = ["Emulator", "EmulatorConfig", "EmulatorThread", "Trace", "TraceItem", "prompt_hash", "short_hash",
           "max_overlap", "idle_gaps", "PROBE_HEADER",
           "request_text", "start_in_thread", "FAULTS", "FAULT_HEADER", "REQUEST_ID_HEADER", "DISCONNECT_MODES",
           "PROBE_FAULTS", "PROBE_FAULT_AT"]
