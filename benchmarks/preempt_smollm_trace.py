#!/usr/bin/env python
"""SmolLM2's real answer lengths on held-out prompts, for the preemption study (issue 30).

Samples ``--n`` distinct prompts of the predictor's held-out **test** split
(:func:`sjf_lab.train_data.split_of`) from the conversation files given, shorter than
``--max-prompt-chars``, and answers each one on llama-cpp-python's server with SmolLM2 at
temperature 0, ``max_tokens`` = ``--max-tokens`` (runaway answers stop there: the cap is
recorded as ``finish_reason: length``). Writes one JSON line per prompt:
``{prompt, source, prompt_tokens, answer_tokens, finish_reason, seconds}`` to ``--out``,
which must lie outside the repository (it holds prompt text from the data set).
Resumable: prompts already in ``--out`` are skipped.

Usage::

    .venv/bin/python benchmarks/preempt_smollm_trace.py --data <conversations dir> \\
        --llama-python ../preempt-llama-venv/bin/python --model SmolLM2-135M-Instruct.Q4_1.gguf \\
        --out <outside the repo>/smollm_trace.jsonl --n 150 --max-tokens 1024
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import httpx

from preempt_primitives import Server  # same directory
from sjf_lab.train_data import load_rows, split_of

#: Sources that are not chat logs (summaries of news, synthetic profiler prompts) or red-team logs.
SKIP_SOURCES = ("cnn_dailymail_clairvoyant", "profiler_gemma3_clairvoyant", "hh_rlhf_harmless_test")


def sample_prompts(data: str, n: int, max_chars: int, seed: int) -> list[tuple[str, str]]:
    """``n`` distinct held-out (test split) prompts and their source, in a seeded random order."""
    seen, out = set(), []
    for r in load_rows([data]):
        if r.source in SKIP_SOURCES or r.key in seen or len(r.prompt) > max_chars:
            continue
        seen.add(r.key)
        if split_of(r.key) == "test":
            out.append((r.prompt, r.source))
    out.sort(key=lambda p: p[0])
    random.Random(seed).shuffle(out)
    return out[:n]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--llama-python", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--max-prompt-chars", type=int, default=1500)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=30)
    a = ap.parse_args(argv)
    out = Path(a.out)
    if Path.cwd().resolve() in out.resolve().parents:
        raise SystemExit("--out must lie outside the repository (it holds prompt text)")
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        done = {json.loads(line)["prompt"] for line in out.read_text().splitlines() if line.strip()}
    prompts = sample_prompts(a.data, a.n, a.max_prompt_chars, a.seed)
    srv = Server(a.llama_python, a.model, a.threads)
    try:
        with open(out, "a") as f:
            for i, (p, src) in enumerate(prompts):
                if p in done:
                    continue
                t = time.perf_counter()
                r = httpx.post(srv.base + "/v1/chat/completions", timeout=1800,
                               json={"messages": [{"role": "user", "content": p}], "temperature": 0,
                                     "max_tokens": a.max_tokens})
                r.raise_for_status()
                d = r.json()
                rec = {"prompt": p, "source": src, "prompt_tokens": d["usage"]["prompt_tokens"],
                       "answer_tokens": d["usage"]["completion_tokens"],
                       "finish_reason": d["choices"][0]["finish_reason"], "seconds": round(time.perf_counter() - t, 2)}
                f.write(json.dumps(rec) + "\n")
                f.flush()
                print(i, rec["answer_tokens"], rec["finish_reason"], rec["seconds"], flush=True)
    finally:
        srv.close()


if __name__ == "__main__":
    main()
