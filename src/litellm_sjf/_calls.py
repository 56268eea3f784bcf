"""The call registry: what the plugin remembers about each LiteLLM request, and its release.

* :class:`Call` — one request attempt's record (no prompt text): its prediction, arrival,
  ticket, backend key and disconnect state.
* :class:`CallRegistry` — calls by ``litellm_call_id`` (a list: a client may reuse an id)
  and by the identity of the request's ``proxy_server_request`` (a fallback re-runs the
  same HTTP request under a new id). :meth:`~CallRegistry.find` never raises on any
  input; :meth:`~CallRegistry.release` frees a slot at most once (tickets are
  idempotent) and counts it; :meth:`~CallRegistry.spawn` keeps background tasks alive.

All methods run on the proxy's event loop thread; :meth:`~CallRegistry.snapshot` may be
read from another thread (the status server).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Mapping

from ._fail_open import log_fault
from ._stats import HandlerStats, TokenRates

#: an unadmitted call record older than this is forgotten, seconds
STALE_S = 900.0
#: a finished call is forgotten this long after its release, seconds
FINISHED_KEEP_S = 60.0
#: at most one prune per this many seconds
PRUNE_EVERY_S = 30.0


class Call:
    """What the plugin remembers about one request attempt (no prompt text)."""

    __slots__ = ("cid", "psr_id", "endpoint", "prediction", "arrival", "created", "meta_body", "headers", "stream",
                 "ticket", "backend", "acquired_wall", "draining", "done", "released_at", "probe", "orphaned",
                 "probe_task", "api_key", "team", "fault", "group", "deployment", "tenant_label")

    def __init__(self, cid: str, psr_id: int, endpoint: str, prediction: Any, meta_body: dict,
                 headers: dict | None, stream: bool):
        self.cid = cid
        self.psr_id = psr_id
        self.endpoint = endpoint
        self.prediction = prediction
        self.arrival = time.monotonic()
        self.created = self.arrival
        self.meta_body = meta_body
        self.headers = headers
        self.stream = stream
        self.ticket = None
        self.backend: str | None = None
        self.acquired_wall: float | None = None  # time.time() when its slot was granted
        self.draining = False  # a drain or an idle probe owns the release
        self.done = False
        self.released_at: float | None = None
        self.probe = None  # ProbeTarget of the deployment it runs on
        self.orphaned = False  # a stream whose client left: the idle probe releases it
        self.probe_task: asyncio.Task | None = None
        self.api_key = None
        self.team = None
        self.fault: BaseException | None = None  # a pre-call fault: admitted through the gate
        self.group: str | None = None  # LiteLLM's model group, once routed (the operator's view)
        self.deployment: str | None = None  # the deployment's model, e.g. "ollama_chat/llama3"
        self.tenant_label: str | None = None  # the key's alias or user id (litellm_sjf._labels)

    @property
    def running(self) -> bool:
        """True while its ticket holds a slot."""
        t = self.ticket
        return t is not None and t.running


def usage_tokens(obj: Any) -> int | None:
    """Answer tokens from a response's or a chunk's ``usage`` (``completion_tokens`` or
    ``output_tokens``, also under a responses-API event's ``response``); None if absent."""
    usage = getattr(obj, "usage", None)
    if usage is None and isinstance(obj, Mapping):
        usage = obj.get("usage")
    if usage is None:
        resp = getattr(obj, "response", None)  # responses API stream events
        usage = getattr(resp, "usage", None) if resp is not None else None
    if usage is None:
        return None
    return _answer_tokens(usage)


def _answer_tokens(usage: Any, least: int = 0) -> int | None:
    for name in ("completion_tokens", "output_tokens"):
        v = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
        if isinstance(v, int) and not isinstance(v, bool) and v >= least:
            return v
    return None


def stream_chunk_tokens(chunk: Any) -> int | None:
    """Answer tokens carried by one chunk of a LiteLLM stream: its ``usage`` (the client asked
    for ``stream_options.include_usage``, or the provider always sends it), else the usage
    LiteLLM puts in the last chunk's ``_hidden_params`` when the client did not ask.

    The hidden usage is how an Ollama stream (``ollama_chat/``, ``ollama/``) reports its
    ``eval_count``: LiteLLM keeps the done line's counts out of the chunks the client sees and
    sums the provider's usage into the last chunk's hidden params when it yields it. Read it
    then, not later: after the stream ends LiteLLM may overwrite it with its own token count of
    the text. A hidden count of 0 is LiteLLM's sum over no provider usage, so it means unknown.
    None when neither is there."""
    n = usage_tokens(chunk)
    if n is not None:
        return n
    hidden = getattr(chunk, "_hidden_params", None)
    usage = hidden.get("usage") if isinstance(hidden, Mapping) else None
    return None if usage is None else _answer_tokens(usage, least=1)


class CallRegistry:
    """Live calls, their release, and the background tasks working for them."""

    def __init__(self, stats: HandlerStats, rates: TokenRates):
        self.stats = stats
        self.rates = rates
        self._calls: dict[str, list[Call]] = {}
        self._by_psr: dict[int, Call] = {}  # id(proxy_server_request) -> live call
        self._tasks: set[asyncio.Task] = set()
        self._last_prune = time.monotonic()

    # ---- lookup -------------------------------------------------------------------------
    def add(self, call: Call, has_psr: bool) -> None:
        """Remember ``call`` (counted as a duplicate when its call id is already known)."""
        calls = self._calls.setdefault(call.cid, [])
        if calls:
            self.stats.duplicate_call_ids += 1
        calls.append(call)
        if has_psr:
            self._by_psr[call.psr_id] = call

    def find(self, data: Any) -> Call | None:
        """The call of a hook's ``data``/``kwargs`` (by call id, then by request identity)."""
        if not isinstance(data, Mapping):
            return None
        cid = data.get("litellm_call_id")
        calls = self._calls.get(cid) if isinstance(cid, str) else None
        if not calls:
            return None
        psr_id = id(data.get("proxy_server_request"))
        for c in calls:
            if c.psr_id == psr_id:
                return c
        return calls[0] if len(calls) == 1 else None

    def by_request(self, psr_id: int) -> Call | None:
        """The live call of one HTTP request (``id(proxy_server_request)``)."""
        return self._by_psr.get(psr_id)

    def with_id(self, cid: Any) -> list[Call]:
        """The calls under one call id (a copy; ``[]`` for anything but a known str)."""
        return list(self._calls.get(cid, ())) if isinstance(cid, str) else []

    def forget(self, call: Call) -> None:
        """Drop ``call`` from the registry (marks it done; its slot is not touched)."""
        call.done = True
        if self._by_psr.get(call.psr_id) is call:
            del self._by_psr[call.psr_id]
        calls = self._calls.get(call.cid)
        if calls is not None:
            try:
                calls.remove(call)
            except ValueError:
                pass
            if not calls:
                self._calls.pop(call.cid, None)

    # ---- release ------------------------------------------------------------------------
    def release(self, call: Call, answer_tokens: int | None, reason: str, forget: bool = True) -> bool:
        """Release the call's slot (idempotent; counted as ``released_<reason>``); forget
        the call unless ``forget`` is False (the attempt ended but the request may be
        re-run, e.g. on a fallback deployment). True if a slot was freed."""
        t = call.ticket
        freed = False
        if t is not None:
            was_running = t.running
            try:
                freed = bool(t.release(answer_tokens))
            except Exception:
                self.stats.fail_open += 1
                log_fault("ticket release failed; the lease will free the slot")
            if freed and was_running:
                self.stats.count_release(reason)
                if answer_tokens and call.backend is not None:
                    self.rates.observe(call.backend, answer_tokens, time.monotonic() - t.entry.dispatched_at)
        call.released_at = time.monotonic()
        if forget:
            self.forget(call)
        return freed

    def prune(self) -> None:
        """Forget stale unadmitted records and finished calls (at most every 30 s)."""
        now = time.monotonic()
        if now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        for calls in list(self._calls.values()):
            for c in list(calls):
                t = c.ticket
                stale = t is None and now - c.created > STALE_S
                finished = (t is not None and t.finished and not c.draining
                            and now - (c.released_at or c.created) > FINISHED_KEEP_S)
                if stale or finished:
                    self.forget(c)

    # ---- background tasks ---------------------------------------------------------------
    def spawn(self, coro) -> asyncio.Task:
        """Run ``coro`` as a task on the running loop, referenced until it ends."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- status -------------------------------------------------------------------------
    def live(self) -> list[Call]:
        """Every call remembered now (a copy)."""
        return [c for cs in list(self._calls.values()) for c in list(cs)]

    def snapshot(self) -> tuple[int, int]:
        """``(tracked calls, calls draining)``."""
        calls = [c for cs in list(self._calls.values()) for c in list(cs)]
        return len(calls), sum(1 for c in calls if c.draining)
