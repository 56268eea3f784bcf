"""Run one row of a box scenario: an emulated box behind a real LiteLLM proxy, with or without
the plugin (``benchmarks/box_bench.py``).

Contract: :func:`run_row` starts an emulator box (:class:`~sjf_lab.emulator.EmulatorThread`)
for the scenario, a LiteLLM proxy whose model list names each of the box's models on the
box's one URL through ``provider`` (``openai``: ``openai/<model>`` at ``…/v1``;
``ollama_chat``: ``ollama_chat/<model>`` at the root), and the plugin when ``row.plugin``
(with ``row.env``: ``SJF_CONFIG`` and any ``SJF_*``; Redis mode with ``redis_url`` and
``workers``). It warms every model up, resets the box (unloads, counters), sends the jobs at
their arrival offsets (streamed chat completions, one sender per model), and returns each
repetition's client records and the box's ``stats()``. Processes it started are stopped on
every path. Prompt text goes only to the local emulator.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Sequence

from sjf_lab.bench.box_workload import BoxScenario, ModelJob
from sjf_lab.bench.client import HttpSender
from sjf_lab.bench.stats import RequestRecord
from sjf_lab.bench.workload import Job
from sjf_lab.emulator import EmulatorConfig, EmulatorThread
from sjf_lab.proxy_runner import LiteLLMProxy, proxy_config

PROVIDERS = ("openai", "ollama_chat")
WARM_PROMPT = "Warm up {model} before the run (box benchmark)."


@dataclass
class RowSpec:
    """One row: a label, the plugin or not, its environment, the LiteLLM provider."""

    label: str
    plugin: bool
    provider: str = "openai"
    env: dict = field(default_factory=dict)


@dataclass
class RowRun:
    """What one row measured: per repetition the client records, the box's stats and t0."""

    row: RowSpec
    reps: list = field(default_factory=list)  # [(records, stats, t0)]


def box_proxy_config(models: Sequence[str], port: int, provider: str, plugin: bool) -> dict:
    """A proxy config naming each model on the box's one URL through ``provider``."""
    if provider not in PROVIDERS:
        raise ValueError(f"provider must be one of {PROVIDERS}, got {provider!r}")
    base = f"http://127.0.0.1:{port}" + ("/v1" if provider == "openai" else "")
    cfg = proxy_config({}, plugin=plugin)
    cfg["model_list"] = [{"model_name": m, "litellm_params": {"model": f"{provider}/{m}", "api_base": base,
                                                             "api_key": "none"}} for m in models]
    return cfg


async def drive_models(jobs: Sequence[ModelJob], senders: dict, label: str) -> list[RequestRecord]:
    """Send each job to its model's sender at its arrival offset; records in job order."""
    t0 = time.monotonic()

    async def one(mj: ModelJob) -> RequestRecord:
        delay = t0 + mj.job.arrival - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        return await senders[mj.model](mj.job, label)

    return list(await asyncio.gather(*(asyncio.ensure_future(one(mj)) for mj in jobs)))


async def _rep(proxy: LiteLLMProxy, scenario: BoxScenario, label: str) -> list[RequestRecord]:
    senders = {m: HttpSender(proxy.openai_base_url, m, proxy.master_key) for m in scenario.models()}
    try:
        return await drive_models(scenario.jobs, senders, label)
    finally:
        for s in senders.values():
            await s.aclose()


async def _warm(proxy: LiteLLMProxy, scenario: BoxScenario) -> None:
    for m in scenario.models():
        s = HttpSender(proxy.openai_base_url, m, proxy.master_key)
        try:
            await s(Job(-1, WARM_PROMPT.format(model=m), 4), "warm-up")
        finally:
            await s.aclose()


def _fresh_box(emu: EmulatorThread) -> None:
    """Every model unloaded (the preloaded ones loaded again), counters zeroed."""
    emu.unload_all()
    deadline = time.monotonic() + 60
    while emu.stats()["box"]["loaded"] and time.monotonic() < deadline:
        time.sleep(0.05)
    emu.call(emu.emulator.box.preload)
    emu.reset()


def _log(*a) -> None:
    print(*a, flush=True)


def run_row(scenario: BoxScenario, row: RowSpec, reps: int = 1, workers: int = 1,
            redis_url: str | None = None, log=_log) -> RowRun:
    """Run ``reps`` repetitions of ``scenario`` for ``row`` (module docstring)."""
    trace = scenario.trace() + [{"prompt": WARM_PROMPT.format(model=m), "answer_tokens": 4}
                                for m in scenario.models()]
    out = RowRun(row)
    with EmulatorThread(EmulatorConfig(box=scenario.box, trace_records=trace, on_disconnect="stop")) as emu:
        env = dict(row.env)
        if row.plugin and redis_url is not None:
            env.setdefault("SJF_REDIS_URL", redis_url)
            env.setdefault("SJF_REDIS_PREFIX", f"boxbench-{row.label}-{time.time_ns()}")
        cfg = box_proxy_config(scenario.models(), emu.port, row.provider, row.plugin)
        n_workers = workers if row.plugin else 1
        with LiteLLMProxy(cfg, env=env, num_workers=n_workers, startup_timeout_s=600) as proxy:
            asyncio.run(_warm(proxy, scenario))
            for rep in range(reps):
                _fresh_box(emu)
                t0 = time.monotonic()
                records = asyncio.run(_rep(proxy, scenario, row.label))
                time.sleep(0.3)
                out.reps.append((records, emu.stats(), t0))
                failed = sum(1 for r in records if not r.ok)
                log(f"  [{scenario.name} / {row.label} / {row.provider}] rep {rep + 1}/{reps}: "
                    f"{len(records) - failed} ok, {failed} failed, box loads {out.reps[-1][1]['box']['loads']}")
    return out


__all__ = ["RowSpec", "RowRun", "run_row", "box_proxy_config", "drive_models", "PROVIDERS"]
