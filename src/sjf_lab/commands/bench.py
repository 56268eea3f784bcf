"""``sjf bench``: FCFS vs SJF vs oracle vs LiteLLM's priority scheduler, same arrivals, one run.

Examples::

    # burst of 25 Short + 25 Long ShareGPT prompts through a real LiteLLM proxy, emulator backend
    sjf bench --data conversations/sharegpt.jsonl --scenario burst

    # Poisson arrivals at three loads through the openai_sjf wrapper
    sjf bench --data sharegpt.jsonl --scenario poisson --rho 0.55,0.74,0.85 --path wrapper

    # your own serial server (Ollama / llama.cpp): real answers, capped
    sjf bench --backend http://127.0.0.1:11434 --model llama3.2 --max-tokens 256 --n-short 8 --n-long 8

    # everything in docs/benchmarks.md (tables, plots, JSON), regenerated
    sjf bench --docs

    # load and faults through a real proxy and redis-server: 3 rounds of 600 concurrent requests
    # with clients leaving mid-answer, probe errors, a backend restart, a Redis restart, a
    # predictor that raises (docs/operations.md "Faults under load"); exit status 1 if a guarantee broke
    sjf bench --scenario faults --rounds 3 --requests 600
"""

from __future__ import annotations

import sys

HELP = "benchmark FCFS / SJF / oracle / LiteLLM priority on the same arrivals (burst, Poisson, replay)"


def _floats(s: str) -> list[float]:
    return [float(x) for x in str(s).split(",") if x.strip()]


def add_arguments(p) -> None:
    g = p.add_argument_group("workload")
    g.add_argument("--data", default=None,
                   help="JSONL of {prompt, response_tokens} (format and public sources: docs/data.md); "
                        "default: the prompt set shipped with sjf_core")
    g.add_argument("--scenario", default="burst",
                   help="comma-separated: burst, poisson, replay, app-burst, held-burst (default burst). held-burst: "
                        "the burst, cold (a fresh proxy, no length-memory evidence), submitted whole while the "
                        "backend is held --hold-s seconds (e.g. benchmarks/data/stated_burst.jsonl). app-burst: "
                        "--n-short title tasks over pasted held-out prompts + --n-long held-out chat replies "
                        "(recorded >= 800 tokens), run cold (fresh proxy) and warm (fresh proxy that first "
                        "answered --warmup-n requests of the same apps over other prompts; docs/memory.md). "
                        "faults: load and faults through a real proxy and redis-server (alone; see its flags)")
    g.add_argument("--hold-s", type=float, default=2.0,
                   help="app-burst, held-burst: seconds the backend is held busy while the burst is submitted "
                        "(default 2)")
    g.add_argument("--warmup-n", type=int, default=50,
                   help="app-burst: warm-up requests answered by sjf-warm before the burst (default 50)")
    g.add_argument("--n-short", type=int, default=None,
                   help="burst: recorded-Short prompts (default 25, or as many as the data has)")
    g.add_argument("--n-long", type=int, default=None,
                   help="burst: recorded-Long prompts (default 25, or as many as the data has)")
    g.add_argument("--n-medium", type=int, default=0, help="burst: Medium prompts (default 0)")
    g.add_argument("--rho", default="0.55,0.74,0.85", help="poisson: utilisations ρ = λ·E[S] (default 0.55,0.74,0.85)")
    g.add_argument("--n-poisson", type=int, default=200, help="poisson: requests per ρ (default 200)")
    g.add_argument("--mix", default="0.5,0.25,0.25", help="poisson: Short,Medium,Long weights (default 0.5,0.25,0.25)")
    g.add_argument("--replay-rho", type=float, default=0.8, help="replay: target ρ (default 0.8)")
    g.add_argument("--replay-n", type=int, default=200, help="replay: consecutive rows (default 200)")
    g.add_argument("--replay-offset", type=int, default=0, help="replay: first row (default 0)")
    g.add_argument("--max-prompt-chars", type=int, default=6000, help="skip longer prompts (default 6000)")
    g.add_argument("--max-tokens", type=int, default=None, help="answer cap sent with every request (real backends)")
    g.add_argument("--seed", type=int, default=0, help="sampling and arrival seed (default 0)")

    g = p.add_argument_group("system under test")
    g.add_argument("--path", choices=("proxy", "wrapper"), default="proxy",
                   help="through a real LiteLLM proxy with litellm_sjf, or the openai_sjf wrapper (default proxy)")
    g.add_argument("--policies", default=None,
                   help="comma-separated contenders: fcfs, litellm-priority, sjf, sjf-no-tau, sjf-paper, sjf-tokens, "
                        "fair, oracle (default: all that apply)")
    g.add_argument("--backend", default=None,
                   help="URL of your OpenAI-compatible serial server (Ollama, llama.cpp); default: the emulator")
    g.add_argument("--model", default=None, help="model name for --backend")
    g.add_argument("--api-key", default=None, help="bearer key for --backend, if needed")
    g.add_argument("--service-tps", type=float, default=None,
                   help="--backend with poisson/replay: its generation speed in tokens/s, for ρ = λ·E[S]")
    g.add_argument("--tokens-per-s", type=float, default=None,
                   help="emulator: tokens/s (default 1000; 5000 for --scenario faults)")
    g.add_argument("--first-token-s", type=float, default=0.0, help="emulator: prefill delay, s (default 0)")
    g.add_argument("--repeat", type=int, default=1, help="runs per contender, pooled, alternating order (default 1)")

    _fault_arguments(p)
    g = p.add_argument_group("output")
    g.add_argument("--out", default=None, help="directory for bench.json and PNG plots")
    g.add_argument("--markdown", action="store_true", help="print markdown tables")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("--docs", action="store_true",
                   help="run the whole documented suite and regenerate docs/benchmarks.md (see --only)")
    g.add_argument("--only", default=None,
                   help="with --docs: comma-separated sections to re-run (others are kept from docs/results/)")


