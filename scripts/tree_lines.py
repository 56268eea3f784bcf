"""Print the package tree under src/ with line counts (the table in docs/architecture.md).

Usage: ``python scripts/tree_lines.py [--root src] [--limit 350] [--check] [--markdown] [--write FILE]``

Counts lines of ``.py``, ``.lua`` and ``.c`` files (``wc -l`` semantics: newline characters).
Each package line shows its total. Runtime modules (``sjf_core``, ``litellm_sjf``,
``openai_sjf``) over ``--limit`` lines are marked ``!``; with ``--check`` the exit status is
1 when there is one. ``--markdown`` wraps the tree in a fenced block; ``--write FILE`` puts
that block between the ``<!-- tree:begin -->`` / ``<!-- tree:end -->`` markers of FILE.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

RUNTIME = ("sjf_core", "litellm_sjf", "openai_sjf")
SUFFIXES = (".py", ".lua", ".c")


def _lines(path: Path) -> int:
    with open(path, "rb") as f:
        return f.read().count(b"\n")


def _files(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.is_file() and p.suffix in SUFFIXES)


def _dirs(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))
                  and not p.name.endswith(".egg-info") and _total(p) > 0)


def _total(d: Path) -> int:
    return sum(_lines(p) for p in d.rglob("*") if p.is_file() and p.suffix in SUFFIXES)


def tree(root: Path, limit: int) -> tuple[list[str], list[str]]:
    """(lines of the printed tree, runtime modules over ``limit``)."""
    out: list[str] = []
    over: list[str] = []

    def walk(d: Path, depth: int, runtime: bool) -> None:
        pad = "    " * depth
        out.append(f"{pad}{d.name}/{'':<{max(1, 34 - len(pad) - len(d.name))}}{_total(d):>6}")
        for f in _files(d):
            n = _lines(f)
            flag = " !" if runtime and f.suffix == ".py" and n > limit else ""
            if flag:
                over.append(f"{f.relative_to(root)} ({n})")
            out.append(f"{pad}    {f.name:<{max(1, 31 - len(pad))}}{n:>6}{flag}")
        for sub in _dirs(d):
            walk(sub, depth + 1, runtime)

    for pkg in _dirs(root):
        walk(pkg, 0, pkg.name in RUNTIME)
    return out, over


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1] / "src"))
    ap.add_argument("--limit", type=int, default=350)
    ap.add_argument("--check", action="store_true", help="exit 1 if a runtime module is over --limit")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--write", metavar="FILE", help="replace the tree between the markers of FILE")
    a = ap.parse_args(argv)
    root = Path(a.root)
    lines, over = tree(root, a.limit)
    summary = f"runtime modules over {a.limit} lines: {', '.join(over) if over else 'none'}"
    if a.write:
        doc = Path(a.write)
        text = doc.read_text(encoding="utf-8")
        begin, end = "<!-- tree:begin -->", "<!-- tree:end -->"
        if begin not in text or end not in text:
            print(f"{doc}: no {begin} / {end} markers", file=sys.stderr)
            return 2
        head, rest = text.split(begin, 1)
        block = "\n".join(["```text", *lines, "```", "", summary])
        doc.write_text(f"{head}{begin}\n{block}\n{end}{rest.split(end, 1)[1]}", encoding="utf-8")
        print(f"{doc}: tree updated; {summary}")
        return 1 if (a.check and over) else 0
    if a.markdown:
        print("```text")
    print("\n".join(lines))
    if a.markdown:
        print("```")
    print(f"\n{summary}")
    return 1 if (a.check and over) else 0


if __name__ == "__main__":
    sys.exit(main())
