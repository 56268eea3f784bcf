#!/usr/bin/env python
"""Preemption primitives on a real serial backend: llama-cpp-python's server (issue 30).

Starts llama-cpp-python's OpenAI server (its own venv: ``--llama-python``) on 127.0.0.1
with ``--interrupt_requests False`` (one request at a time, as the plugin keeps it), and
measures, repeated and reported as medians (the machine is shared; load averages are
recorded with every figure):

* ``speed``: decode tokens/s (a 200-token answer) and prefill tokens/s (a long prompt,
  1 answer token, after another request evicted the KV cache);
* ``stop``: the cost of stopping a running stream: the client closes the stream after
  ``k`` tokens and at once sends a 1-token request; cost = its latency − the same
  request's latency on an idle server. Also with the server's default
  ``--interrupt_requests True``: the 1-token request is sent while the stream still
  reads (the server then ends the stream itself);
* ``resume_text``: does the resumed answer continue the interrupted one at temperature 0?
  Reference = the full answer (non-streamed, ``--answer-tokens``); interrupted = the same
  request streamed and closed after ``k`` tokens; resumed by (a) the chat route with the
  partial answer as a final assistant message, (b) a raw ``/v1/completions`` over the
  model's chat template (read from the GGUF, rendered here) with the partial answer
  appended. Exact = partial + continuation equals the reference text;
* ``retokenize`` (``--only retokenize``): the partial answer sent back as text, re-tokenized
  by the server: the same number of tokens as the stream produced?
* ``resume_cost``: latency of the resume request (1 answer token) vs the partial answer's
  length L, after another request ran in between (what happens when a short request
  is served during the pause) and with the KV still resident (nothing ran in between: the
  lower bound); on a ``--cache`` server (its RAM prompt cache) the partial answer first ended
  a completion (a segment), so its state was saved. Every repetition uses its own prompt;
* ``resume_real``: the whole path on both servers: stream, close after L tokens, a short
  request, then the resume (1 token);
* ``resume_segment`` (``--only resume_segment``): the first L tokens generated as a raw
  completion that ends normally (``max_tokens`` = L: the ``--cache`` server saves its state),
  a short request, then the resume: whether a segment boundary makes the RAM cache useful.

Usage (~40 min on a shared 2-core machine)::

    .venv/bin/python benchmarks/preempt_primitives.py \\
        --llama-python ../preempt-llama-venv/bin/python --model SmolLM2-135M-Instruct.Q4_1.gguf \\
        --out docs/results/preempt_primitives.json

Prompts are written here (no data set is read).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import jinja2.sandbox

PROMPTS = [
    "Write a long essay about the history of the Roman Empire.",
    "Explain how a refrigerator works, step by step.",
    "Give me a detailed plan for learning to play the guitar in six months.",
    "Describe the water cycle to a ten-year-old.",
    "What are the pros and cons of remote work? Discuss in depth.",
    "Write a short story about a robot who learns to paint.",
    "How do I make a good cup of coffee at home?",
    "Compare Python and JavaScript for a beginner programmer.",
]
#: Prompts of PROMPTS whose answers run past 256 tokens (Rome essay, guitar plan, remote work).
LONG_PROMPTS = (0, 2, 4)
SHORT = [{"role": "user", "content": "Name one colour of the rainbow."}]
PROBE = [{"role": "user", "content": "Hi"}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load() -> float:
    return round(os.getloadavg()[0], 2)


def med(xs):
    return round(statistics.median(xs), 4) if xs else None


class Server:
    """One llama-cpp-python server process (started and stopped by this script)."""

    def __init__(self, python: str, model: str, threads: int, cache: bool = False, interrupt: bool = False):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        args = [python, "-m", "llama_cpp.server", "--model", model, "--n_ctx", "4096", "--n_threads", str(threads),
                "--host", "127.0.0.1", "--port", str(self.port), "--interrupt_requests", str(interrupt)]
        if cache:
            args += ["--cache", "True"]
        self.log = open(f"/tmp/preempt_primitives_{self.port}.log", "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        end = time.monotonic() + 120
        while time.monotonic() < end:
            try:
                if httpx.get(self.base + "/v1/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.5)
        raise RuntimeError("server did not start")

    def close(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def chat(base, messages, max_tokens, **extra):
    t = time.perf_counter()
    r = httpx.post(base + "/v1/chat/completions", json={"messages": messages, "temperature": 0,
                                                         "max_tokens": max_tokens, **extra}, timeout=600)
    r.raise_for_status()
    d = r.json()
    return d["choices"][0]["message"]["content"] or "", d["usage"], time.perf_counter() - t


def complete(base, prompt, max_tokens):
    t = time.perf_counter()
    r = httpx.post(base + "/v1/completions", json={"prompt": prompt, "temperature": 0, "max_tokens": max_tokens},
                   timeout=600)
    r.raise_for_status()
    d = r.json()
    return d["choices"][0]["text"] or "", d["usage"], time.perf_counter() - t


def stream_partial(base, messages, k, max_tokens=2048):
    """Stream a chat answer, close the stream after ``k`` content chunks: (text, chunks, t_close)."""
    parts = []
    n = 0
    with httpx.Client(timeout=600) as c:
        with c.stream("POST", base + "/v1/chat/completions",
                      json={"messages": messages, "temperature": 0, "max_tokens": max_tokens, "stream": True}) as r:
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                delta = json.loads(line[6:])["choices"][0].get("delta", {}).get("content")
                if delta:
                    parts.append(delta)
                    n += 1
                    if n >= k:
                        break
        t_close = time.perf_counter()
    return "".join(parts), n, t_close


def template_of(python: str, model: str) -> dict:
    code = ("import json,sys,llama_cpp;m=llama_cpp.Llama(model_path=sys.argv[1],vocab_only=True,verbose=False);"
            "md=m.metadata;print(json.dumps({'template':md.get('tokenizer.chat_template'),"
            "'bos':m._model.token_get_text(m.token_bos()),'eos':m._model.token_get_text(m.token_eos())}))")
    return json.loads(subprocess.check_output([python, "-c", code, model], text=True).strip().splitlines()[-1])


def renderer(tpl: dict):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    t = env.from_string(tpl["template"])
    return lambda messages: t.render(messages=messages, add_generation_prompt=True, bos_token=tpl["bos"],
                                     eos_token=tpl["eos"])


def speed(base, reps):
    dec, pre = [], []
    long_prompt = " ".join(["The quick brown fox jumps over the lazy dog."] * 120)
    for _ in range(reps):
        text, u, s = chat(base, [{"role": "user", "content": PROMPTS[0]}], 200)
        dec.append(u["completion_tokens"] / s)
        chat(base, SHORT, 1)  # evict
        _, u, s = complete(base, long_prompt, 1)
        pre.append(u["prompt_tokens"] / s)
    return {"decode_tok_s": med(dec), "prefill_tok_s": med(pre), "load": load()}


def stop_cost(base_quiet, base_interrupt, reps, ks=(16, 128)):
    out = {}
    idle = []
    for _ in range(reps):
        idle.append(chat(base_quiet, PROBE, 1)[2])
    out["probe_idle_s"] = med(idle)
    for k in ks:
        after = []
        for _ in range(reps):
            _, n, t_close = stream_partial(base_quiet, [{"role": "user", "content": PROMPTS[0]}], k)
            _, _, s = chat(base_quiet, PROBE, 1)  # sent right after the close; latency from its own send
            after.append(s)
        out[f"disconnect_k{k}"] = {"probe_after_stop_s": med(after), "stop_cost_s": med([a - out["probe_idle_s"]
                                                                                           for a in after]),
                                   "reps": reps, "load": load()}
    idle_i = [chat(base_interrupt, PROBE, 1)[2] for _ in range(reps)]
    res = []
    for _ in range(reps):
        holder = {}

        def reader():
            parts, fin = [], None
            with httpx.Client(timeout=600) as c:
                with c.stream("POST", base_interrupt + "/v1/chat/completions",
                              json={"messages": [{"role": "user", "content": PROMPTS[0]}], "temperature": 0,
                                    "max_tokens": 2048, "stream": True}) as r:
                    for line in r.iter_lines():
                        if line == "data: [DONE]":
                            holder["done"] = True
                            break
                        if line.startswith("data: "):
                            ch = json.loads(line[6:])["choices"][0]
                            fin = ch.get("finish_reason") or fin
                            if ch.get("delta", {}).get("content"):
                                parts.append(1)
                                if len(parts) == 16:
                                    holder["go"].set()
            holder["chunks"], holder["finish"] = len(parts), fin

        holder["go"] = threading.Event()
        th = threading.Thread(target=reader)
        th.start()
        holder["go"].wait(300)
        _, _, s = chat(base_interrupt, PROBE, 1)
        th.join(300)
        res.append((s, holder.get("chunks"), holder.get("finish"), holder.get("done", False)))
    out["interrupt_requests_true"] = {
        "probe_idle_s": med(idle_i), "probe_during_stream_s": med([r[0] for r in res]),
        "stop_cost_s": med([r[0] - med(idle_i) for r in res]),
        "stream_chunks": [r[1] for r in res], "stream_finish_reason": [r[2] for r in res],
        "stream_got_done": [r[3] for r in res], "reps": reps, "load": load()}
    return out


def first_diff(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n if len(a) != len(b) else -1


def resume_text(base, render, answer_tokens, ks=(8, 32, 128), prompts=PROMPTS):
    rows = []
    for p in prompts:
        msgs = [{"role": "user", "content": p}]
        ref, u, _ = chat(base, msgs, answer_tokens)
        ref2, _, _ = chat(base, msgs, answer_tokens)
        raw_full, _, _ = complete(base, render(msgs), answer_tokens)
        for k in ks:
            if k >= u["completion_tokens"]:
                continue
            partial, n, _ = stream_partial(base, msgs, k)
            cont_chat, _, _ = chat(base, msgs + [{"role": "assistant", "content": partial}], answer_tokens - n)
            cont_raw, _, _ = complete(base, render(msgs) + partial, answer_tokens - n)
            rows.append({"prompt": PROMPTS.index(p), "k": k, "ref_tokens": u["completion_tokens"],
                         "ref_deterministic": ref == ref2, "raw_route_equals_chat": raw_full == ref,
                         "partial_is_prefix": ref.startswith(partial),
                         "chat_trailing_exact": (partial + cont_chat) == ref,
                         "chat_trailing_repeats_start": cont_chat[:40] == ref[:40],
                         "raw_exact": (partial + cont_raw) == ref,
                         "raw_first_diff": first_diff(partial + cont_raw, ref), "partial_chars": len(partial),
                         "ref_chars": len(ref)})
    n = len(rows)
    summary = {"cases": n, "ref_deterministic": sum(r["ref_deterministic"] for r in rows),
               "partial_is_prefix": sum(r["partial_is_prefix"] for r in rows),
               "chat_trailing_exact": sum(r["chat_trailing_exact"] for r in rows),
               "chat_trailing_restarts": sum(r["chat_trailing_repeats_start"] for r in rows),
               "raw_exact": sum(r["raw_exact"] for r in rows), "load": load()}
    return {"summary": summary, "rows": rows}


def tokens_of(base, text: str) -> int:
    r = httpx.post(base + "/extras/tokenize", json={"input": text}, timeout=60)
    r.raise_for_status()
    return len(r.json()["tokens"])


def retokenize(base, render, ks=(8, 32, 128)):
    """Does the partial answer, sent back as text, become the same number of tokens the stream
    produced? (a resume over text re-tokenizes it; a different split changes the continuation)."""
    rows = []
    for i, p in enumerate(PROMPTS):
        msgs = [{"role": "user", "content": p}]
        head = tokens_of(base, render(msgs))
        for k in ks:
            partial, n, _ = stream_partial(base, msgs, k)
            rows.append({"prompt": i, "streamed": n, "retokenized": tokens_of(base, render(msgs) + partial) - head})
    same = sum(r["streamed"] == r["retokenized"] for r in rows)
    return {"cases": len(rows), "same_count": same, "rows": rows, "load": load()}


def filler(base):
    """A long answer's text and its characters per token (partial answers are cut from it)."""
    text, u, _ = chat(base, [{"role": "user", "content": PROMPTS[0]}], 300)
    return text, len(text) / max(1, u["completion_tokens"])


