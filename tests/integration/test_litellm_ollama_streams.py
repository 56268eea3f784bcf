"""Streamed answers through LiteLLM's Ollama providers are learned (issue 29, item 1).

A real LiteLLM proxy with the plugin, two deployments on one emulator speaking Ollama's native
API: ``ollama_chat/`` (``POST /api/chat``) and ``ollama/`` (``POST /api/generate``). The
emulator ends each NDJSON stream with a ``done`` line carrying ``eval_count``, as Ollama does.
A client streams (``stream: true``), with and without ``stream_options.include_usage``; the
completions the status route lists must carry the backend's ``eval_count`` as their answer
tokens, and the length memory must learn each one (its online accuracy's ``n`` and the sampled
accuracy series grow). Before the fix LiteLLM's Ollama streams gave the plugin no ``usage`` on
any chunk (only in the last chunk's hidden params), so the answers were recorded as unknown.
"""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from sjf_lab.emulator import EmulatorThread
from sjf_lab.proxy_runner import LiteLLMProxy, proxy_config
from waits import wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# ollama_chat/ scores the last user message: a trace with Short and Long answers, so that the
# memory's ranking accuracy is defined. ollama/ renders the messages into a prompt of its own
# (the emulator then draws a length per prompt): its lengths are read from the emulator.
PROMPTS = ["What is the capital of Peru?", "Write a long essay on the history of the printing press.",
           "Name a prime number.", "Write a detailed guide to sourdough baking, every step."]
TRACE = [{"prompt": q, "answer_tokens": n} for q, n in zip(PROMPTS, (24, 900, 12, 1100))]


@pytest.fixture(scope="module")
def ollama_proxy():
    emu = EmulatorThread(tokens_per_s=4000, trace_records=TRACE)
    root = f"http://127.0.0.1:{emu.port}"
    cfg = proxy_config({}, plugin=True)
    cfg["model_list"] = [
        {"model_name": "chat", "litellm_params": {"model": "ollama_chat/llama3", "api_base": root}},
        {"model_name": "generate", "litellm_params": {"model": "ollama/llama3", "api_base": root}}]
    p = None
    try:
        p = LiteLLMProxy(cfg).start()
        yield p, emu
    finally:
        if p is not None:
            p.stop()
        emu.stop()


def _status(p: LiteLLMProxy) -> dict:
    r = httpx.get(p.base_url + "/sjf/status", headers={"Authorization": f"Bearer {p.master_key}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


async def _stream(p: LiteLLMProxy, group: str, prompt: str, include_usage: bool) -> int:
    """Stream one answer to its end; the number of content chunks received."""
    kw = {"stream_options": {"include_usage": True}} if include_usage else {}
    async with openai.AsyncOpenAI(base_url=p.openai_base_url, api_key=p.master_key, max_retries=0, timeout=120) as c:
        stream = await c.chat.completions.create(model=group, messages=[{"role": "user", "content": prompt}],
                                                 stream=True, **kw)
        return sum([1 async for ch in stream if ch.choices and ch.choices[0].delta.content])


@pytest.mark.parametrize("include_usage", [False, True], ids=["plain-stream", "include_usage"])
@pytest.mark.parametrize("group,api", [("chat", "ollama-chat"), ("generate", "ollama-generate")],
                         ids=["ollama_chat", "ollama"])
async def test_a_streamed_ollama_answer_is_recorded_with_its_eval_count_and_learned(ollama_proxy, group, api,
                                                                                    include_usage):
    p, emu = ollama_proxy
    before = _status(p)
    n_before = before["memory"]["online_ranking_accuracy"]["n"]
    emu.reset()
    t0 = time.time()
    for q in PROMPTS:  # one at a time: the emulator's order is the completions' order
        assert await _stream(p, group, q, include_usage) > 0
    served = emu.stats()["order"]
    assert [o["api"] for o in served] == [api] * len(PROMPTS) and all(o["stream"] for o in served)
    eval_counts = [o["tokens"] for o in served]  # what each done line said in eval_count

    def completed() -> dict | None:  # the release runs after the last chunk is relayed
        doc = _status(p)
        return doc if len([r for r in doc["recent"] if r["t"] >= t0]) == len(PROMPTS) else None

    await wait_until(completed, timeout=60, step=0.2)
    doc = completed()
    recorded = [r["answer_tokens"] for r in doc["recent"][:len(PROMPTS)]][::-1]  # newest first
    assert recorded == eval_counts, "answer tokens recorded vs the backend's eval_count"
    assert all(r["true_class"] for r in doc["recent"][:len(PROMPTS)])
    # every answer enters the memory's window (its online ranking accuracy's n)
    await wait_until(lambda: _status(p)["memory"]["online_ranking_accuracy"]["n"] == n_before + len(PROMPTS),
                     timeout=30, step=0.2)
    acc = _status(p)["memory"]["online_ranking_accuracy"]
    if group == "chat":  # Short and Long answers of the trace: the ranking accuracy is defined
        assert acc["memory"] is not None and acc["base"] is not None, acc
    # the accuracy series (one sample per interval) takes in the new answers
    await wait_until(lambda: (_status(p)["accuracy_history"] or [{"n": -1}])[-1]["n"] == acc["n"],
                     timeout=60, step=0.5)