def _fault_arguments(p) -> None:
    g = p.add_argument_group("faults (--scenario faults)")
    g.add_argument("--rounds", type=int, default=3, help="rounds through the same proxy (default 3)")
    g.add_argument("--requests", type=int, default=600, help="concurrent requests per round (default 600)")
    g.add_argument("--mid-answer-frac", type=float, default=0.10,
                   help="share of clients that leave mid-answer, timed after dispatch (default 0.10)")
    g.add_argument("--deadline-s", type=float, default=480.0, help="bound on a round, seconds (default 480)")
    g.add_argument("--probe-timeout-s", type=float, default=3.0, help="the plugin's SJF_PROBE_TIMEOUT_S (default 3)")


def build_scenarios(args, rows, service) -> list:
    from sjf_lab.bench import workload as wl
    from sjf_lab.bench.runner import Scenario

    out = []
    kinds = [s.strip() for s in args.scenario.split(",") if s.strip()]
    for kind in kinds:
        if kind == "burst":
            g = wl.by_class(rows)
            n_short = args.n_short if args.n_short is not None else min(25, len(g[0]))
            n_long = args.n_long if args.n_long is not None else min(25, len(g[2]))
            jobs = wl.burst(rows, n_short, n_long, args.n_medium, seed=args.seed, max_tokens=args.max_tokens)
            out.append(Scenario("burst", jobs, {"n_short": n_short, "n_long": n_long,
                                                "n_medium": args.n_medium, "max_tokens": args.max_tokens}))
        elif kind == "held-burst":
            g = wl.by_class(rows)
            n_short = args.n_short if args.n_short is not None else len(g[0])
            n_long = args.n_long if args.n_long is not None else len(g[2])
            jobs = wl.burst(rows, n_short, n_long, args.n_medium, seed=args.seed, max_tokens=args.max_tokens)
            out.append(Scenario("held burst cold", jobs, {"n_short": n_short, "n_long": n_long, "state": "cold"},
                                hold_s=args.hold_s, fresh=True))
        elif kind == "poisson":
            if service is None:
                raise ValueError("poisson with --backend needs --service-tps (tokens/s of your server)")
            mix = _floats(args.mix)
            for rho in _floats(args.rho):
                jobs = wl.poisson(rows, args.n_poisson, rho, service, mix=mix, seed=args.seed, max_tokens=args.max_tokens)
                out.append(Scenario(f"poisson-{rho:.2f}", jobs, {"rho": rho, "mix": mix}))
        elif kind == "replay":
            if service is None:
                raise ValueError("replay with --backend needs --service-tps (tokens/s of your server)")
            jobs = wl.replay(rows, args.replay_n, args.replay_rho, service, offset=args.replay_offset,
                             seed=args.seed, max_tokens=args.max_tokens)
            out.append(Scenario(f"replay-{args.replay_rho:.2f}", jobs,
                                {"rho": args.replay_rho, "offset": args.replay_offset}))
        elif kind == "app-burst":
            from sjf_lab.sim.appmix import bench_app_burst

            n_task = args.n_short if args.n_short is not None else 20
            n_reply = args.n_long if args.n_long is not None else 20
            jobs, warm = bench_app_burst(rows, n_task, n_reply, args.warmup_n, seed=args.seed)
            cfg = {"n_task": n_task, "n_reply": n_reply, "app": "title"}
            # both start from a fresh proxy / scheduler: cold has no evidence; warm has answered
            # exactly the warm-up requests (other prompts of the same apps), one at a time
            out.append(Scenario("app-burst cold", jobs, {**cfg, "state": "cold"}, hold_s=args.hold_s, fresh=True))
            out.append(Scenario("app-burst warm", jobs, {**cfg, "state": "warm", "warmup_requests": len(warm)},
                                warmup=warm, hold_s=args.hold_s, fresh=True))
        else:
            raise ValueError(f"unknown scenario {kind!r}: use burst, poisson, replay, app-burst, held-burst")
    return out