def nonce_msgs(r: int, L: int, tag: str):
    """A user message no earlier request shares beyond the system prompt (no cache or KV reuse)."""
    return [{"role": "user", "content": f"[{tag}-{L}-{r}-{time.time_ns()}] {PROMPTS[r % len(PROMPTS)]}"}]


def resume_cost(base, render, reps, cached: bool, lengths=(0, 128, 512, 1024, 2048)):
    """Latency of a resume (1 answer token) over prompt + a partial answer of L tokens:
    ``after_other_request_s``: another request ran since (its KV is gone); ``kv_resident_s``:
    the same resume again at once (the KV is resident; on a ``--cache`` server this includes
    saving the state). On a ``--cache`` server the partial answer first *ended* a completion
    (a segment: its state was saved), so ``after_other_request_s`` is a RAM-cache hit."""
    text, chars_per_tok = filler(base)
    out = {}
    for L in lengths:
        partial = (text * (1 + int(L * chars_per_tok / max(1, len(text)))))[:int(L * chars_per_tok)]
        evicted, resident, ptoks = [], [], None
        for r in range(reps):
            head = render(nonce_msgs(r, L, "c" if cached else "n")) + partial
            if cached:
                complete(base, head, 1)  # the segment ends here: its state is saved
            chat(base, nonce_msgs(r, L, "other"), 1)
            _, u, s = complete(base, head, 1)
            evicted.append(s)
            ptoks = u["prompt_tokens"]
            _, _, s = complete(base, head, 1)
            resident.append(s)
        out[str(L)] = {"prompt_tokens": ptoks, "after_other_request_s": med(evicted), "kv_resident_s": med(resident),
                       "load": load()}
    return out


