"""``sjf emulate``: run the serial backend emulator (see :mod:`sjf_lab.emulator`): the OpenAI API
under ``/v1`` and Ollama's native API (``/api/chat``, ``/api/generate``, ``/api/tags``...) on
the same port and slots, so LiteLLM's ``openai/`` and ``ollama_chat/`` deployments can both use it.

Answer lengths come from ``--trace``; ``--trace demo`` is the shipped demo trace (the 40
prompts of ``sjf demo`` with their recorded answer lengths). Without a trace every prompt gets
a length drawn from its hash, unrelated to what it asks: fine for load, meaningless for judging
SJF order, and the command says so at start.
"""

from __future__ import annotations

import asyncio
import logging
import signal

HELP = ("run a serial backend emulator that speaks the OpenAI API (/v1/chat/completions, /v1/completions, "
        "/v1/responses, /v1/models) and Ollama's (/api/chat, /api/generate, /api/tags, /api/show, /api/version) "
        "on one port and the same slots: point LiteLLM's openai/ or ollama_chat/ (and ollama/) at it; answer "
        "lengths from a trace, set tokens/s")
#: Ollama's native endpoints the emulator serves (said at start, and in HELP).
OLLAMA_ENDPOINTS = "/api/chat, /api/generate, /api/tags"


def add_arguments(p) -> None:
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8001, help="port (0 = a free port; default 8001)")
    p.add_argument("--trace", default=None,
                   help="JSONL trace: {prompt|sha256, answer_tokens|response_tokens|completion_tokens[, fault]}, or "
                        "'demo' (the prompts "
                        "of `sjf demo` with their answer lengths). Without one, answer lengths are random")
    p.add_argument("--tokens-per-s", type=float, default=200.0, help="generation rate per slot, tokens/s (default 200)")
    p.add_argument("--slots", type=int, default=1, help="requests generated at once; the rest wait FIFO (default 1)")
    p.add_argument("--on-disconnect", choices=("stop", "continue", "stop-streams"), default="stop",
                   help="when the client leaves: stop generating, keep generating (continue), or stop only streams like llama-cpp-python (default stop)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fallback length distribution for unknown prompts")
    p.add_argument("--tick-s", type=float, default=0.02, help="emission tick in seconds (default 0.02)")
    p.add_argument("--first-token-s", type=float, default=0.0, help="extra delay before the first token, seconds")
    p.add_argument("--model", default="emulator", help="model id listed by /v1/models and /api/tags")
    p.add_argument("--probe-fault", choices=("500", "503", "429", "timeout"), default=None,
                   help="what the idle probes of sjf_core get (default: a normal answer)")
    p.add_argument("--probe-fault-at", choices=("slot", "arrival"), default="slot",
                   help="probe fault once the probe holds its slot (default), or at once without a slot")
    p.add_argument("--probe-fault-rate", type=float, default=1.0, help="share of probes that get the fault (1)")


NO_TRACE_WARNING = ("sjf emulate: no --trace: every prompt gets a random answer length (drawn from its hash), "
                    "unrelated to what it asks, so the order a scheduler picks cannot be judged by the answers. "
                    "For an ordering trial use --trace demo (the prompts of `sjf demo` with their answer lengths) "
                    "or a JSONL trace of your own prompts")


def run(args) -> int:
    from sjf_lab.emulator import Emulator, EmulatorConfig

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    trace, records = args.trace, []
    if trace == "demo":
        from sjf_lab.commands.demo import default_prompts

        trace, records = None, [{"prompt": d.text, "answer_tokens": d.answer_tokens} for d in default_prompts()]
    elif trace is None:
        logging.getLogger("sjf_lab.emulator").warning(NO_TRACE_WARNING)
    try:
        cfg = EmulatorConfig(tokens_per_s=args.tokens_per_s, slots=args.slots, trace=trace, seed=args.seed,
                             on_disconnect=args.on_disconnect, tick_s=args.tick_s, trace_records=records,
                             first_token_s=args.first_token_s, model=args.model, probe_fault=args.probe_fault,
                             probe_fault_at=args.probe_fault_at, probe_fault_rate=args.probe_fault_rate)
        emu = Emulator(cfg)
    except (ValueError, OSError) as exc:
        print(f"sjf emulate: {exc}")
        return 2

    async def main() -> None:
        port = await emu.start(args.host, args.port)
        print(f"emulator listening on http://{args.host}:{port}/v1 (OpenAI API) and http://{args.host}:{port} "
              f"(Ollama API: {OLLAMA_ENDPOINTS}, ...)  (slots={cfg.slots}, {cfg.tokens_per_s:g} tok/s, "
              f"on_disconnect={cfg.on_disconnect}, trace={len(emu.trace.items)} prompts)", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        await stop.wait()
        await emu.stop()

    asyncio.run(main())
    return 0
