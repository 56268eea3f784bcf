"""``sjf demo``: the same burst through a real LiteLLM proxy twice, FCFS and SJF.

It starts the serial backend emulator (1 slot, answer lengths from a trace of the
chosen prompts, which only the emulator reads) and two real LiteLLM proxies in front
of it: one without the plugin (FCFS: the backend serves its FIFO) and one with
``litellm_sjf``. It sends the same burst (same prompts, same submission order) through
each, and prints P50/P95 latency per **true** class (from the answer tokens), the
short-P50 reduction (1 − P50_SJF/P50_FCFS) and the long-P95 inflation
(P95_SJF/P95_FCFS − 1), as defined in DESIGN.md "Metrics".

Prompts: the shipped ``sjf_core/data/demo_prompts.jsonl`` (short factual questions and
long generation tasks, in our own words) or ``--data FILE.jsonl`` with recorded
answers (``{"prompt", "response_tokens"}``), from which ``--n-short`` Short (< 200
tokens) and ``--n-long`` Long (>= 800 tokens) prompts are drawn with ``--seed``.
Prompt text is never printed.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

HELP = "run the same burst through a LiteLLM proxy with FCFS and with SJF, and compare latency per true class"

SHORT_MAX = 200
LONG_MIN = 800


def add_arguments(p) -> None:
    p.add_argument("--data", default=None, help="JSONL with {prompt, response_tokens} (docs/data.md); default: the shipped demo prompts")
    p.add_argument("--n-short", type=int, default=20, help="Short prompts drawn from --data (default 20)")
    p.add_argument("--n-long", type=int, default=20, help="Long prompts drawn from --data (default 20)")
    p.add_argument("--seed", type=int, default=0, help="seed of the prompt draw and the submission order")
    p.add_argument("--split", choices=("test", "all"), default="test",
                   help="draw --data prompts only from the held-out test split of `sjf train` (default: test, "
                        "i.e. prompts the shipped model never trained on), or from all")
    p.add_argument("--tokens-per-s", default="auto",
                   help="emulator speed in tokens/s, or 'auto' (the burst's answers take about --run-s seconds)")
    p.add_argument("--run-s", type=float, default=30.0, help="target seconds of backend work per run for 'auto'")
    p.add_argument("--policy", default=None, help="plugin policy (default: the plugin's, SJF_POLICY or sjf-tokens)")
    p.add_argument("--tau", default=None, help="plugin τ, e.g. 3x, 6 (seconds) or off (default: the plugin's)")
    p.add_argument("--promotion", default=None, help="plugin τ promotion rule (default: the core's)")
    p.add_argument("--no-stream", action="store_true", help="send non-streaming requests (no TTFT column)")
    p.add_argument("--stagger-ms", type=float, default=10.0, help="gap between submissions in the burst, ms")
    p.add_argument("--no-hold", action="store_true",
                   help="do not hold the backend until the whole burst is queued (latency then includes "
                        "the proxy's ingestion, and a busy machine trickles the burst in)")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


# ---- prompts ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DemoPrompt:
    """A prompt and its true answer length (tokens). ``text`` is never printed."""

    text: str
    answer_tokens: int

    @property
    def klass(self) -> str:
        return "short" if self.answer_tokens < SHORT_MAX else ("long" if self.answer_tokens >= LONG_MIN else "medium")


def default_prompts() -> list[DemoPrompt]:
    """The shipped demo prompts (``sjf_core/data/demo_prompts.jsonl``)."""
    text = resources.files("sjf_lab").joinpath("data/demo_prompts.jsonl").read_text(encoding="utf-8")
    return [DemoPrompt(r["prompt"], int(r["answer_tokens"])) for r in map(json.loads, filter(str.strip, text.splitlines()))]


def pick_from_data(path: str | Path, n_short: int, n_long: int, seed: int = 0,
                   max_chars: int = 20000, split: str = "all") -> list[DemoPrompt]:
    """Draw ``n_short`` Short and ``n_long`` Long prompts (distinct texts) from a JSONL file
    of ``{"prompt": str, "response_tokens": int}``. ``split="test"`` keeps only prompts in
    the held-out test split of ``sjf train`` (:func:`sjf_lab.train_data.split_of`).

    Raises:
        ValueError: the file has fewer usable Short or Long prompts than asked for.
    """
    from sjf_lab.train_data import prompt_key, split_of

    shorts, longs, seen = [], [], set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            t, n = r.get("prompt"), r.get("response_tokens", r.get("answer_tokens"))
            if not isinstance(t, str) or not t.strip() or len(t) > max_chars or t in seen:
                continue
            if isinstance(n, bool) or not isinstance(n, (int, float)) or n < 1:
                continue
            if split != "all" and split_of(prompt_key(t)) != split:
                continue
            seen.add(t)
            if n < SHORT_MAX:
                shorts.append(DemoPrompt(t, int(n)))
            elif n >= LONG_MIN:
                longs.append(DemoPrompt(t, int(n)))
    if len(shorts) < n_short or len(longs) < n_long:
        raise ValueError(f"{path}: only {len(shorts)} Short and {len(longs)} Long usable prompts in split "
                         f"{split!r} (asked for {n_short} and {n_long})")
    rng = random.Random(seed)
    return rng.sample(shorts, n_short) + rng.sample(longs, n_long)


# ---- statistics --------------------------------------------------------------------------
def percentile(values, q: float) -> float:
    """The q-th percentile (0–100) with linear interpolation; NaN for no values."""
    v = sorted(values)
    if not v:
        return math.nan
    pos = (len(v) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


@dataclass
class Result:
    klass: str
    tokens: int
    e2e_s: float = math.nan
    ttft_s: float = math.nan
    error: str | None = None


@dataclass
class RunStats:
    name: str
    results: list = field(default_factory=list)
    wall_s: float = 0.0

    def values(self, klass: str, attr: str) -> list[float]:
        return [getattr(r, attr) for r in self.results if r.klass == klass and r.error is None]

    def summary(self) -> dict:
        out = {"wall_s": self.wall_s, "errors": sum(r.error is not None for r in self.results)}
        for k in ("short", "medium", "long"):
            e2e = self.values(k, "e2e_s")
            if e2e:
                out[k] = {"n": len(e2e), "p50_s": percentile(e2e, 50), "p95_s": percentile(e2e, 95),
                          "ttft_p50_s": percentile(self.values(k, "ttft_s"), 50)}
        return out


# ---- the burst ---------------------------------------------------------------------------
BLOCKER_PROMPT = "clairvoyant-sjf demo: hold the backend while the burst is queued"


async def _wait_until(cond, timeout_s: float, every_s: float = 0.05) -> bool:
    """Poll ``cond()`` (a cheap local check) until it is true or ``timeout_s`` passes."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        await asyncio.sleep(every_s)
    return cond()