def resume_real(base, render, reps, L=256):
    """Stream a chat answer (its own prompt each time, one that answers longer than L), close it
    after L tokens, run a short request, then resume over prompt + the partial answer
    (1 token): the resume latency. A stream that ended before L tokens is not counted."""
    lat, ended = [], 0
    for r in range(reps):
        msgs = [{"role": "user", "content": f"[real-{r}-{time.time_ns()}] {PROMPTS[LONG_PROMPTS[r % 3]]}"}]
        partial, n, _ = stream_partial(base, msgs, L)
        if n < L:
            ended += 1
            continue
        chat(base, nonce_msgs(r, L, "short"), 8)
        _, u, s = complete(base, render(msgs) + partial, 1)
        lat.append(s)
    return {"L": L, "resume_s": med(lat), "all": [round(x, 3) for x in lat], "ended_early": ended, "reps": reps,
            "load": load()}


def resume_segment(base, render, reps, L=256):
    """Generate the first L answer tokens as a raw completion that *finishes* (max_tokens = L;
    with ``--cache`` its state is saved then), run a short request, then resume over
    prompt + those L tokens (1 token): the resume latency, and the short request's latency
    (what saving a state after every completion costs)."""
    lat, short = [], []
    for r in range(reps):
        head = render(nonce_msgs(r, L, "seg"))
        seg, _, _ = complete(base, head, L)
        short.append(chat(base, [{"role": "user", "content": f"Name colour number {r} of the rainbow."}], 8)[2])
        _, u, s = complete(base, head + seg, 1)
        lat.append(s)
    return {"L": L, "resume_s": med(lat), "short_request_s": med(short), "all": [round(x, 3) for x in lat],
            "reps": reps, "load": load()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-python", required=True, help="python of the venv with llama-cpp-python[server]")
    ap.add_argument("--model", required=True, help="GGUF file")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cost-reps", type=int, default=3, help="repetitions of each resume-cost length")
    ap.add_argument("--answer-tokens", type=int, default=160)
    ap.add_argument("--only", default="speed,stop,resume_text,resume_cost,resume_real")
    ap.add_argument("--out", default=None)
    ap.add_argument("--merge", action="store_true", help="keep the other parts already in --out")
    a = ap.parse_args(argv)
    only = set(a.only.split(","))
    res = {"threads": a.threads, "cpus": os.cpu_count(), "started_load": load()}
    tpl = template_of(a.llama_python, a.model)
    render = renderer(tpl)
    quiet = Server(a.llama_python, a.model, a.threads)
    try:
        if "speed" in only:
            res["speed"] = speed(quiet.base, a.reps)
            print("speed", res["speed"], flush=True)
        if "stop" in only:
            inter = None
            try:
                quiet_probe = quiet.base
                inter = Server(a.llama_python, a.model, a.threads, interrupt=True)
                res["stop"] = stop_cost(quiet_probe, inter.base, a.reps)
            finally:
                if inter:
                    inter.close()
            print("stop", json.dumps(res["stop"]), flush=True)
        if "resume_text" in only:
            res["resume_text"] = resume_text(quiet.base, render, a.answer_tokens)
            print("resume_text", res["resume_text"]["summary"], flush=True)
        if "retokenize" in only:
            res["retokenize"] = retokenize(quiet.base, render)
            print("retokenize", res["retokenize"]["cases"], res["retokenize"]["same_count"], flush=True)
        if "resume_cost" in only:
            res["resume_cost"] = {"no_cache": resume_cost(quiet.base, render, a.cost_reps, cached=False)}
        if "resume_real" in only:
            res["resume_real"] = {"no_cache": resume_real(quiet.base, render, a.cost_reps)}
        if "resume_segment" in only:
            res["resume_segment"] = {"no_cache": resume_segment(quiet.base, render, a.cost_reps)}
    finally:
        quiet.close()
    if {"resume_cost", "resume_real", "resume_segment"} & only:
        cached = Server(a.llama_python, a.model, a.threads, cache=True)
        try:
            if "resume_cost" in only:
                res["resume_cost"]["cache"] = resume_cost(cached.base, render, a.cost_reps, cached=True)
                print("resume_cost", json.dumps(res["resume_cost"]), flush=True)
            if "resume_real" in only:
                res["resume_real"]["cache"] = resume_real(cached.base, render, a.cost_reps)
                print("resume_real", json.dumps(res["resume_real"]), flush=True)
            if "resume_segment" in only:
                res["resume_segment"]["cache"] = resume_segment(cached.base, render, a.cost_reps)
                print("resume_segment", json.dumps(res["resume_segment"]), flush=True)
        finally:
            cached.close()
    res["finished_load"] = load()
    if a.out:
        old = json.loads(Path(a.out).read_text()) if a.merge and Path(a.out).exists() else {}
        old.update(res)
        Path(a.out).write_text(json.dumps(old, indent=1) + "\n")
    return res


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
