"""The ``sjf`` command line. Each subcommand lives in its own module under
:mod:`sjf_lab.commands` and is imported only when used (so ``sjf predict`` does not
import LiteLLM). A command module defines ``HELP`` (one line), ``add_arguments(parser)``
and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: Third-party packages a command may need, and the extra that installs them.
EXTRA_OF = {"aiohttp": "lab", "tqdm": "lab", "matplotlib": "bench", "scipy": "bench",
            "xgboost": "train", "onnxmltools": "train", "onnx": "train", "litellm": "litellm", "openai": "openai"}


def _missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra that would install the module ``exc`` could not find, or None if not ours to name."""
    top = (exc.name or "").split(".")[0]
    return EXTRA_OF.get(top)

SUBCOMMANDS = {
    "predict": "sjf_lab.commands.predict",
    "demo": "sjf_lab.commands.demo",
    "emulate": "sjf_lab.commands.emulate",
    "train": "sjf_lab.commands.train",
    "eval": "sjf_lab.commands.evaluate",
    "simulate": "sjf_lab.commands.simulate",
    "bench": "sjf_lab.commands.bench",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="sjf", description="clairvoyant-sjf: predictive SJF admission for serial LLM backends")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = argv[0] if argv and not argv[0].startswith("-") else None
    for name, modname in SUBCOMMANDS.items():
        if wanted is not None and name != wanted:
            sub.add_parser(name)
            continue
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("sjf_lab.commands"):
                continue  # not built yet
            extra = _missing_extra(exc)
            if extra is None:
                raise
            # A runtime-only install ([litellm], [openai]) lacks the tooling's dependencies:
            # say which extra brings them instead of a traceback.
            hint = f"needs {exc.name}: pip install 'clairvoyant-sjf[{extra}]'"
            if name == wanted:
                print(f"sjf {name}: {hint}", file=sys.stderr)
                return 2
            sub.add_parser(name, help=f"({hint})")
            continue
        p = sub.add_parser(name, help=getattr(mod, "HELP", None), description=getattr(mod, "HELP", None))
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except ModuleNotFoundError as exc:  # a command that imports its tooling lazily
        extra = _missing_extra(exc)
        if extra is None:
            raise
        print(f"sjf {args.command}: needs {exc.name}: pip install 'clairvoyant-sjf[{extra}]'", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