async def run_burst(base_url: str, api_key: str, prompts: list[DemoPrompt], stream: bool, stagger_s: float,
                    on_done=None, model: str = "demo", held=None) -> list[Result]:
    """Submit every prompt (in list order, ``stagger_s`` apart) and wait for all answers.

    With ``held=(emulator, queued)``, the burst is "submitted together" as in the paper's
    burst benchmark (§5.3): a blocker request first holds the backend, the burst is sent,
    and once ``queued()`` reports every request waiting (in the plugin's queue or in the
    backend's FIFO) the blocker is released. Latencies are then measured from that release,
    so how fast the proxy ingests the burst (slow on a busy machine) cannot turn the burst
    into a trickle that FCFS and SJF serve alike.
    """
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=900,
                                http_client=openai.DefaultAsyncHttpxClient())
    release_at: list[float] = []

    async def one(p: DemoPrompt, delay: float) -> Result:
        await asyncio.sleep(delay)
        res = Result(p.klass, p.answer_tokens)
        t0 = t_submit = time.monotonic()
        try:
            msgs = [{"role": "user", "content": p.text}]
            if stream:
                s = await client.chat.completions.create(model=model, messages=msgs, stream=True)
                async for chunk in s:
                    if math.isnan(res.ttft_s) and chunk.choices and chunk.choices[0].delta.content:
                        res.ttft_s = time.monotonic() - t0
            else:
                await client.chat.completions.create(model=model, messages=msgs)
            res.e2e_s = time.monotonic() - t0
        except Exception as exc:  # reported in the table, never raised
            res.error = type(exc).__name__
        if release_at:  # held burst: every request was queued before the release
            shift = release_at[0] - t_submit
            res.e2e_s -= shift
            res.ttft_s -= shift
        if on_done:
            on_done()
        return res

    async def blocker() -> None:
        msgs = [{"role": "user", "content": BLOCKER_PROMPT}]
        try:
            await client.chat.completions.create(model=model, messages=msgs, max_tokens=1)
        except Exception:
            pass

    try:
        if held is None:
            return await asyncio.gather(*[one(p, i * stagger_s) for i, p in enumerate(prompts)])
        emu, queued = held
        block = asyncio.create_task(blocker())
        if not await _wait_until(lambda: emu.stats().get("held", 0) >= 1, 120):
            print("warning: the blocker request never reached the backend", file=sys.stderr)
        tasks = [asyncio.create_task(one(p, i * stagger_s)) for i, p in enumerate(prompts)]
        if not await _wait_until(lambda: queued() >= len(prompts), 120):
            print(f"warning: only {queued()} of {len(prompts)} requests queued before the release", file=sys.stderr)
        release_at.append(time.monotonic())
        emu.release_holds()
        results = await asyncio.gather(*tasks)
        await block
        return results
    finally:
        await client.close()


