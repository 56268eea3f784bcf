"""The workloads of issue 28's scenarios: one box, several models (``benchmarks/box_bench.py``).

Contract: each builder returns a :class:`BoxScenario`: the emulated box (a
:class:`~sjf_lab.box.BoxConfig`), the jobs (each a :class:`ModelJob`: a
:class:`~sjf_lab.bench.workload.Job` and the model it asks for; ``Job.idx`` unique across
models), and its trace records. Seeded: the same arguments give the same jobs. Prompts
come from held-out data rows (``sjf_lab.bench.workload.load_rows(split="test")``) and stay
in memory; autocomplete prompts are made up here.

* :func:`side_by_side` (a): a chat model busy ~90 % with 300–1,200-token answers (Poisson
  arrivals at ``chat_rho``) and an autocomplete model with 16-token answers every 1–2 s,
  both loaded side by side, sharing the box's speed.
* :func:`no_fit_burst` (b): two models the box cannot hold together (one at a time, a load
  each switch); ``n`` + ``n`` requests of mixed lengths arriving interleaved.
* :func:`no_fit_steady` (c): the same box, ``n`` requests, each for one of the two models at
  random, Poisson arrivals.
* :func:`speeds_apart` (d): two models loaded side by side, one ``ratio`` times faster per
  token; a burst of mixed lengths for both, interleaved.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Sequence

from sjf_lab.bench.workload import Job, Row, burst, by_class, poisson_arrivals
from sjf_lab.box import BoxConfig, ModelSpec

AUTOCOMPLETE_TOKENS = 16


@dataclass(frozen=True)
class ModelJob:
    """One request of a box workload: the job and the model it names."""

    job: Job
    model: str


@dataclass
class BoxScenario:
    """A box, its jobs and what the tables print about them."""

    name: str
    box: BoxConfig
    jobs: list[ModelJob]
    notes: dict = field(default_factory=dict)

    def trace(self) -> list[dict]:
        """The emulator's trace: each prompt's answer length."""
        return [{"prompt": mj.job.prompt, "answer_tokens": int(mj.job.tokens)} for mj in self.jobs]

    def models(self) -> list[str]:
        return [m.name for m in self.box.models]


def _interleave(groups: Sequence[Sequence[tuple[Row, str]]]) -> list[tuple[Row, str]]:
    out = []
    for i in range(max(len(g) for g in groups)):
        out += [g[i] for g in groups if i < len(g)]
    return out


def _numbered(pairs: Sequence[tuple[Row, str]], arrivals: Sequence[float]) -> list[ModelJob]:
    return [ModelJob(Job(i, r.prompt, r.tokens, float(t)), m) for i, ((r, m), t) in enumerate(zip(pairs, arrivals))]


def side_by_side(rows: Sequence[Row], duration_s: float = 300.0, chat_rho: float = 0.85, chat_tps: float = 200.0,
                 auto_tps: float = 200.0, share: float = 1.0, seed: int = 0) -> BoxScenario:
    """(a): chat Poisson at ``chat_rho`` of its own speed, autocomplete every U(1, 2) s."""
    rng = random.Random(seed)
    chat_rows = [r for r in rows if 300 <= r.tokens <= 1200]
    mean_s = sum(r.tokens for r in chat_rows) / len(chat_rows) / chat_tps
    times = [t for t in poisson_arrivals(int(duration_s * chat_rho / mean_s * 2) + 10, chat_rho / mean_s, seed)
             if t < duration_s]
    if len(times) > len(chat_rows):
        raise ValueError(f"need {len(times)} chat prompts of 300-1200 tokens, the data has {len(chat_rows)}")
    chats = [(r, "chat") for r in rng.sample(chat_rows, len(times))]
    autos, t = [], rng.uniform(0.0, 1.0)
    while t < duration_s:
        autos.append((Row(f"def f{len(autos)}(x, y):\n    # complete line {len(autos)}\n    return", AUTOCOMPLETE_TOKENS),
                      "auto", t))
        t += rng.uniform(1.0, 2.0)
    merged = sorted([(r, m, a) for (r, m), a in zip(chats, times)] + autos, key=lambda x: x[2])
    jobs = [ModelJob(Job(i, r.prompt, r.tokens, a), m) for i, (r, m, a) in enumerate(merged)]
    box = BoxConfig(models=(ModelSpec("chat", tokens_per_s=chat_tps), ModelSpec("auto", tokens_per_s=auto_tps)),
                    max_loaded=2, preload=("chat", "auto"), share=share)
    return BoxScenario("side-by-side", box, jobs, {"chat_rho": chat_rho, "chat_mean_s": mean_s,
                                                   "duration_s": duration_s, "chat_tps": chat_tps, "auto_tps": auto_tps})


def _two_model_box(tps: float, load_s: float, share: float) -> BoxConfig:
    return BoxConfig(models=(ModelSpec("model-a", tokens_per_s=tps, load_s=load_s),
                             ModelSpec("model-b", tokens_per_s=tps, load_s=load_s)), max_loaded=1, share=share,
                     preload=("model-a",))  # the box holds the first model asked for: no load for it


def no_fit_burst(rows: Sequence[Row], n: int = 10, tps: float = 400.0, load_s: float = 3.0, gap_s: float = 0.05,
                 seed: int = 0, max_long_tokens: int = 1000) -> BoxScenario:
    """(b): per model n/2 Short + n/2 Long, sent interleaved a, b, a, b, … ``gap_s`` apart."""
    picked = burst(rows, n, n, seed=seed, max_long_tokens=max_long_tokens)
    a = [(Row(j.prompt, j.tokens), "model-a") for j in picked[0::2]]
    b = [(Row(j.prompt, j.tokens), "model-b") for j in picked[1::2]]
    pairs = _interleave([a, b])
    jobs = _numbered(pairs, [i * gap_s for i in range(len(pairs))])
    return BoxScenario("no-fit burst", _two_model_box(tps, load_s, 1.0), jobs,
                       {"n": n, "tps": tps, "load_s": load_s, "gap_s": gap_s})


def no_fit_steady(rows: Sequence[Row], n: int = 120, rho: float = 0.35, tps: float = 400.0, load_s: float = 3.0,
                  seed: int = 0, mix: Sequence[float] = (0.6, 0.25, 0.15), max_tokens_row: int = 1500) -> BoxScenario:
    """(c): ``n`` requests, each for model a or b at random, Poisson arrivals at ``rho`` of the
    generation time alone (loads come on top)."""
    rng = random.Random(seed)
    g = by_class([r for r in rows if r.tokens <= max_tokens_row])
    picked = []
    for _ in range(n):
        c = rng.choices((0, 1, 2), weights=mix)[0]
        picked.append(rng.choice(g[c]))
    mean_s = sum(r.tokens for r in picked) / len(picked) / tps
    times = poisson_arrivals(n, rho / mean_s, seed)
    pairs = [(r, rng.choice(("model-a", "model-b"))) for r in picked]
    # the same prompt may be drawn twice: the emulator keys by prompt, so make each unique
    pairs = [(Row(f"{r.prompt}\n[{i}]", r.tokens), m) for i, (r, m) in enumerate(pairs)]
    return BoxScenario("no-fit steady", _two_model_box(tps, load_s, 1.0), _numbered(pairs, times),
                       {"n": n, "rho": rho, "tps": tps, "load_s": load_s, "mean_gen_s": mean_s})


def speeds_apart(rows: Sequence[Row], n: int = 10, fast_tps: float = 1000.0, ratio: float = 10.0,
                 gap_s: float = 0.02, seed: int = 0, max_long_tokens: int = 1200) -> BoxScenario:
    """(d): models ``fast`` and ``slow`` (``ratio`` times slower per token) loaded side by
    side; per model n/2 Short + n/2 Long, interleaved."""
    picked = burst(rows, n, n, seed=seed + 1, max_long_tokens=max_long_tokens)
    fast = [(Row(j.prompt, j.tokens), "fast") for j in picked[0::2]]
    slow = [(Row(j.prompt, j.tokens), "slow") for j in picked[1::2]]
    pairs = _interleave([fast, slow])
    box = BoxConfig(models=(ModelSpec("fast", tokens_per_s=fast_tps), ModelSpec("slow", tokens_per_s=fast_tps / ratio)),
                    max_loaded=2, preload=("fast", "slow"), share=1.0)
    return BoxScenario("speeds apart", box, _numbered(pairs, [i * gap_s for i in range(len(pairs))]),
                       {"n": n, "fast_tps": fast_tps, "ratio": ratio})


__all__ = ["ModelJob", "BoxScenario", "side_by_side", "no_fit_burst", "no_fit_steady", "speeds_apart",
           "AUTOCOMPLETE_TOKENS"]
