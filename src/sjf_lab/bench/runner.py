"""Run scenarios × contenders on one backend through one path, and collect the results.

Protocol (DESIGN.md): every contender of a scenario gets the very same jobs and
arrival times; the backend's served-order log is reset in between; a short
warm-up request (not counted) precedes each contender's run. With ``repeat`` > 1
the contenders are run in alternating order (forward, then reversed, ...) and
the records of all repeats are pooled, so slow drift of the shared machine's load
does not favour one side.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import os
import platform
import time
from dataclasses import dataclass, field
from typing import Sequence

from sjf_lab.bench.client import drive
from sjf_lab.bench.policies import PolicySpec
from sjf_lab.bench.stats import RequestRecord, compare, service_stats, summarize
from sjf_lab.bench.workload import Job, ServiceModel, describe


@dataclass
class Scenario:
    """A named workload.

    Attributes:
        name: e.g. "burst", "poisson-0.74", "replay-0.80".
        jobs: the jobs (same for every contender).
        settings: what produced it (for the report), e.g. ``{"rho": 0.74, "mix": [...]}``.
    """

    name: str
    jobs: list[Job]
    settings: dict = field(default_factory=dict)
    #: served one at a time (each after the previous answered) before the scenario, not
    #: recorded: a scheduler that has already served traffic ("warm"), as users run it
    warmup: list[Job] = field(default_factory=list)
    #: seconds the backend is held busy while the jobs are submitted (0: not held), so that
    #: a burst is queued whole before any of it is served (needs ``EmulatorBackend``)
    hold_s: float = 0.0
    #: start the contender afresh (a new proxy / scheduler) before this scenario ("cold")
    fresh: bool = False


@dataclass
class ScenarioResult:
    """Results of one scenario: records, summaries and same-run comparisons per contender."""

    scenario: Scenario
    records: dict[str, list[RequestRecord]]
    summaries: dict
    comparisons: dict
    service: dict
    backend_stats: dict
    workload: dict
    wall_s: float


@dataclass
class BenchResult:
    """A whole ``sjf bench`` run."""

    path: str
    backend: str
    policies: list[str]
    scenarios: list[ScenarioResult]
    environment: dict
    settings: dict


def environment() -> dict:
    """Date, host and load of this machine, for the report."""
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    try:
        from importlib.metadata import version

        litellm_version = version("litellm")
    except Exception:
        litellm_version = None
    model = None
    try:
        import hashlib

        from sjf_core.predict._predictor import default_model_path

        mp = default_model_path()
        model = f"{mp.name} sha256:{hashlib.sha256(mp.read_bytes()).hexdigest()[:12]}"
    except Exception:
        pass
    return {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "default_model": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_avg_start": [round(x, 2) for x in load],
        "litellm": litellm_version,
    }


async def _warm_up(sender, model_hint: str = "") -> None:
    # A tiny request (not in the workload; the emulator gives it a fallback length, capped to
    # 1 token) so that lazy initialisation in the proxy or SDK is not charged to the first job.
    warm = Job(idx=-1, prompt="Say OK. (benchmark warm-up)", tokens=1, max_tokens=1)
    try:
        await sender(warm, "warm-up")
    except Exception:
        pass


async def _served_one_at_a_time(jobs: Sequence[Job], sender, label: str) -> None:
    for job in jobs:
        try:
            await sender(job, label)
        except Exception:
            pass


async def _drive_held(jobs: Sequence[Job], sender, label: str, backend, hold_s: float, bar) -> list:
    """Hold the backend with the bench's own request, submit ``jobs``, wait ``hold_s`` (all
    of them queued behind it), let the backend go, and collect the records, their submit
    time moved to the release (so latency is measured from when the backend became free)."""
    from sjf_lab.bench.backend import HOLD_PROMPT

    hold = asyncio.ensure_future(sender(Job(-2, HOLD_PROMPT, 1, 0.0, 1), "hold"))
    deadline = time.monotonic() + 60.0
    while backend.held() < 1 and time.monotonic() < deadline and not hold.done():
        await asyncio.sleep(0.01)
    run = asyncio.ensure_future(drive(jobs, sender, label, bar))
    await asyncio.sleep(hold_s)
    released = time.monotonic()
    backend.release_holds()
    recs = await run
    # latency counts from the moment the backend became free: the hold is the bench's own
    # device to queue the burst whole, not a wait any contender caused
    for r in recs:
        if r.submit < released:
            r.submit = released
    try:
        await hold
    except Exception:
        pass
    return recs


async def run_async(
    path,
    backend,
    scenarios: Sequence[Scenario],
    specs: Sequence[PolicySpec],
    predictor=None,
    repeat: int = 1,
    progress: bool = True,
) -> BenchResult:
    """Run every scenario under every contender (see module docstring).

    Args:
        path: a :class:`~sjf_lab.bench.paths.WrapperPath` or :class:`~sjf_lab.bench.paths.ProxyPath`.
        backend: an :class:`~sjf_lab.bench.backend.EmulatorBackend` or ``ExternalBackend``.
        scenarios: the workloads.
        specs: contenders; ``fcfs`` must be among them.
        predictor: the default predictor, for the records' predicted class.
        repeat: runs per contender and scenario (records pooled).
        progress: show a tqdm progress bar on stderr.
    """
    from tqdm import tqdm

    specs = [s for s in specs if not (s.litellm_priority and not path.supports_litellm_priority)]
    env = environment()
    total = sum(len(sc.jobs) for sc in scenarios) * len(specs) * repeat
    bar = tqdm(total=total, unit="req", desc="sjf bench", disable=not progress, dynamic_ncols=True)
    records: dict[str, dict[str, list[RequestRecord]]] = {sc.name: {s.label: [] for s in specs} for sc in scenarios}
    bstats: dict[str, dict[str, dict]] = {sc.name: {} for sc in scenarios}
    walls: dict[str, float] = {sc.name: 0.0 for sc in scenarios}
    predicted = {}
    if predictor is not None:
        for sc in scenarios:
            for j in sc.jobs:
                try:
                    predicted[(sc.name, j.idx)] = int(predictor.predict(j.prompt).klass)
                except Exception:
                    pass
    try:
        for rep in range(repeat):
            order = list(specs) if rep % 2 == 0 else list(reversed(specs))
            for spec in order:
                sender = await path.open(spec)
                try:
                    await _warm_up(sender)
                    for sc in scenarios:
                        bar.set_postfix_str(f"{sc.name} · {spec.label}" + (f" · rep {rep + 1}" if repeat > 1 else ""))
                        if sc.fresh and hasattr(path, "restart"):
                            aclose = getattr(sender, "aclose", None)
                            if aclose is not None:
                                await aclose()
                            sender = await path.restart(spec)
                        if sc.warmup:
                            await _served_one_at_a_time(sc.warmup, sender, "warm-up")
                        backend.reset()
                        t0 = time.monotonic()
                        if sc.hold_s > 0:
                            recs = await _drive_held(sc.jobs, sender, spec.label, backend, sc.hold_s, bar)
                        else:
                            recs = await drive(sc.jobs, sender, spec.label, bar)
                        walls[sc.name] += time.monotonic() - t0
                        st = backend.annotate(sc.jobs, recs)
                        bstats[sc.name][spec.label] = st
                        for r in recs:
                            r.predicted_class = predicted.get((sc.name, r.idx), -1)
                        records[sc.name][spec.label].extend(recs)
                finally:
                    aclose = getattr(sender, "aclose", None)
                    if aclose is not None:
                        await aclose()
    finally:
        bar.close()
        await path.close()
    results = []
    service = getattr(backend, "service", None)
    for sc in scenarios:
        recs = records[sc.name]
        sums = {label: summarize(rs, label) for label, rs in recs.items()}
        oracle = "oracle" if "oracle" in sums else None
        comps = compare(sums, recs, fcfs="fcfs", oracle=oracle)
        svc = service_stats(recs.get("fcfs", []))
        w = describe(sc.jobs, service if isinstance(service, ServiceModel) else None)
        busy = measured_utilisation(recs.get("fcfs", []))
        if busy == busy:  # not NaN
            w["measured_busy_fcfs"] = busy
        results.append(ScenarioResult(sc, recs, sums, comps, svc, bstats[sc.name], w, walls[sc.name]))
    env["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    return BenchResult(path=path.name, backend=backend.describe(), policies=[s.label for s in specs],
                       scenarios=results, environment=env, settings={"repeat": repeat})


def run(*args, **kw) -> BenchResult:
    """Synchronous :func:`run_async`."""
    return asyncio.run(run_async(*args, **kw))


def measured_utilisation(records: Sequence[RequestRecord]) -> float:
    """Fraction of the run (first submit → last end) the backend spent serving, from the
    dispatch and end times (NaN when dispatch is unobserved)."""
    import math

    done = [r for r in records if r.ok and math.isfinite(r.dispatch) and math.isfinite(r.end)]
    if not done:
        return math.nan
    span = max(r.end for r in done) - min(r.submit for r in records)
    return sum(r.end - r.dispatch for r in done) / span if span > 0 else math.nan


def pool(results: Sequence[ScenarioResult], name: str, service: ServiceModel | None = None) -> ScenarioResult:
    """Merge scenario results of the same kind (e.g. one burst per seed) into one: records of
    each contender are concatenated and the summaries and ratios recomputed on the pool."""
    labels = list(results[0].records)
    records = {lab: [r for res in results for r in res.records.get(lab, [])] for lab in labels}
    sums = {lab: summarize(rs, lab) for lab, rs in records.items()}
    comps = compare(sums, records, fcfs="fcfs", oracle="oracle" if "oracle" in sums else None)
    jobs = [j for res in results for j in res.scenario.jobs]
    settings = {k: v for k, v in results[0].scenario.settings.items() if k != "seed"}
    settings["seeds"] = [res.scenario.settings.get("seed") for res in results]
    settings["pooled_runs"] = len(results)
    w = describe(jobs, service)
    w.pop("offered_rho", None)
    return ScenarioResult(Scenario(name, jobs, settings), records, sums, comps,
                          service_stats(records.get("fcfs", [])), results[0].backend_stats, w,
                          sum(res.wall_s for res in results))
