"""Benchmark clients: send one job, time it, and drive a whole workload.

Two senders share one contract (``await sender(job) -> RequestRecord``, timestamps
on ``time.monotonic()``):

* :class:`HttpSender`: raw streaming ``POST /v1/chat/completions`` with httpx, for
  the LiteLLM proxy and for a backend called directly;
* :class:`OpenAISender`: the real ``openai.AsyncOpenAI`` SDK (plain or wrapped by
  ``openai_sjf.wrap``), streaming.

Both stream (``stream: true`` with ``stream_options.include_usage``), so TTFT is the
first non-empty content delta and the answer length is ``usage.completion_tokens``
when the server reports it, else the number of content deltas.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from typing import Any, Awaitable, Callable, Mapping, Sequence

from sjf_lab.bench.stats import RequestRecord
from sjf_lab.bench.workload import Job

Sender = Callable[[Job], Awaitable[RequestRecord]]


def chat_body(job: Job, model: str, extra: Mapping[str, Any] | None = None) -> dict:
    """The request body of ``job``: one user message, streamed, with usage."""
    body = {"model": model, "messages": [{"role": "user", "content": job.prompt}], "stream": True,
            "stream_options": {"include_usage": True}, "temperature": 0}
    if job.max_tokens is not None:
        body["max_tokens"] = int(job.max_tokens)
    if extra:
        body.update(extra)
    return body


def _short_error(exc: BaseException) -> str:
    # Exception text can quote a request; keep only the type and the first line, capped.
    msg = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {msg}"[:160]


class HttpSender:
    """Streams chat completions over HTTP with httpx.

    Args:
        base_url: e.g. ``http://127.0.0.1:4000/v1`` (``/chat/completions`` is appended).
        model: the ``model`` field.
        api_key: sent as ``Authorization: Bearer``, or None.
        extra_body: ``job -> dict`` of extra body fields (e.g. LiteLLM's ``priority``), or None.
        timeout_s: per-request timeout, seconds.
        max_connections: connection pool size (at least the largest burst).
        stream: False sends ``stream: false`` (one JSON answer; TTFT = end to end), e.g. so
            that a proxy can retry an attempt whose backend died (a started stream cannot be).
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 extra_body: Callable[[Job], Mapping[str, Any]] | None = None,
                 timeout_s: float = 900.0, max_connections: int = 1000, stream: bool = True):
        import httpx

        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.stream = stream
        self.extra_body = extra_body
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(timeout_s, connect=60.0),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections))

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __call__(self, job: Job, policy: str = "") -> RequestRecord:
        body = chat_body(job, self.model, self.extra_body(job) if self.extra_body else None)
        rec = RequestRecord(idx=job.idx, policy=policy, true_tokens=-1, submit=time.monotonic())
        if not self.stream:
            return await self._whole(body, rec)
        deltas = 0
        usage_tokens = None
        try:
            async with self.client.stream("POST", self.url, json=body) as resp:
                rec.status = resp.status_code
                if resp.status_code != 200:
                    await resp.aread()
                    rec.ok = False
                    rec.error = f"HTTP {resp.status_code}"
                    return rec
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                    except json.JSONDecodeError:
                        continue
                    for ch in chunk.get("choices") or ():
                        content = (ch.get("delta") or {}).get("content")
                        if content:
                            deltas += 1
                            if math.isnan(rec.first_byte):
                                rec.first_byte = time.monotonic()
                    u = chunk.get("usage")
                    if isinstance(u, Mapping) and isinstance(u.get("completion_tokens"), int):
                        usage_tokens = u["completion_tokens"]
            rec.end = time.monotonic()
        except Exception as exc:  # a failed request is recorded, never raised
            rec.ok = False
            rec.status = rec.status if rec.status != 200 else 0
            rec.error = _short_error(exc)
            return rec
        rec.true_tokens = usage_tokens if usage_tokens is not None else deltas
        rec.chunks = deltas
        if math.isnan(rec.first_byte):
            rec.first_byte = rec.end
        return rec


    async def _whole(self, body: dict, rec: RequestRecord) -> RequestRecord:
        """A non-streamed call: one JSON answer with ``usage``."""
        body = {k: v for k, v in body.items() if k != "stream_options"}
        body["stream"] = False
        try:
            resp = await self.client.post(self.url, json=body)
            done = time.monotonic()
            rec.status = resp.status_code
            if resp.status_code != 200:
                rec.ok, rec.error = False, f"HTTP {resp.status_code}"
                return rec
            usage = resp.json().get("usage") or {}
            rec.true_tokens = int(usage.get("completion_tokens", 0))
            rec.end = rec.first_byte = done
        except Exception as exc:  # a failed request is recorded, never raised
            rec.ok, rec.status, rec.error = False, 0, _short_error(exc)
        return rec


class OpenAISender:
    """Streams chat completions through an ``openai.AsyncOpenAI`` client (plain or wrapped)."""

    def __init__(self, client, model: str):
        self.client = client
        self.model = model

    async def aclose(self) -> None:
        await self.client.close()

    async def __call__(self, job: Job, policy: str = "") -> RequestRecord:
        kw: dict[str, Any] = {"model": self.model, "messages": [{"role": "user", "content": job.prompt}],
                              "stream": True, "stream_options": {"include_usage": True}, "temperature": 0}
        if job.max_tokens is not None:
            kw["max_tokens"] = int(job.max_tokens)
        rec = RequestRecord(idx=job.idx, policy=policy, true_tokens=-1, submit=time.monotonic())
        deltas = 0
        usage_tokens = None
        try:
            stream = await self.client.chat.completions.create(**kw)
            async for chunk in stream:
                for ch in chunk.choices or ():
                    if ch.delta is not None and ch.delta.content:
                        deltas += 1
                        if math.isnan(rec.first_byte):
                            rec.first_byte = time.monotonic()
                if chunk.usage is not None and chunk.usage.completion_tokens is not None:
                    usage_tokens = int(chunk.usage.completion_tokens)
            rec.end = time.monotonic()
        except Exception as exc:
            rec.ok = False
            rec.status = int(getattr(exc, "status_code", 0) or 0)
            rec.error = _short_error(exc)
            return rec
        rec.true_tokens = usage_tokens if usage_tokens is not None else deltas
        rec.chunks = deltas
        if math.isnan(rec.first_byte):
            rec.first_byte = rec.end
        return rec


async def drive(jobs: Sequence[Job], sender, policy: str, progress=None) -> list[RequestRecord]:
    """Submit every job at its arrival offset (seconds after start) and collect the records.

    A burst (all arrivals 0) is submitted in job order without yielding between
    submissions. ``progress`` (a tqdm bar or None) is advanced once per finished job.
    Returns the records in job order.
    """
    t0 = time.monotonic()

    async def one(job: Job) -> RequestRecord:
        delay = t0 + job.arrival - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        rec = await sender(job, policy)
        if progress is not None:
            progress.update(1)
        return rec

    tasks = [asyncio.ensure_future(one(j)) for j in jobs]
    return list(await asyncio.gather(*tasks))