def default_data() -> str:
    from importlib import resources

    for name in ("prompts.jsonl", "demo_prompts.jsonl", "default_prompts.jsonl"):
        try:
            p = resources.files("sjf_lab") / "data" / name
            if p.is_file():
                return str(p)
        except Exception:
            pass
    raise FileNotFoundError("no --data given and no prompt set shipped in sjf_core/data")


def run(args) -> int:
    import os

    # no network: LiteLLM must not try to fetch its model cost map (here or in the proxies)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    if args.docs:
        from sjf_lab.bench.suite import main as suite_main

        return suite_main(only=args.only, progress=not args.no_progress)
    if args.scenario.strip() == "faults":
        return run_fault_scenario(args)
    if args.tokens_per_s is None:
        args.tokens_per_s = 1000.0
    from sjf_lab.bench import report
    from sjf_lab.bench import workload as wl
    from sjf_lab.bench.backend import EmulatorBackend, ExternalBackend
    from sjf_lab.bench.paths import ProxyPath, WrapperPath
    from sjf_lab.bench.policies import DEFAULT_POLICIES, resolve
    from sjf_lab.bench.runner import run as run_bench

    try:
        rows = wl.load_rows(args.data or default_data(), max_prompt_chars=args.max_prompt_chars)
        if args.backend:
            service = wl.ServiceModel(args.service_tps) if args.service_tps else None
        else:
            service = wl.ServiceModel(args.tokens_per_s, args.first_token_s)
        scenarios = build_scenarios(args, rows, service)
        specs = resolve(args.policies or ",".join(DEFAULT_POLICIES))
    except (ValueError, FileNotFoundError) as exc:
        print(f"sjf bench: {exc}", file=sys.stderr)
        return 2
    try:
        from sjf_core.predict._predictor import load_predictor

        predictor = load_predictor()
    except Exception as exc:
        print(f"sjf bench: default predictor unavailable ({exc}); predicted classes not recorded", file=sys.stderr)
        predictor = None
    all_jobs = [j for sc in scenarios for j in list(sc.jobs) + list(sc.warmup)]
    if args.backend:
        backend = ExternalBackend(args.backend, args.model or "default", args.api_key)
    else:
        backend = EmulatorBackend(all_jobs, tokens_per_s=args.tokens_per_s, first_token_s=args.first_token_s)
    path_cls = ProxyPath if args.path == "proxy" else WrapperPath
    path = path_cls(backend, all_jobs, predictor)
    try:
        result = run_bench(path, backend, scenarios, specs, predictor=predictor, repeat=args.repeat,
                           progress=not args.no_progress)
    finally:
        backend.close()
    print(report.render_text(result, markdown=args.markdown))
    if args.out:
        report.write_json(result, f"{args.out}/bench.json")
        files = []
        for res in result.scenarios:
            files += report.plot(res, args.out)
        print(f"\nwrote {args.out}/bench.json and {len(files)} plots", file=sys.stderr)
    return 0


def run_fault_scenario(args) -> int:
    """``--scenario faults`` (:mod:`sjf_lab.bench.faults`): prints the rounds, writes
    ``faults.json`` to ``--out``; 1 when a guarantee broke."""
    import json
    from pathlib import Path

    from sjf_lab.bench.faults import FaultOptions, markdown, passed, run_faults

    opts = FaultOptions(requests=args.requests, rounds=args.rounds, tokens_per_s=args.tokens_per_s or 5000.0,
                        mid_frac=args.mid_answer_frac, seed=args.seed, deadline_s=args.deadline_s,
                        probe_timeout_s=args.probe_timeout_s)
    result = run_faults(opts)
    print(markdown(result))
    print("\nprobe outcomes per round: " + "; ".join(json.dumps(f["probes"]) for f in result["rounds"]))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "faults.json").write_text(json.dumps(result, indent=2))
    ok = passed(result)
    print("\nRESULT:", "PASS (0 lost, 0 hung, 0 wrong-length, 0 leaked, max in flight = slots)" if ok else "FAIL")
    return 0 if ok else 1
