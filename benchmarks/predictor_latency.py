"""Predictor latency: p50/p99 in µs per prompt, for prompts of 50, 2,000 and 32,000 characters,
single and batched, for the shipped default model, the previous default (v2, kept in
``models/reference/``) and the paper's Model A in the same run.

    python benchmarks/predictor_latency.py [--iters 2000] [--batch 64] [--json out.json]

Each cell times ``Predictor.predict(text)`` (features + ONNX + Prediction) or, batched,
``Predictor.score_many(texts)`` divided by the batch size. Two clocks are reported:
wall time (``perf_counter_ns``; includes time the OS ran other processes — the machine
this project runs on is shared) and the calling thread's CPU time (``thread_time_ns``;
onnxruntime runs with one intra-op thread in the calling thread, so this is the work done
for the request). The breakdown rows time the feature extractor and a bare
``InferenceSession.run`` on one precomputed row, plus the alternatives tried for the
ONNX call (all outputs vs the one needed, IO binding with preallocated buffers).

Targets (issue 13; scoring is lazy, only a request that has to wait is scored): p50 <= 150 µs
at 2,000 characters and p99 <= 1 ms at 32,000 characters, single prompt, one thread. (The v2
default's issue-3 targets were 30 µs / 250 µs.)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODEL_A = ROOT / "models" / "reference" / "clairvoyant_model_a_sharegpt.onnx"
PREVIOUS = ROOT / "models" / "reference" / "default_v2_previous.onnx"
TARGET_P50_2K_US = 150.0
TARGET_P99_32K_US = 1000.0

# Our own prompt text (no dataset needed): an instruction, then pasted material.
INSTRUCTION = "Please summarize the following meeting notes in five bullet points and list the open questions. "
MATERIAL = (
    "The team reviewed the quarterly roadmap, agreed to move the billing migration to May, and asked the "
    "platform group for an estimate of the queueing work. Latency on the search service improved after the "
    "cache change, but the p99 is still above the target on Mondays, when batch jobs overlap with traffic. "
    "Marta will draft the hiring plan; Ken owns the incident review of the outage on the 14th, including "
    "why the alert fired late and whether the runbook was followed. Open items: vendor contract renewal, "
    "the data retention policy for logs, and the budget for the load-testing cluster. "
)


def make_prompt(n_chars: int) -> str:
    """A prompt of exactly ``n_chars`` characters: instruction first, then notes."""
    text = INSTRUCTION
    while len(text) < n_chars:
        text += MATERIAL
    return text[:n_chars]


def _timeit(fn, iters: int) -> dict:
    """p50/p99 of wall and thread-CPU time of ``fn()`` over ``iters`` calls, in µs."""
    for _ in range(min(50, iters)):
        fn()
    wall = np.empty(iters)
    cpu = np.empty(iters)
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for i in range(iters):
            c0 = time.thread_time_ns()
            w0 = time.perf_counter_ns()
            fn()
            w1 = time.perf_counter_ns()
            c1 = time.thread_time_ns()
            wall[i] = (w1 - w0) / 1000.0
            cpu[i] = (c1 - c0) / 1000.0
    finally:
        if gc_was:
            gc.enable()
    return {"wall_p50": float(np.percentile(wall, 50)), "wall_p99": float(np.percentile(wall, 99)),
            "cpu_p50": float(np.percentile(cpu, 50)), "cpu_p99": float(np.percentile(cpu, 99))}


def bench_model(name: str, path, sizes, iters: int, batch: int) -> list[dict]:
    from sjf_core.predict._predictor import load_predictor

    pred = load_predictor(path)
    sess = pred._session  # the cached session (benchmark only)
    rows = []
    for n in sizes:
        text = make_prompt(n)
        it = iters if n <= 4000 else max(200, iters // 4)
        texts = [make_prompt(n - (i % 7)) for i in range(batch)]  # distinct strings, same size
        x1 = pred.features_many([text])
        single = _timeit(lambda: pred.predict(text), it)
        b = _timeit(lambda: pred.score_many(texts), max(20, it // batch * 4))
        feats = _timeit(lambda: pred.features_many([text]), it)  # with the lexicon column when the model has one
        onnx_one = _timeit(lambda: sess.run([pred._output], {pred._input: x1}), it)
        onnx_all = _timeit(lambda: sess.run(None, {pred._input: x1}), it)
        # IO binding with preallocated input/output buffers
        import onnxruntime as ort

        io = sess.io_binding()
        x_ort = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x1))
        io.bind_ortvalue_input(pred._input, x_ort)
        io.bind_output(pred._output)
        try:
            sess.run_with_iobinding(io)
            onnx_io = _timeit(lambda: sess.run_with_iobinding(io), it)
        except Exception as exc:  # e.g. a sequence output cannot be bound
            onnx_io = {"error": type(exc).__name__}
        rows.append({"model": name, "layout": pred.info.layout, "kind": pred.info.kind, "chars": n,
                     "single": single, "batched_per_prompt": {k: v / batch for k, v in b.items()},
                     "batch": batch, "features": feats, "onnx_run": onnx_one, "onnx_run_all_outputs": onnx_all,
                     "onnx_iobinding": onnx_io})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 2000, 32000])
    ap.add_argument("--model", action="append", default=[], help="extra NAME=PATH models")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from sjf_core.predict._predictor import default_model_path

    models = [("default", default_model_path())]
    if PREVIOUS.is_file():
        models.append(("previous", PREVIOUS))
    models.append(("Model A", MODEL_A))
    models += [tuple(m.split("=", 1)) for m in args.model]
    load0 = os.getloadavg()
    rows = []
    for name, path in models:
        rows += bench_model(name, path, args.sizes, args.iters, args.batch)
    load1 = os.getloadavg()

    print(f"Predictor latency, µs per prompt (p50 / p99). CPUs: {os.cpu_count()}, load average "
          f"{load0[0]:.1f} -> {load1[0]:.1f} (a shared machine: wall p99 includes time other processes ran).")
    head = (f"{'model':<10}{'chars':>7}  {'single wall':>15}  {'single CPU':>15}  {'batch' + str(args.batch) + ' wall':>15}"
            f"  {'features CPU':>15}  {'ONNX run CPU':>15}  {'IO-bind CPU':>15}  {'all-outputs CPU':>16}")
    print(head)
    print("-" * len(head))

    def pp(d, a="cpu"):
        if "error" in d:
            return f"{d['error']:>15}"
        return f"{d[a + '_p50']:>6.1f} / {d[a + '_p99']:>6.1f}"

    for r in rows:
        print(f"{r['model']:<10}{r['chars']:>7}  {pp(r['single'], 'wall'):>15}  {pp(r['single']):>15}  "
              f"{pp(r['batched_per_prompt'], 'wall'):>15}  {pp(r['features']):>15}  {pp(r['onnx_run']):>15}  "
              f"{pp(r['onnx_iobinding']):>15}  {pp(r['onnx_run_all_outputs']):>16}")
    by = {(r["model"], r["chars"]): r for r in rows}
    if ("default", 2000) in by:
        r = by[("default", 2000)]["single"]
        print(f"\ntarget p50 <= {TARGET_P50_2K_US:.0f} µs at 2,000 chars: default wall p50 {r['wall_p50']:.1f} µs, "
              f"CPU p50 {r['cpu_p50']:.1f} µs -> {'met' if r['wall_p50'] <= TARGET_P50_2K_US else 'NOT met'}")
    if ("default", 32000) in by:
        r = by[("default", 32000)]["single"]
        print(f"target p99 <= {TARGET_P99_32K_US:.0f} µs at 32,000 chars: default wall p99 {r['wall_p99']:.1f} µs, "
              f"CPU p99 {r['cpu_p99']:.1f} µs -> {'met' if r['wall_p99'] <= TARGET_P99_32K_US else 'NOT met'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "loadavg": [load0, load1]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
