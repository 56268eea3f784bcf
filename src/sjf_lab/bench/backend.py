"""Backends the bench drives: the project's emulator, or any OpenAI-compatible server.

:class:`EmulatorBackend` runs :class:`sjf_lab.emulator.Emulator` on its own event
loop in a thread of the bench process and records, per request, when the emulator
started and finished serving it (``time.monotonic()``, the bench's own clock). That
is the **dispatch** time of the queue-wait metric. A real server cannot tell, so
:class:`ExternalBackend` leaves queue wait unobserved (NaN) and the bench reports
TTFT and end-to-end latency only.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Sequence

from sjf_lab.emulator import Emulator, EmulatorConfig, EmulatorThread, short_hash
from sjf_lab.bench.stats import RequestRecord
from sjf_lab.bench.workload import Job, ServiceModel


#: The prompt of the bench's own "hold" request: the emulator takes its slot and waits for
#: :meth:`EmulatorBackend.release_holds` (trace fault "hold"), so a burst can be queued whole
#: behind a busy backend before any of it is served.
HOLD_PROMPT = "sjf bench: hold the backend until the burst is queued"


class TimedEmulator(Emulator):
    """The emulator, plus service start/end times in each ``stats()["order"]`` item
    (keys ``t_start``, ``t_end``: seconds on ``time.monotonic()``)."""

    async def _generate(self, *args, **kw):
        rec = kw.get("rec", args[-1] if args else None)
        if isinstance(rec, dict):
            rec["t_start"] = time.monotonic()
        try:
            return await super()._generate(*args, **kw)
        finally:
            if isinstance(rec, dict):
                rec["t_end"] = time.monotonic()


class _TimedEmulatorThread(EmulatorThread):
    def __init__(self, config: EmulatorConfig):
        # EmulatorThread builds an Emulator; build ours instead, same lifecycle.
        import asyncio
        import threading

        self.emulator = TimedEmulator(config)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sjf-bench-emulator", daemon=True)
        self._thread.start()
        try:
            self.port = asyncio.run_coroutine_threadsafe(self.emulator.start("127.0.0.1", 0), self._loop).result(30)
        except BaseException:
            self.stop()
            raise
        self.base_url = self.emulator.base_url


@dataclass
class EmulatorBackend:
    """The serial backend emulator, serving the workload's recorded answer lengths.

    Args:
        jobs: every job any policy will send (their prompts and lengths form the trace).
        tokens_per_s: generation rate (tokens/s).
        first_token_s: fixed delay before the first token (prefill), seconds.
        slots: concurrent generations (1 = serial).
        on_disconnect: "stop" or "continue" (see :mod:`sjf_lab.emulator`).
        tick_s: token emission tick of the emulator, seconds (service times are
            rounded up to it; keep it well below the shortest service time).
    """

    jobs: Sequence[Job]
    tokens_per_s: float = 1000.0
    first_token_s: float = 0.0
    slots: int = 1
    on_disconnect: str = "stop"
    model: str = "emulator"
    tick_s: float = 0.01

    def __post_init__(self):
        cfg = EmulatorConfig(tokens_per_s=self.tokens_per_s, slots=self.slots, on_disconnect=self.on_disconnect,
                             first_token_s=self.first_token_s, model=self.model, tick_s=self.tick_s,
                             trace_records=[{"prompt": j.prompt, "answer_tokens": int(j.tokens)} for j in self.jobs]
                             + [{"prompt": HOLD_PROMPT, "answer_tokens": 1, "fault": "hold"}])
        self._thread = _TimedEmulatorThread(cfg)
        self.base_url = self._thread.base_url
        self.observes_dispatch = True

    @property
    def service(self) -> ServiceModel:
        """The exact service-time model of this emulator."""
        return ServiceModel(self.tokens_per_s, self.first_token_s)

    def describe(self) -> str:
        return (f"emulator ({self.tokens_per_s:g} tokens/s, tick {self.tick_s * 1000:g} ms, first token "
                f"+{self.first_token_s * 1000:g} ms, {self.slots} slot(s), FIFO inside)")

    def reset(self) -> None:
        """Forget the served-order log and counters (between policies)."""
        self._thread.reset()

    def stats(self) -> dict:
        return self._thread.stats()

    def held(self) -> int:
        """Requests the emulator holds (the bench's hold request, see :data:`HOLD_PROMPT`)."""
        return int(self._thread.stats().get("held", 0))

    def release_holds(self) -> int:
        """Let the held request go on; returns how many were held."""
        return self._thread.release_holds()

    def annotate(self, jobs: Sequence[Job], records: Sequence[RequestRecord]) -> dict:
        """Fill each record's ``dispatch`` from the emulator's log (matched by prompt hash),
        and use the trace length as the true length when the response had no usage.

        Returns the emulator counters (``max_generating`` is the concurrency bound check).
        """
        st = self.stats()
        starts = {}
        for o in st.get("order", []):
            if "t_start" in o:
                starts.setdefault(o["hash"], o["t_start"])
        by_idx = {j.idx: j for j in jobs}
        for r in records:
            j = by_idx.get(r.idx)
            if j is None:
                continue
            r.dispatch = starts.get(short_hash(j.prompt), math.nan)
            if r.ok and r.true_tokens < 0:
                r.true_tokens = j.tokens
        return {k: v for k, v in st.items() if k != "order"}

    def close(self) -> None:
        self._thread.stop()


def infer_serial_dispatch(records: Sequence[RequestRecord]) -> None:
    """Set ``dispatch`` of completed records on a serial server: in completion order, a
    request started when it was submitted or when the previous one ended, whichever is
    later (exact for a work-conserving one-slot server; an admission gap of a few ms
    between two requests is counted as service)."""
    done = sorted((r for r in records if r.ok and math.isfinite(r.end)), key=lambda r: r.end)
    prev_end = -math.inf
    for r in done:
        r.dispatch = max(r.submit, prev_end)
        prev_end = r.end


@dataclass
class ExternalBackend:
    """A user's OpenAI-compatible server (llama.cpp, Ollama, LM Studio, vLLM ...).

    Args:
        base_url: e.g. ``http://127.0.0.1:8080/v1`` (Ollama: ``http://127.0.0.1:11434/v1``).
        model: model name the server expects.
        api_key: bearer key, if the server wants one.
        tokens_from_chunks: count answer tokens as streamed deltas (True) rather than
            trusting ``usage`` (which a proxy may estimate).
        serial: the server runs one request at a time (llama.cpp's server, Ollama with
            ``OLLAMA_NUM_PARALLEL=1``). Then each request's service start is inferred as
            ``max(its submit, the previous completion)`` in completion order, which gives
            queue wait and service time; with False they stay unobserved (NaN).
    """

    base_url: str
    model: str = "default"
    api_key: str | None = None
    tokens_from_chunks: bool = True
    serial: bool = True

    def __post_init__(self):
        self.base_url = self.base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.observes_dispatch = False

    def describe(self) -> str:
        return f"external server {self.base_url} (model {self.model}" + (", serial)" if self.serial else ")")

    def reset(self) -> None:
        pass

    def annotate(self, jobs, records) -> dict:
        """True lengths from the stream: one content delta per token (llama.cpp, Ollama stream
        token by token; a proxy in between may only estimate ``usage``)."""
        if self.tokens_from_chunks:
            for r in records:
                if r.ok and r.chunks > 0:
                    r.true_tokens = r.chunks
        if self.serial:
            infer_serial_dispatch(records)
        return {"dispatch": "inferred (serial server)" if self.serial else "unobserved"}

    def close(self) -> None:
        pass