def _fmt(x: float) -> str:
    return "     -" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:6.1f}"


def render(runs: list[RunStats], stream: bool) -> str:
    """The comparison table (seconds) and the headline ratios."""
    lines = []
    head = f"{'policy':<6} {'class':<6} {'n':>3}  {'P50 e2e':>7}  {'P95 e2e':>7}"
    if stream:
        head += f"  {'P50 TTFT':>8}"
    lines += [head, "-" * len(head)]
    sums = {r.name: r.summary() for r in runs}
    for r in runs:
        s = sums[r.name]
        for k in ("short", "medium", "long"):
            if k in s:
                row = f"{r.name:<6} {k:<6} {s[k]['n']:>3}  {_fmt(s[k]['p50_s'])} s {_fmt(s[k]['p95_s'])} s"
                if stream:
                    row += f"  {_fmt(s[k]['ttft_p50_s'])} s"
                lines.append(row)
    f, j = sums.get("FCFS", {}), sums.get("SJF", {})
    if "short" in f and "short" in j:
        lines.append(f"short-P50 reduction (1 - P50_SJF/P50_FCFS): {1 - j['short']['p50_s'] / f['short']['p50_s']:+.0%}")
    if "long" in f and "long" in j:
        lines.append(f"long-P95 inflation  (P95_SJF/P95_FCFS - 1): {j['long']['p95_s'] / f['long']['p95_s'] - 1:+.0%}")
    for r in runs:
        if sums[r.name]["errors"]:
            lines.append(f"{r.name}: {sums[r.name]['errors']} request(s) failed")
    return "\n".join(lines)


def predictor_ranking(prompts: list[DemoPrompt]) -> float | None:
    """Ranking accuracy (paper Eq. 2) of the plugin's predictor on these prompts, scoring by
    expected answer tokens (the default ``sjf-tokens`` key), or None when the predictor
    cannot be loaded. Diagnostic only: SJF gains track it."""
    try:
        from sjf_core.predict._predictor import load_predictor
        from sjf_core.predict._rank_metrics import ranking_accuracy

        spec = os.environ.get("SJF_PREDICTOR")
        pred = load_predictor(None if spec in (None, "", "default") else spec)
        scores = [pred.predict(p.text).expected_tokens for p in prompts]
        return ranking_accuracy(scores, [p.answer_tokens for p in prompts])[0]
    except Exception:
        return None


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _plugin_waiting(port: int) -> int:
    """Requests waiting in the plugin's queues, from its read-only status endpoint (0 if unreachable)."""
    import httpx

    try:
        st = httpx.get(f"http://127.0.0.1:{port}/sjf/status", timeout=2).json()
        return sum(int(b.get("waiting", 0)) for b in st.get("backends", {}).values())
    except Exception:
        return 0


