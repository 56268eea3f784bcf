"""Benchmark workloads: which prompts are sent, with which true lengths, at which times.

A workload is a list of :class:`Job` (prompt, recorded answer tokens, arrival
offset in seconds). The same list is replayed for every policy of a run, so every
policy sees the same arrivals (DESIGN.md "Benchmark protocol").

Scenarios (paper §5):

* :func:`burst`: N Short + N Long (+ optional Medium) submitted at once, in a
  seeded random order;
* :func:`poisson`: jobs sampled with a class mix, Poisson arrivals at utilisation
  ρ = λ · E[S] (E[S] from a :class:`ServiceModel`);
* :func:`replay`: consecutive rows of a JSONL log in file order (its natural
  class mix), Poisson arrivals at a target ρ.

Data rows are JSON objects with ``prompt`` (str) and ``response_tokens`` (or
``answer_tokens``, int >= 0), e.g. ``conversations/sharegpt.jsonl`` (docs/data.md: the format, its public sources).
Prompt text stays in memory only: it is sent to the backend under test and never
logged or written anywhere except the emulator trace file the bench itself makes.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from sjf_core.policy._entry import LONG, MEDIUM, SHORT, class_of_tokens
from sjf_lab.train_data import prompt_key, split_of


@dataclass(frozen=True)
class Job:
    """One request of a workload.

    Attributes:
        idx: position in the workload (stable across policies).
        prompt: the user message sent (chat/completions).
        tokens: the recorded answer length in tokens (the emulator serves exactly
            this many; a real backend answers what it answers).
        arrival: submit time, seconds after the start of the run (0 for a burst).
        max_tokens: answer cap sent with the request, or None.
    """

    idx: int
    prompt: str
    tokens: int
    arrival: float = 0.0
    max_tokens: int | None = None

    @property
    def klass(self) -> int:
        """Recorded class (0 Short, 1 Medium, 2 Long)."""
        return class_of_tokens(self.tokens)


@dataclass(frozen=True)
class ServiceModel:
    """Service time of a serial backend: ``S = overhead_s + tokens / tokens_per_s`` seconds.

    For the emulator it is exact (its ``first_token_s`` is the overhead); for a real
    backend it is an estimate, given by the user or calibrated.
    """

    tokens_per_s: float
    overhead_s: float = 0.0

    def __post_init__(self):
        if not self.tokens_per_s > 0:
            raise ValueError("tokens_per_s must be > 0")
        if not self.overhead_s >= 0:
            raise ValueError("overhead_s must be >= 0")

    def seconds(self, tokens: float) -> float:
        return self.overhead_s + float(tokens) / self.tokens_per_s

    def mean(self, jobs: Sequence[Job]) -> float:
        """E[S] over ``jobs`` in seconds (NaN when empty)."""
        if not jobs:
            return math.nan
        return float(np.mean([self.seconds(j.tokens) for j in jobs]))


@dataclass(frozen=True)
class Row:
    """One data row: a prompt and its recorded answer length."""

    prompt: str
    tokens: int


def load_rows(
    path: str | Path,
    max_prompt_chars: int = 6000,
    min_prompt_chars: int = 1,
    limit: int | None = None,
    split: str | None = None,
) -> list[Row]:
    """Read ``{prompt, response_tokens|answer_tokens}`` rows from a JSONL file, in file order.

    ``split`` ("test", "val" or "train") keeps only prompts in that part of the fixed
    split by prompt of ``sjf train`` (:func:`sjf_lab.train_data.split_of`): benchmark
    with ``"test"`` so the shipped predictor never scores a prompt it was trained on.

    Rows with a missing or non-string prompt, a missing or negative length, a prompt
    outside [``min_prompt_chars``, ``max_prompt_chars``] characters, or a prompt seen
    before (exact duplicate) are skipped: the emulator identifies requests by
    prompt, so prompts must be unique within a workload.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file holds no usable row.
    """
    rows: list[Row] = []
    seen: set[str] = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(d, dict):
                continue
            p = d.get("prompt")
            t = d.get("response_tokens", d.get("answer_tokens"))
            if not isinstance(p, str) or isinstance(t, bool) or not isinstance(t, (int, float)) or not t >= 0:
                continue
            if not (min_prompt_chars <= len(p) <= max_prompt_chars) or not p.strip() or p in seen:
                continue
            if split is not None and split_of(prompt_key(p)) != split:
                continue
            seen.add(p)
            rows.append(Row(p, int(t)))
            if limit is not None and len(rows) >= limit:
                break
    if not rows:
        raise ValueError(f"{path}: no usable rows (need 'prompt' and 'response_tokens')")
    return rows


def by_class(rows: Iterable[Row]) -> dict[int, list[Row]]:
    """Rows grouped by recorded class (keys 0, 1, 2; every key present)."""
    out: dict[int, list[Row]] = {SHORT: [], MEDIUM: [], LONG: []}
    for r in rows:
        out[class_of_tokens(r.tokens)].append(r)
    return out


def _sample(pool: list[Row], n: int, rng: random.Random, what: str) -> list[Row]:
    if n > len(pool):
        raise ValueError(f"need {n} {what} prompts, the data has only {len(pool)}")
    return rng.sample(pool, n)


def burst(
    rows: Sequence[Row],
    n_short: int,
    n_long: int,
    n_medium: int = 0,
    seed: int = 0,
    max_tokens: int | None = None,
    max_long_tokens: int | None = None,
) -> list[Job]:
    """N Short + N Long (+ N Medium) jobs, all arriving at t = 0, in a seeded random order.

    Args:
        rows: the data (see :func:`load_rows`).
        n_short, n_long, n_medium: jobs of each recorded class.
        seed: sampling and ordering seed.
        max_tokens: answer cap sent with every request (a real backend), or None.
        max_long_tokens: drop Long rows recorded longer than this (keeps a run short), or None.

    Raises:
        ValueError: a class has fewer rows than asked for, or a count is negative.
    """
    if min(n_short, n_long, n_medium) < 0:
        raise ValueError("job counts must be >= 0")
    rng = random.Random(seed)
    g = by_class(rows)
    longs = [r for r in g[LONG] if max_long_tokens is None or r.tokens <= max_long_tokens]
    picked = (_sample(g[SHORT], n_short, rng, "Short") + _sample(g[MEDIUM], n_medium, rng, "Medium")
              + _sample(longs, n_long, rng, "Long"))
    rng.shuffle(picked)
    return [Job(i, r.prompt, r.tokens, 0.0, max_tokens) for i, r in enumerate(picked)]


def poisson_arrivals(n: int, rate_per_s: float, seed: int = 0) -> list[float]:
    """``n`` Poisson arrival times (seconds, first at 0) at ``rate_per_s`` arrivals per second.

    Raises:
        ValueError: ``rate_per_s`` <= 0 or ``n`` < 0.
    """
    if not rate_per_s > 0:
        raise ValueError("arrival rate must be > 0")
    if n < 0:
        raise ValueError("n must be >= 0")
    if n == 0:
        return []
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate_per_s, n - 1)
    return [0.0] + list(np.cumsum(gaps).astype(float))


def at_utilisation(jobs: Sequence[Job], rho: float, service: ServiceModel, seed: int = 0) -> list[Job]:
    """The same jobs with Poisson arrivals at ρ = λ · E[S], E[S] the mean service time of ``jobs``.

    Raises:
        ValueError: ρ not in (0, 1.5] or no jobs.
    """
    if not 0 < rho <= 1.5:
        raise ValueError(f"rho must be in (0, 1.5], got {rho!r}")
    if not jobs:
        raise ValueError("no jobs")
    lam = rho / service.mean(jobs)
    times = poisson_arrivals(len(jobs), lam, seed)
    return [Job(j.idx, j.prompt, j.tokens, t, j.max_tokens) for j, t in zip(jobs, times)]


def poisson(
    rows: Sequence[Row],
    n: int,
    rho: float,
    service: ServiceModel,
    mix: Sequence[float] = (0.5, 0.25, 0.25),
    seed: int = 0,
    max_tokens: int | None = None,
) -> list[Job]:
    """``n`` jobs sampled with class ``mix`` (Short, Medium, Long weights), Poisson arrivals at ρ.

    Each job's class is drawn from ``mix`` and then a row of that class at random,
    without replacement while the class has rows left; a class with fewer rows than
    jobs (Long prompts are rare in held-out ShareGPT) repeats rows at random after
    using each once (a repeated prompt is a new request with the same recorded length).
    ρ = λ · E[S] with E[S] over the drawn jobs, so the offered load is exactly ρ for
    this sample.

    Raises:
        ValueError: bad ``mix``, ρ, or a class with no rows but a positive weight.
    """
    if len(mix) != 3 or min(mix) < 0 or sum(mix) <= 0:
        raise ValueError("mix needs three weights >= 0 (Short, Medium, Long) with a positive sum")
    rng = random.Random(seed)
    g = by_class(rows)
    w = np.asarray(mix, float) / float(sum(mix))
    counts = np.random.default_rng(seed).multinomial(n, w)
    picked: list[Row] = []
    for c, k in zip((SHORT, MEDIUM, LONG), counts):
        k, pool = int(k), g[c]
        if k > len(pool) and pool:
            picked += rng.sample(pool, len(pool)) + rng.choices(pool, k=k - len(pool))
        else:
            picked += _sample(pool, k, rng, ("Short", "Medium", "Long")[c])
    rng.shuffle(picked)
    jobs = [Job(i, r.prompt, r.tokens, 0.0, max_tokens) for i, r in enumerate(picked)]
    return at_utilisation(jobs, rho, service, seed)


def replay(
    rows: Sequence[Row],
    n: int,
    rho: float,
    service: ServiceModel,
    offset: int = 0,
    seed: int = 0,
    max_tokens: int | None = None,
) -> list[Job]:
    """Rows ``offset`` … ``offset+n-1`` in file order (the log's own class mix), Poisson arrivals at ρ.

    Raises:
        ValueError: fewer than ``offset + n`` rows, or a bad ρ.
    """
    if offset < 0 or n <= 0 or offset + n > len(rows):
        raise ValueError(f"replay needs rows {offset}..{offset + n - 1}; the data has {len(rows)}")
    jobs = [Job(i, r.prompt, r.tokens, 0.0, max_tokens) for i, r in enumerate(rows[offset:offset + n])]
    return at_utilisation(jobs, rho, service, seed)


def trace_records(jobs: Iterable[Job]) -> list[dict]:
    """Emulator trace records ``{prompt, answer_tokens}`` of ``jobs`` (kept in memory)."""
    return [{"prompt": j.prompt, "answer_tokens": int(j.tokens)} for j in jobs]


def describe(jobs: Sequence[Job], service: ServiceModel | None = None) -> dict:
    """Counts per recorded class, mean tokens, and (with a service model) E[S] and C² of S."""
    counts = {name: 0 for name in ("short", "medium", "long")}
    for j in jobs:
        counts[("short", "medium", "long")[j.klass]] += 1
    d: dict = {"n": len(jobs), "classes": counts,
               "mean_tokens": float(np.mean([j.tokens for j in jobs])) if jobs else math.nan}
    if service is not None and jobs:
        s = np.array([service.seconds(j.tokens) for j in jobs])
        d["mean_service_s"] = float(s.mean())
        d["service_scv"] = float(s.var() / s.mean() ** 2) if s.mean() > 0 else math.nan
        span = max(j.arrival for j in jobs)
        if span > 0 and len(jobs) > 1:
            d["offered_rho"] = float((len(jobs) - 1) / span * s.mean())
    return d
