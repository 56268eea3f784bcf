"""Wait until a serial backend is really idle: one tiny probe request per backend.

Contract:

* :func:`probe_gate(backend_key) <probe_gate>` returns the process's one
  :class:`ProbeGate` for that backend (keys are normalised with
  :func:`sjf_core.settings.normalise`, as :func:`sjf_core.backend_key` does, so ``localhost``
  and ``127.0.0.1`` share one).
* ``await gate.wait_idle(send, timeout_s) -> bool``: sends one probe through ``send``
  (an async callable with no arguments that performs the probe request and raises on
  failure) unless one is already in flight for this backend, in which case the caller
  shares that probe's result. **True**: the probe call returned, so a FIFO backend has
  finished everything that was ahead of it (an orphaned answer included). **False**: the
  probe raised or did not return within ``timeout_s`` seconds; the caller falls back to
  an estimate and retries (:mod:`sjf_core.admission._orphan_hold`; ``retry=True`` marks a
  retry: counted as ``retry``, its failure logged at DEBUG). Never raises (cancellation of
  the caller excepted; the probe itself then goes on for the callers that share it).
* At most one probe is in flight per backend and process, whichever event loop or
  thread asks (the shared result is a :class:`concurrent.futures.Future`).
* Counters per gate (``sent``, ``ok``, ``timeout``, ``error``, ``unreachable``, ``shared``,
  ``retry``: probes sent again after a failure, ``estimate``: slots released by the
  estimate after failed probes) in
  :attr:`ProbeGate.counters` and :func:`probe_stats`; each is also counted in the
  Prometheus family ``sjf_backend_probes_total{backend, outcome}``: the metrics room
  (:func:`sjf_core.ext._metrics.count_probe`) is told of each outcome through
  :func:`watch_probes`, so this room never calls up into it.

Why a probe and not an estimate: after a client leaves mid-answer some backends stop
generating (llama.cpp's server for streams) and others keep going (llama-cpp-python for
non-streamed calls, Ollama until its next token). A serial server answers a request only
after what is ahead of it, so the return of a 1-token request of our own is a
measurement of "the backend is free", whatever the backend. The probe never carries a
user's prompt: :func:`http_probe` sends a fixed one-character prompt capped at one
answer token (``max_tokens: 1``, or Ollama's ``options.num_predict: 1``), marked with
the :data:`PROBE_HEADER` header.

Limit: with ``slots > 1`` a probe's return proves that *one* slot is free, not all of
them; exact only for serial (``slots: 1``) backends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from typing import Any, Awaitable, Callable, Mapping

from sjf_core._faults import note_fault
from sjf_core.settings import backend_label, normalise

log = logging.getLogger("sjf_core.admission._probe")

#: Header that marks our probe requests (a backend or emulator may count them apart).
PROBE_HEADER = "x-sjf-probe"
#: The probe's prompt: fixed, one character, never a user's text.
PROBE_PROMPT = "."
OUTCOMES = ("sent", "ok", "timeout", "error", "unreachable", "shared", "retry", "estimate")

__all__ = ["ProbeGate", "probe_gate", "probe_stats", "watch_probes", "http_probe", "probe_request", "PROBE_HEADER",
           "PROBE_PROMPT"]


class ProbeGate:
    """The single probe of one backend (see the module contract). Thread-safe."""

    def __init__(self, key: str):
        self.key = key
        self._lock = threading.Lock()
        self._inflight: concurrent.futures.Future | None = None
        self.counters = dict.fromkeys(OUTCOMES, 0)
        self._tasks: set[asyncio.Task] = set()

    @property
    def in_flight(self) -> bool:
        """True while a probe of this backend is outstanding."""
        f = self._inflight
        return f is not None and not f.done()

    def _count(self, outcome: str) -> None:
        with self._lock:
            self.counters[outcome] += 1
        for watcher in list(_watchers):
            try:
                watcher(self.key, outcome)
            except Exception:  # a metric failed: the counters above still count
                note_fault(log, "probe metric not recorded", level=logging.DEBUG)

    def count_estimate(self) -> None:
        """Count a slot released by the estimate after failed probes."""
        self._count("estimate")

    async def wait_idle(self, send: Callable[[], Awaitable[Any]], timeout_s: float, retry: bool = False) -> bool:
        """True once a probe sent after this call's start (or shared with a concurrent
        caller) returned; False on its error or after ``timeout_s`` seconds. ``retry``:
        this probe follows a failed one (counted as ``retry``, its failure logged at DEBUG)."""
        with self._lock:
            fut = self._inflight
            owner = fut is None or fut.done()
            if owner:
                fut = self._inflight = concurrent.futures.Future()
                fut.set_running_or_notify_cancel()  # no caller can cancel the shared result
        if owner:
            self._count("retry" if retry else "sent")
            task = asyncio.get_running_loop().create_task(self._run(send, float(timeout_s), fut, retry))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._count("shared")
        try:
            shared = asyncio.shield(asyncio.wrap_future(fut))
            if owner:  # _run settles the result within timeout_s
                return bool(await shared)
            return bool(await asyncio.wait_for(shared, max(0.0, float(timeout_s))))
        except asyncio.TimeoutError:
            return False
        except asyncio.CancelledError:
            raise
        except Exception:  # the probe's own outcome is counted by _run; a waiter's error only here
            note_fault(log, f"waiting for the idle probe of backend {_label(self.key)} failed; no probe result")
            return False

    async def _run(self, send, timeout_s: float, fut: concurrent.futures.Future, retry: bool = False) -> None:
        ok = False
        say = log.debug if retry else log.warning
        try:
            await asyncio.wait_for(send(), timeout_s)
            ok = True
            self._count("ok")
        except asyncio.TimeoutError:
            self._count("timeout")
            say("idle probe of %s timed out after %.1f s; the slot is held for the orphan's estimated rest "
                "while the probe is retried", _label(self.key), timeout_s)
        except asyncio.CancelledError:
            self._count("error")
            raise
        except Exception as exc:
            if could_not_connect(exc):
                # nothing answers at that address: no request of ours can be running there,
                # and holding the slot would only stall the queue until the lease expires
                ok = True
                self._count("unreachable")
                log.warning("idle probe of %s could not connect (%s); the backend runs nothing of "
                            "ours, releasing the slot", _label(self.key), type(exc).__name__)
            else:
                self._count("error")
                say("idle probe of %s failed (%s%s); the slot is held for the orphan's estimated rest while the "
                    "probe is retried", _label(self.key), type(exc).__name__, _status_of(exc))
        finally:
            with self._lock:
                if self._inflight is fut:
                    self._inflight = None
            if not fut.done():
                fut.set_result(ok)


def _status_of(exc: BaseException) -> str:
    """`` HTTP <status>`` of an HTTP error answer, else ""."""
    code = getattr(getattr(exc, "response", None), "status_code", None)
    if code is None and exc.args and isinstance(exc.args[0], int):
        code = exc.args[0]
    return f" HTTP {code}" if isinstance(code, int) else ""


def could_not_connect(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it was raised from) says that no connection to the
    backend could be made: httpx / httpx2 ``ConnectError``, or ``ConnectionRefusedError``.
    Such a backend cannot be generating anything of ours."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, ConnectionRefusedError) or any(c.__name__ == "ConnectError" for c in type(exc).__mro__):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _label(key: str) -> str:
    return backend_label(key)  # never raises


_gates: dict[str, ProbeGate] = {}
_gates_lock = threading.Lock()
#: Who is told of every counted outcome (:func:`watch_probes`).
_watchers: list[Callable[[str, str], None]] = []


def watch_probes(fn: Callable[[str, str], None]) -> None:
    """Call ``fn(backend_key, outcome)`` on every outcome a gate counts, from now on (once
    per ``fn``; an ``fn`` that raises is logged at DEBUG, the gate's counters still count).
    The metrics room's :func:`~sjf_core.ext._metrics.install_default_metrics` adds its counter."""
    with _gates_lock:
        if fn not in _watchers:
            _watchers.append(fn)


def probe_gate(backend_key: str) -> ProbeGate:
    """The process's one :class:`ProbeGate` for a backend (key normalised)."""
    key = normalise(backend_key or "default")
    with _gates_lock:
        gate = _gates.get(key)
        if gate is None:
            gate = _gates[key] = ProbeGate(key)
        return gate


def probe_stats() -> dict[str, dict[str, int]]:
    """Counters of every gate made so far: ``{backend key: {outcome: count}}``."""
    with _gates_lock:
        gates = list(_gates.values())
    return {g.key: dict(g.counters) for g in gates}


def probe_request(api_base: str, api: str = "openai", model: str | None = None) -> tuple[str, dict]:
    """The URL and JSON body of a probe: ``(url, body)``.

    Args:
        api_base: the deployment's base URL as the client uses it (OpenAI-compatible:
            the part before ``/chat/completions``; Ollama: the server root).
        api: ``"openai"`` (POST ``/chat/completions``, ``max_tokens: 1``) or
            ``"ollama"`` (POST ``/api/generate``, ``options.num_predict: 1``, no stream).
        model: the backend's model name (None: omitted for OpenAI-compatible servers that
            need none; Ollama needs one).

    Raises:
        ValueError: an unknown ``api``.
    """
    base = str(api_base).rstrip("/")
    if api == "ollama":
        if base.endswith("/v1"):
            base = base[:-3]
        body: dict = {"prompt": PROBE_PROMPT, "stream": False, "options": {"num_predict": 1}}
        if model:
            body["model"] = model
        return base + "/api/generate", body
    if api != "openai":
        raise ValueError(f"probe api must be 'openai' or 'ollama', got {api!r}")
    body = {"messages": [{"role": "user", "content": PROBE_PROMPT}], "max_tokens": 1, "stream": False}
    if model:
        body["model"] = model
    return base + "/chat/completions", body


def http_probe(api_base: str, api: str = "openai", model: str | None = None,
               headers: Mapping[str, str] | None = None, timeout_s: float = 600.0) -> Callable[[], Awaitable[None]]:
    """An async ``send`` for :meth:`ProbeGate.wait_idle` that POSTs :func:`probe_request`
    with httpx (its own client, nothing shared with user traffic). The returned callable
    raises ``httpx.HTTPError`` on a transport error or a non-2xx answer.

    Args:
        headers: credentials of the deployment (e.g. ``Authorization``); the
            :data:`PROBE_HEADER` is added.
        timeout_s: read timeout of the HTTP call (the gate's own timeout also applies).
    """
    url, body = probe_request(api_base, api, model)
    hdrs = {**dict(headers or {}), PROBE_HEADER: "1"}

    async def send() -> None:
        import httpx

        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=10.0), trust_env=False) as c:
            r = await c.post(url, json=body, headers=hdrs)
            r.raise_for_status()

    return send
