#!/usr/bin/env python
"""SJF admission inside an ``openai.AsyncOpenAI`` client: the one-line change.

Sends a burst of short and long prompts at once through a wrapped client and
prints the order in which they finished. Without ``--base-url`` it starts the
project's serial backend emulator on a free local port (no model needed);
point it at a real serial server (Ollama, llama.cpp, LM Studio) with e.g.
``--base-url http://127.0.0.1:11434/v1 --model llama3.2``.

    .venv/bin/python examples/openai_client.py [--base-url URL --model NAME] [--plain]

Install: ``pip install -e ".[openai,lab]"`` (``openai`` for the wrapper, ``lab`` for the
built-in emulator; with ``--base-url`` the ``openai`` extra is enough).
"""

from __future__ import annotations

import argparse
import asyncio
import time

import openai

import openai_sjf

PROMPTS = [
    "Write a detailed, step-by-step tutorial on building a REST API in Python with authentication, tests and deployment.",
    "What is the capital of Japan?",
    "Write a 2000-word essay on the history of the printing press and its effects on European society.",
    "Translate 'good morning' into Spanish.",
    "Explain in depth how public-key cryptography works, with worked examples, history and common pitfalls.",
    "Is 17 a prime number?",
]


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default=None, help="OpenAI-compatible server (default: start the emulator)")
    ap.add_argument("--model", default="emulator")
    ap.add_argument("--api-key", default="not-needed")
    ap.add_argument("--plain", action="store_true", help="do not wrap (FCFS inside the backend), for comparison")
    args = ap.parse_args()

    emulator = None
    base_url = args.base_url
    if base_url is None:
        try:
            from sjf_lab.emulator import Emulator, EmulatorConfig
        except ModuleNotFoundError as exc:  # aiohttp: the emulator is the `lab` extra's
            raise SystemExit(f"examples/openai_client.py: the built-in emulator needs the 'lab' extra: "
                             f"pip install -e \".[openai,lab]\" (missing: {exc.name}); or pass --base-url "
                             f"of a running server") from None

        lengths = [900, 15, 1200, 10, 1000, 8]  # answer tokens the emulator will generate, per prompt
        emulator = Emulator(EmulatorConfig(tokens_per_s=2000, trace_records=[
            {"prompt": p, "answer_tokens": n} for p, n in zip(PROMPTS, lengths)]))
        await emulator.start()
        base_url = emulator.base_url

    client = openai.AsyncOpenAI(base_url=base_url, api_key=args.api_key, timeout=600)
    if not args.plain:
        client = openai_sjf.wrap(client)  # <- the one-line change (slots=1, policy="sjf-tokens", tau="3x")

    t0 = time.perf_counter()

    async def ask(prompt: str) -> None:
        r = await client.chat.completions.create(model=args.model, messages=[{"role": "user", "content": prompt}])
        tokens = r.usage.completion_tokens if r.usage else "?"
        print(f"{time.perf_counter() - t0:6.2f} s  {tokens:>5} tokens  {prompt[:60]}")

    # A streamed call holds its slot until the stream is read or closed.
    print("burst (finish time, answer length, prompt):")
    await asyncio.gather(*(ask(p) for p in PROMPTS))

    stream = await client.chat.completions.create(
        model=args.model, messages=[{"role": "user", "content": PROMPTS[1]}], stream=True)
    async with stream:
        async for chunk in stream:
            pass
    if not args.plain:
        q = openai_sjf.queue_of(client)
        print(f"queue: {q.stats.dispatched} dispatched, {q.in_flight} in flight, {q.waiting} waiting")
    await client.close()
    if emulator is not None:
        await emulator.stop()


if __name__ == "__main__":
    asyncio.run(main())
