"""``sjf bench --scenario faults``: load and faults through a real proxy and a real redis-server.

One LiteLLM proxy (one worker) with the plugin in Redis mode (a throw-away ``redis-server``),
its scheduler from :mod:`sjf_lab.bench.fault_predictor`, in front of the emulator in its own
process (1 slot, generating an orphaned answer to its end: ``on_disconnect continue``).
Each round sends all its requests at once (:mod:`sjf_lab.bench.fault_load`: clients leaving
mid-answer, queued or after a stream's first chunk; backend errors and dropped connections;
predictor faults), while the emulator answers idle probes with a fault (a different one each
round), the backend is killed (SIGKILL) and restarted on its port, and so is Redis.

Figures per round (:func:`run_faults`): ``lost`` (a request with nothing planned against it
that did not complete, outside the backend's restart window), ``hung`` (no outcome by the
deadline), ``wrong_length`` (a completed answer of another length than planned),
``max_user_in_flight`` (the emulator's own count of user requests, over both lives of the
backend), ``slots_leaked`` (what the plugin and the emulator still hold once the round
settled), the probe outcomes, the gated requests by kind. Each of the first five must be 0
but ``max_user_in_flight``, which must equal the slots (1).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from sjf_lab.bench import fault_load as fl

#: The probe fault of each round, in turn: (fault, when, share of probes).
PROBE_MODES = (("503", "slot", 0.5), ("500", "slot", 0.5), ("timeout", "arrival", 0.3))
#: Seconds around the backend's restart in which an error is the restart's (planned).
RESTART_GRACE_S = 2.0


@dataclass
class FaultOptions:
    """Options of :func:`run_faults` (``sjf bench --scenario faults`` flags)."""

    requests: int = 600
    rounds: int = 3
    tokens_per_s: float = 5000.0
    mid_frac: float = 0.10
    seed: int = 1
    deadline_s: float = 480.0
    probe_timeout_s: float = 3.0
    backend_restart_at: float = 0.3  # share of the round's requests done when the backend is killed
    redis_restart_at: float = 0.6  # ... when Redis is killed


def _get(url: str, timeout: float = 10.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


class EmulatorProcess:
    """``sjf emulate`` in its own process, killed with SIGKILL and restarted on its port."""

    def __init__(self, trace: Path, tokens_per_s: float, workdir: Path):
        from sjf_lab.proxy_runner import free_port

        self.port, self.trace, self.tps, self.workdir = free_port(), trace, tokens_per_s, workdir
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{self.port}"
        self.peak_before = 0  # max user requests in flight in earlier lives

    def start(self) -> None:
        log = open(self.workdir / "emulator.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "sjf_lab.cli", "emulate", "--port", str(self.port),
                                      "--trace", str(self.trace), "--tokens-per-s", str(self.tps), "--tick-s", "0.005",
                                      "--on-disconnect", "continue"], stdout=log, stderr=subprocess.STDOUT)
        log.close()
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                _get(self.url + "/health", 1)
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the emulator did not start")

    def stats(self) -> dict:
        return _get(self.url + "/emulator/stats")

    def kill_and_restart(self, down_s: float = 0.3) -> tuple[float, float]:
        """SIGKILL, wait ``down_s``, start again; returns (killed at, back at) (monotonic s)."""
        try:
            self.peak_before = max(self.peak_before, self.stats()["peak_in_flight"])
        except OSError:
            pass
        t_kill = time.monotonic()
        self.stop(signal.SIGKILL)
        time.sleep(down_s)
        self.start()
        return t_kill, time.monotonic()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            p.send_signal(sig)
            p.wait(15)


async def _round(rnd: int, opts: FaultOptions, env: dict, emu: EmulatorProcess, redis, reqs) -> dict:
    import aiohttp

    fault, at, rate = PROBE_MODES[rnd % len(PROBE_MODES)]
    _post(emu.url + "/emulator/probe-fault", {"fault": fault, "at": at, "rate": rate})
    status = lambda: _get(f"http://127.0.0.1:{env['status_port']}/sjf/status")  # noqa: E731
    before = status()
    loop = asyncio.get_running_loop()
    events: dict = {}

    async def when_done(share: float):
        while sum(t.done() for t in tasks) < share * len(tasks):
            await asyncio.sleep(0.05)

    async def restarts():
        await when_done(opts.backend_restart_at)
        events["backend"] = await loop.run_in_executor(None, emu.kill_and_restart)
        _post(emu.url + "/emulator/probe-fault", {"fault": fault, "at": at, "rate": rate})
        await when_done(opts.redis_restart_at)
        t = time.monotonic()
        await loop.run_in_executor(None, lambda: redis.restart(down_s=0.5))
        events["redis"] = (t, time.monotonic())

    t0 = time.monotonic()
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=opts.deadline_s)) as s:
        tasks = [asyncio.ensure_future(fl.send(s, env["url"], env["key"], r, emu.url, opts.deadline_s)) for r in reqs]
        chaos = asyncio.ensure_future(restarts())
        done, pending = await asyncio.wait(tasks, timeout=opts.deadline_s)
        for t in pending:
            t.cancel()
        await asyncio.wait_for(chaos, 60)
    elapsed = time.monotonic() - t0
    results = [t.result() if t in done and not t.cancelled() and t.exception() is None else {"outcome": "hung"}
               for t in tasks]
    after = await _settle(status, emu, env)
    return _figures(rnd, reqs, results, before, after, emu, events, (fault, at, rate), elapsed)


async def _settle(status, emu: EmulatorProcess, env: dict, limit_s: float = 120.0) -> dict:
    """Wait until the plugin and the backend hold nothing (or ``limit_s``), then send one
    more request: the Redis store's counts are those of its last reply, and after a Redis
    restart that reply may predate the round's end. Returns the status after it."""
    import aiohttp

    loop = asyncio.get_running_loop()
    end = time.monotonic() + limit_s
    while True:
        st = await loop.run_in_executor(None, status)
        st["_emulator"] = await loop.run_in_executor(None, emu.stats)
        h = _held(st)
        if h["tracked_calls"] + h["draining"] + h["ledger_held"] + h["emulator_in_flight"] == 0:
            break
        if time.monotonic() > end:
            return st
        await asyncio.sleep(0.5)
    async with aiohttp.ClientSession() as s:
        await fl.send(s, env["url"], env["key"], fl.FaultRequest(-1, f"refresh {time.monotonic()}", 5, False),
                      emu.url, 60.0)
    end = time.monotonic() + 5.0  # its release reaches Redis just after its answer
    while True:
        st = await loop.run_in_executor(None, status)
        st["_emulator"] = await loop.run_in_executor(None, emu.stats)
        if sum(_held(st).values()) == 0 or time.monotonic() > end:
            return st
        await asyncio.sleep(0.1)


