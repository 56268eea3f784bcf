"""Added latency of the plugins at zero contention (issue 6 "Overheads").

* **LiteLLM plugin**: two real LiteLLM proxies in front of the same emulator, one
  with ``litellm_sjf`` (default policy, shipped predictor) and one without. One
  request at a time, alternating between the two in a seeded random order per
  pair, so both see the same machine load. Each request asks for a 1-token answer
  (``max_tokens: 1``), non-streaming, so the backend adds almost nothing.
* **OpenAI wrapper**: the same with an in-process ``openai.AsyncOpenAI``, plain vs
  wrapped by ``openai_sjf.wrap`` (its own scheduler, shipped predictor).

Reported: p50 / p99 of end-to-end latency per side (ms), and the added p50 / p99
(plugin minus plain), plus the median of the paired differences. The prompts are
real ones from the data file, so the predictor's cost (feature extraction + ONNX)
is included.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Sequence

import numpy as np

from sjf_lab.bench.backend import EmulatorBackend
from sjf_lab.bench.policies import BUILTIN
from sjf_lab.bench.workload import Job


def _summary(a: Sequence[float], b: Sequence[float]) -> dict:
    a = np.asarray(a) * 1000.0
    b = np.asarray(b) * 1000.0
    d = {
        "n": int(len(a)),
        "plain_p50_ms": float(np.percentile(b, 50)), "plain_p99_ms": float(np.percentile(b, 99)),
        "plugin_p50_ms": float(np.percentile(a, 50)), "plugin_p99_ms": float(np.percentile(a, 99)),
    }
    d["added_p50_ms"] = d["plugin_p50_ms"] - d["plain_p50_ms"]
    d["added_p99_ms"] = d["plugin_p99_ms"] - d["plain_p99_ms"]
    d["paired_median_ms"] = float(np.median(a - b))
    return d


async def _alternate(n: int, prompts: Sequence[str], call_a, call_b, seed: int, progress=None) -> dict:
    rng = random.Random(seed)
    ta, tb = [], []
    for i in range(n):
        p = prompts[i % len(prompts)]
        order = [(call_a, ta), (call_b, tb)]
        rng.shuffle(order)
        for fn, out in order:
            t0 = time.perf_counter()
            await fn(p)
            out.append(time.perf_counter() - t0)
        if progress is not None:
            progress.update(1)
    return _summary(ta, tb)


def _body(model: str, prompt: str) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 1, "temperature": 0}


async def plugin_overhead(prompts: Sequence[str], n: int = 300, warmup: int = 20, seed: int = 0,
                          progress: bool = True) -> dict:
    """Added latency of ``litellm_sjf`` in a real LiteLLM proxy (see module docstring)."""
    import httpx
    from tqdm import tqdm

    from sjf_lab.bench.proxy import start_proxy

    backend = EmulatorBackend([Job(0, "warm", 1)], tokens_per_s=100000.0)
    proxies = []
    try:
        plain = await start_proxy(backend, BUILTIN["fcfs"], "")
        proxies.append(plain)
        plug = await start_proxy(backend, BUILTIN["sjf"], "")
        proxies.append(plug)
        async with httpx.AsyncClient(timeout=60) as c:
            def caller(px):
                async def call(prompt):
                    r = await c.post(px.base_url + "/chat/completions", json=_body(px.model, prompt),
                                     headers={"Authorization": f"Bearer {px.api_key}"})
                    r.raise_for_status()
                return call
            a, b = caller(plug), caller(plain)
            for i in range(warmup):
                await a(prompts[i % len(prompts)])
                await b(prompts[i % len(prompts)])
            bar = tqdm(total=n, desc="plugin overhead", unit="pair", disable=not progress)
            try:
                out = await _alternate(n, prompts, a, b, seed, bar)
            finally:
                bar.close()
    finally:
        for px in proxies:
            await px.stop()
        backend.close()
    out["what"] = ("LiteLLM proxy with litellm_sjf (project defaults: sjf-tokens, shipped predictor) vs without, "
                   "1-token answers")
    return out


async def wrapper_overhead(prompts: Sequence[str], n: int = 500, warmup: int = 30, seed: int = 0,
                           progress: bool = True) -> dict:
    """Added latency of ``openai_sjf.wrap`` vs the plain ``AsyncOpenAI`` (see module docstring)."""
    import httpx
    import openai
    import openai_sjf
    from tqdm import tqdm

    from sjf_core._scheduler import Scheduler

    backend = EmulatorBackend([Job(0, "warm", 1)], tokens_per_s=100000.0)
    try:
        def client():
            return openai.AsyncOpenAI(base_url=backend.base_url, api_key="bench", max_retries=0,
                                      http_client=httpx.AsyncClient(timeout=60))
        plain = client()
        wrapped = openai_sjf.wrap(client(), scheduler=Scheduler(predictor="default", plugins=False))  # defaults

        def caller(cl):
            async def call(prompt):
                await cl.chat.completions.create(model="emulator", messages=[{"role": "user", "content": prompt}],
                                                 max_tokens=1, temperature=0)
            return call
        a, b = caller(wrapped), caller(plain)
        for i in range(warmup):
            await a(prompts[i % len(prompts)])
            await b(prompts[i % len(prompts)])
        bar = tqdm(total=n, desc="wrapper overhead", unit="pair", disable=not progress)
        try:
            out = await _alternate(n, prompts, a, b, seed, bar)
        finally:
            bar.close()
        await plain.close()
        await wrapped.close()
    finally:
        backend.close()
    out["what"] = ("AsyncOpenAI wrapped by openai_sjf (project defaults: sjf-tokens, shipped predictor) vs plain, "
                   "1-token answers")
    return out


def run(kind: str, prompts: Sequence[str], **kw) -> dict:
    """Synchronous entry: ``kind`` is "plugin" or "wrapper"."""
    fn = {"plugin": plugin_overhead, "wrapper": wrapper_overhead}[kind]
    return asyncio.run(fn(prompts, **kw))
