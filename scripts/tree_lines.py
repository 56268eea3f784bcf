"""Print the package tree under src/ with line counts (the table in docs/architecture.md).

Usage: ``python scripts/tree_lines.py [--root src] [--limit 350] [--function-limit 60] [--check]
[--markdown] [--write FILE]``

Counts lines of ``.py``, ``.lua`` and ``.c`` files (``wc -l`` semantics: newline characters).
Each package line shows its total. Runtime modules (``sjf_core``, ``litellm_sjf``,
``openai_sjf``) over ``--limit`` lines are marked ``!``, and runtime functions (methods
included) longer than ``--function-limit`` lines (``def`` line to last line) are listed; with
``--check`` the exit status is 1 when there is either. ``--markdown`` wraps the tree in a
fenced block; ``--write FILE`` puts that block between the ``<!-- tree:begin -->`` /
``<!-- tree:end -->`` markers of FILE, the admission room's import graph (module-level
and function-level imports, ``if TYPE_CHECKING`` left out) between ``<!-- imports:begin -->``
/ ``<!-- imports:end -->`` when FILE has those markers, and the layers of the whole house with
their import counts (:mod:`import_layers`, grimp; ``if TYPE_CHECKING`` imports counted) between
``<!-- layers:begin -->`` / ``<!-- layers:end -->``.
"""

from __future__ import annotations

import argparse
import ast
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


def long_functions(root: Path, limit: int) -> list[str]:
    """Runtime functions and methods over ``limit`` lines: ``"path:line name (n)"``."""
    out = []
    for pkg in RUNTIME:
        for path in sorted((root / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = node.end_lineno - node.lineno + 1
                    if n > limit:
                        out.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({n})")
    return out


def imports_of(path: Path, prefix: str) -> list[str]:
    """The modules under ``prefix`` that ``path`` imports when it runs (``if TYPE_CHECKING``
    blocks left out: annotations only), sorted."""
    found: set[str] = set()

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                continue
            if isinstance(child, ast.ImportFrom) and (child.module or "").startswith(prefix):
                found.add(child.module)
            walk(child)

    walk(ast.parse(path.read_text(encoding="utf-8")))
    return sorted(found)


def import_graph(root: Path, package: str = "sjf_core.admission") -> tuple[list[str], list[str]]:
    """(lines "module -> imports" of ``package``'s modules, a cycle as module names or [])."""
    d = root / package.replace(".", "/")
    graph = {f"{package}.{p.stem}": imports_of(p, package + ".") for p in sorted(d.glob("*.py"))}
    short = lambda m: m.rsplit(".", 1)[-1]  # noqa: E731
    lines = [f"{short(m):<20} -> {', '.join(short(x) for x in deps) or '-'}" for m, deps in graph.items()]
    done: set[str] = set()

    def cycle_from(m: str, path: list[str]) -> list[str]:
        if m in path:
            return path[path.index(m):] + [m]
        if m in done:
            return []
        for n in graph.get(m, ()):
            found = cycle_from(n, path + [m])
            if found:
                return found
        done.add(m)
        return []

    for m in graph:
        c = cycle_from(m, [])
        if c:
            return lines, [short(x) for x in c]
    return lines, []


def _replace_block(text: str, name: str, block: str) -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{block}\n{end}{rest.split(end, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1] / "src"))
    ap.add_argument("--limit", type=int, default=350)
    ap.add_argument("--function-limit", type=int, default=60)
    ap.add_argument("--check", action="store_true", help="exit 1 if a runtime module is over --limit")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--write", metavar="FILE", help="replace the tree between the markers of FILE")
    a = ap.parse_args(argv)
    root = Path(a.root)
    lines, over = tree(root, a.limit)
    long = long_functions(root, a.function_limit)
    summary = (f"runtime modules over {a.limit} lines: {', '.join(over) if over else 'none'}\n"
               f"runtime functions over {a.function_limit} lines: {', '.join(long) if long else 'none'}")
    failed = a.check and bool(over or long)
    if a.write:
        doc = Path(a.write)
        text = doc.read_text(encoding="utf-8")
        if "<!-- tree:begin -->" not in text or "<!-- tree:end -->" not in text:
            print(f"{doc}: no <!-- tree:begin --> / <!-- tree:end --> markers", file=sys.stderr)
            return 2
        text = _replace_block(text, "tree", "\n".join(["```text", *lines, "```", "", summary]))
        if "<!-- imports:begin -->" in text and "<!-- imports:end -->" in text:
            graph, cycle = import_graph(root)
            verdict = f"import cycle: {' -> '.join(cycle)}" if cycle else "no import cycle"
            text = _replace_block(text, "imports", "\n".join(["```text", *graph, "```", "", verdict]))
        if "<!-- layers:begin -->" in text and "<!-- layers:end -->" in text:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            import import_layers

            text = _replace_block(text, "layers", import_layers.docs_block(root))
        doc.write_text(text, encoding="utf-8")
        print(f"{doc}: tree updated; {summary}")
        return 1 if failed else 0
    if a.markdown:
        print("```text")
    print("\n".join(lines))
    if a.markdown:
        print("```")
    print(f"\n{summary}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