def _held(st: dict) -> dict:
    b = list(st.get("backends", {}).values())
    lr = list(st.get("last_resort", {}).get("backends", {}).values())
    return {"in_flight": sum(x["in_flight"] for x in b), "waiting": sum(x["waiting"] for x in b),
            "tracked_calls": st.get("tracked_calls", 0), "draining": st.get("draining", 0),
            "ledger_held": sum(x.get("held", 0) for x in lr), "emulator_in_flight": st["_emulator"]["in_flight"]}


def _delta(after: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items() if isinstance(v, (int, float))}


def _figures(rnd, reqs, results, before, after, emu, events, mode, elapsed) -> dict:
    t_kill, t_up = events.get("backend", (float("inf"), float("inf")))
    in_restart = lambda x: t_kill - 0.1 <= x.get("t_end", 0) <= t_up + RESTART_GRACE_S  # noqa: E731
    planned = lambda r: r.fault is not None or r.leave is not None  # noqa: E731
    lost = [r.i for r, x in zip(reqs, results)
            if not planned(r) and x["outcome"] not in ("ok", "hung") and not in_restart(x)]
    probes_b = next(iter(before.get("probes", {}).values()), {})
    probes_a = next(iter(after.get("probes", {}).values()), {})
    emu_stats = after["_emulator"]
    return {
        "round": rnd + 1, "requests": len(reqs), "elapsed_s": round(elapsed, 1),
        "probe_fault": {"fault": mode[0], "at": mode[1], "rate": mode[2]},
        "outcomes": dict(Counter(x["outcome"] for x in results)),
        "mid_answer_disconnects": sum(1 for x in results if x.get("mid")),
        "errors_seen": sum(1 for x in results if x["outcome"] == "error"),
        "errors_in_backend_restart_window": sum(1 for x in results if x["outcome"] == "error" and in_restart(x)),
        "lost": len(lost), "lost_requests": lost[:20],
        "hung": sum(1 for x in results if x["outcome"] == "hung"),
        "wrong_length": sum(1 for r, x in zip(reqs, results) if x["outcome"] == "ok" and x.get("words") != r.tokens),
        "max_user_in_flight": max(emu.peak_before, emu_stats["peak_in_flight"]),
        "slots_leaked": _held(after),
        "probes": _delta(probes_a, probes_b),
        "emulator_probe_faults": emu_stats.get("probe_faults", 0),
        "gated_by_kind": _delta(after.get("last_resort", {}).get("by_kind", {}),
                                before.get("last_resort", {}).get("by_kind", {})),
        "counters": _delta(after.get("counters", {}), before.get("counters", {})),
        "restarts": {k: {"down_s": round(v[1] - v[0], 2)} for k, v in events.items()},
    }


