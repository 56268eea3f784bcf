"""Cost of reading stated sizes (issue 23): ``read_size`` alone and ``Predictor.predict`` with and
without it, per prompt, on real prompts of the conversation data (docs/data.md) cut or repeated to a fixed
length (default 2,000 characters), the same under a system prompt that states a size ("Always answer
with yes or no.": the user text is read as well, docs/predictor.md), and on our labelled set (prompts
that do state a size).

Interleaved per prompt in one process (read_size, predict with sizes, predict without), CPU time
(``time.process_time_ns``) and wall time; prints p50 / p99 µs and the p50 of the paired difference
(with − without) of ``predict``::

    python benchmarks/stated_size_latency.py --data conversations/ --chars 2000
"""

from __future__ import annotations

import argparse
import os
import random
import time

import numpy as np


def _texts(data: str, chars: int, n: int) -> list[str]:
    from sjf_lab.train_data import load_rows

    prompts = sorted({r.prompt for r in load_rows([data])})
    random.Random(0).shuffle(prompts)
    out = []
    for p in prompts[:n]:
        while len(p) < chars:
            p = p + "\n\n" + p
        out.append(p[:chars])
    return out


def _time_interleaved(fns, texts, reps: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per function: (wall µs [N], CPU µs [N]), the functions called in turn on each prompt."""
    wall = [[] for _ in fns]
    cpu = [[] for _ in fns]
    for _ in range(reps):
        for t in texts:
            for j, fn in enumerate(fns):
                c0, w0 = time.process_time_ns(), time.perf_counter_ns()
                fn(t)
                cpu[j].append(time.process_time_ns() - c0)
                wall[j].append(time.perf_counter_ns() - w0)
    return [(np.array(w) / 1000, np.array(c) / 1000) for w, c in zip(wall, cpu)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.environ.get("SJF_DATA_DIR", "conversations"), help="folder of the conversation data (docs/data.md; default $SJF_DATA_DIR or ./conversations)")
    ap.add_argument("--chars", type=int, default=2000)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    from sjf_core.predict._predictor import load_predictor
    from sjf_core.predict._stated import read_size
    from sjf_core.predict._text import scored_text
    from sjf_lab.stated_eval import load_labelled, request_body

    pred = load_predictor()
    data = _texts(args.data, args.chars, args.n)
    system = "Always answer with yes or no."  # instructions with a size: the user text is read too
    sets = {f"data prompts at {args.chars} chars": data,
            "labelled set (all state a size)": [scored_text(request_body(r)) for r in load_labelled()],
            f"data prompts at {args.chars} chars under a system prompt with a size": [
                scored_text({"messages": [{"role": "system", "content": system}, {"role": "user", "content": t}]})
                for t in data]}

    def with_sizes(t):
        pred.read_sizes = True
        return pred.predict(t)

    def without(t):
        pred.read_sizes = False
        return pred.predict(t)

    for name, texts in sets.items():
        for t in texts[:50]:
            with_sizes(t), without(t), read_size(t)  # warm up
        labels = ("read_size", "predict, sizes on", "predict, sizes off")
        res = dict(zip(labels, _time_interleaved((read_size, with_sizes, without), texts, args.reps)))
        print(f"{name} ({len(texts)} prompts x {args.reps}):")
        for label, (wall, cpu) in res.items():
            print(f"  {label:<20} wall p50 {np.percentile(wall, 50):7.1f} p99 {np.percentile(wall, 99):7.1f} µs | "
                  f"CPU p50 {np.percentile(cpu, 50):7.1f} p99 {np.percentile(cpu, 99):7.1f} µs")
        diff = res["predict, sizes on"][1] - res["predict, sizes off"][1]
        print(f"  extra CPU of predict (paired, with - without): p50 {np.percentile(diff, 50):.1f} µs")
    pred.read_sizes = True
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