def run(args) -> int:
    from sjf_lab.emulator import EmulatorThread
    from sjf_lab.proxy_runner import LiteLLMProxy, ProxyStartError, proxy_config

    t_start = time.monotonic()
    try:
        if args.data:
            prompts = pick_from_data(args.data, args.n_short, args.n_long, args.seed, split=args.split)
            source = (f"{Path(args.data).name} ({args.n_short} Short + {args.n_long} Long, seed {args.seed}, "
                      f"{'held-out test split' if args.split == 'test' else 'all prompts'})")
        else:
            prompts = default_prompts()
            source = "the shipped demo prompts"
    except (OSError, ValueError) as exc:
        print(f"sjf demo: {exc}", file=sys.stderr)
        return 2
    random.Random(args.seed).shuffle(prompts)  # one submission order, used by both runs
    total_tokens = sum(p.answer_tokens for p in prompts)
    if str(args.tokens_per_s).lower() == "auto":
        rate = max(50.0, math.ceil(total_tokens / args.run_s / 10.0) * 10.0)
    else:
        rate = float(args.tokens_per_s)
    n_by = {k: sum(p.klass == k for p in prompts) for k in ("short", "medium", "long")}
    sjf_env = {}
    for opt, var in (("policy", "SJF_POLICY"), ("tau", "SJF_TAU"), ("promotion", "SJF_PROMOTION")):
        if getattr(args, opt) is not None:
            sjf_env[var] = str(getattr(args, opt))
    shown = {v: sjf_env.get(v, os.environ.get(v, "(default)")) for v in ("SJF_POLICY", "SJF_TAU", "SJF_PROMOTION")}
    print(f"sjf demo: {len(prompts)} prompts from {source}: {n_by['short']} Short, {n_by['medium']} Medium, "
          f"{n_by['long']} Long; {total_tokens} answer tokens")
    print(f"backend: emulator, 1 slot, {rate:g} tokens/s (~{total_tokens / rate:.0f} s of work per run); "
          f"{'streaming' if not args.no_stream else 'non-streaming'}, burst submitted {args.stagger_ms:g} ms apart"
          + ("" if args.no_hold else ", backend held until all are queued, latency from the release"))
    acc = predictor_ranking(prompts)
    print("plugin: " + ", ".join(f"{k}={v}" for k, v in shown.items())
          + (f"; predictor ranking accuracy on this burst: {acc:.2f}" if acc is not None else ""))
    print("starting the emulator and two LiteLLM proxies (FCFS: no plugin; SJF: litellm_sjf) ...", flush=True)

    trace = [{"prompt": p.text, "answer_tokens": p.answer_tokens} for p in prompts]
    trace.append({"prompt": BLOCKER_PROMPT, "answer_tokens": 1, "fault": "hold"})
    emu = EmulatorThread(tokens_per_s=rate, slots=1, trace_records=trace)
    status_port = _free_port()
    sjf_env.setdefault("SJF_STATUS_PORT", str(status_port))
    proxies = {"FCFS": LiteLLMProxy(proxy_config({"demo": [emu.base_url]}, plugin=False)),
               "SJF": LiteLLMProxy(proxy_config({"demo": [emu.base_url]}, plugin=True), env=sjf_env)}
    queued = {"FCFS": lambda: emu.stats().get("waiting", 0),
              "SJF": lambda: emu.stats().get("waiting", 0) + _plugin_waiting(int(sjf_env["SJF_STATUS_PORT"]))}
    runs: list[RunStats] = []
    try:
        with ThreadPoolExecutor(2) as ex:
            for fut in [ex.submit(p.start) for p in proxies.values()]:
                fut.result()
        print(f"proxies up after {time.monotonic() - t_start:.0f} s", flush=True)
        bar = None
        if not args.no_progress:
            from tqdm import tqdm

            bar = tqdm(total=2 * len(prompts), desc="FCFS", unit="req", file=sys.stderr, dynamic_ncols=True)
        for name, proxy in proxies.items():
            if bar is not None:
                bar.set_description(name)
            emu.reset()
            t0 = time.monotonic()
            held = None if args.no_hold else (emu, queued[name])
            results = asyncio.run(run_burst(proxy.openai_base_url, proxy.master_key, prompts, not args.no_stream,
                                            args.stagger_ms / 1000.0, on_done=bar.update if bar else None,
                                            held=held))
            st = emu.stats()
            if st["max_in_flight"] > 1 and name == "SJF":
                print(f"warning: the backend saw {st['max_in_flight']} requests at once under SJF", file=sys.stderr)
            runs.append(RunStats(name, results, time.monotonic() - t0))
        if bar is not None:
            bar.close()
    except ProxyStartError as exc:
        print(f"sjf demo: {exc}", file=sys.stderr)
        return 1
    finally:
        for p in proxies.values():
            p.stop()
        emu.stop()
    print()
    print(render(runs, not args.no_stream))
    print(f"total {time.monotonic() - t_start:.0f} s (runs: " + ", ".join(f"{r.name} {r.wall_s:.0f} s" for r in runs) + ")")
    if args.json:
        out = {"source": source, "tokens_per_s": rate, "stream": not args.no_stream, "plugin": shown,
               "predictor_ranking_accuracy": acc,
               "runs": {r.name: r.summary() for r in runs}}
        f, j = out["runs"]["FCFS"], out["runs"]["SJF"]
        if "short" in f and "short" in j:
            out["short_p50_reduction"] = 1 - j["short"]["p50_s"] / f["short"]["p50_s"]
        if "long" in f and "long" in j:
            out["long_p95_inflation"] = j["long"]["p95_s"] / f["long"]["p95_s"] - 1
        Path(args.json).write_text(json.dumps(out, indent=2))
    failed = sum(r.error is not None for run_ in runs for r in run_.results)
    return 1 if failed else 0