async def _run(opts: FaultOptions, work: Path) -> dict:
    from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config
    from sjf_lab.redis_server import RedisServer

    rng = random.Random(opts.seed)
    rounds = [fl.make_workload(opts.requests, rnd, rng, opts.tokens_per_s, opts.mid_frac) for rnd in range(opts.rounds)]
    trace = work / "trace.jsonl"
    warm = [fl.FaultRequest(i, f"warm-up {i}", 20, i % 2 == 0) for i in range(10)]
    trace.write_text("".join(json.dumps(x) + "\n" for rs in [warm, *rounds] for x in fl.trace_records(rs)))
    redis = RedisServer().start()
    emu = EmulatorProcess(trace, opts.tokens_per_s, work)
    proxy = None
    try:
        emu.start()
        status_port = free_port()
        proxy = LiteLLMProxy(proxy_config({"emu": emu.url + "/v1"}, plugin=True,
                                          litellm_settings={"request_timeout": opts.deadline_s}),
                             env={"SJF_STATUS_PORT": str(status_port), "SJF_REDIS_URL": redis.url,
                                  "SJF_REDIS_RETRY_S": "0.5", "SJF_PROBE_TIMEOUT_S": str(opts.probe_timeout_s),
                                  "SJF_SCHEDULER_FACTORY": "sjf_lab.bench.fault_predictor:make", "SJF_PLUGINS": "none"})
        await asyncio.get_running_loop().run_in_executor(None, proxy.start)
        env = {"url": proxy.openai_base_url + "/chat/completions", "key": proxy.master_key, "status_port": status_port}
        await _warm_up(env, warm, emu)
        out = []
        for rnd, reqs in enumerate(rounds):
            fig = await _round(rnd, opts, env, emu, redis, reqs)
            out.append(fig)
            print(line(fig), file=sys.stderr, flush=True)
        return {"options": asdict(opts), "rounds": out}
    finally:
        if proxy is not None:
            await asyncio.get_running_loop().run_in_executor(None, proxy.stop)
        emu.stop()
        redis.close()


async def _warm_up(env: dict, warm: list, emu: EmulatorProcess) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as s:
        for r in warm:
            await fl.send(s, env["url"], env["key"], r, emu.url, 60.0)


def run_faults(opts: FaultOptions) -> dict:
    """Run the scenario (module docstring); returns ``{"options", "rounds": [figures]}``."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    with tempfile.TemporaryDirectory(prefix="sjf-faults-") as d:
        return asyncio.run(_run(opts, Path(d)))


def line(fig: dict) -> str:
    """One round in one line."""
    return (f"round {fig['round']}: {fig['requests']} requests, {fig['mid_answer_disconnects']} left mid-answer, "
            f"lost {fig['lost']}, hung {fig['hung']}, wrong-length {fig['wrong_length']}, max user in flight "
            f"{fig['max_user_in_flight']}, slots leaked {sum(fig['slots_leaked'].values())}, probes {fig['probes']}, "
            f"gated {fig['gated_by_kind']}, {fig['elapsed_s']} s")


def passed(result: dict, slots: int = 1) -> bool:
    """True when every round kept the guarantees (0 lost, hung, wrong-length, leaked; max = slots)."""
    return all(f["lost"] == 0 and f["hung"] == 0 and f["wrong_length"] == 0 and f["max_user_in_flight"] == slots
               and sum(f["slots_leaked"].values()) == 0 for f in result["rounds"])


def markdown(result: dict) -> str:
    """The rounds as a markdown table (and the probe outcomes per round)."""
    rows = ["| round | requests | left mid-answer | probe fault | lost | hung | wrong-length | max user in flight "
            "| slots leaked | errors seen (in restart window) | probe outcomes | gated by kind |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in result["rounds"]:
        pf = f["probe_fault"]
        probes = ", ".join(f"{k} {v}" for k, v in f["probes"].items() if v)
        gated = ", ".join(f"{k} {v}" for k, v in f["gated_by_kind"].items() if v) or "0"
        rows.append(f"| {f['round']} | {f['requests']} | {f['mid_answer_disconnects']} | {pf['fault']} "
                    f"({pf['at']}, {pf['rate']:g}) | {f['lost']} | {f['hung']} | {f['wrong_length']} | "
                    f"{f['max_user_in_flight']} | {sum(f['slots_leaked'].values())} | {f['errors_seen']} "
                    f"({f['errors_in_backend_restart_window']}) | {probes} | {gated} |")
    return "\n".join(rows)
