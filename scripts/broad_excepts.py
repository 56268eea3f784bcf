"""List the runtime's broad ``except`` blocks that neither log, count nor re-raise.

Usage: ``python scripts/broad_excepts.py [--root src] [--check] [--all]``

A broad handler catches ``Exception``, ``BaseException`` or everything (a bare ``except:``),
alone or in a tuple. It is *accounted for* when its body (nested blocks included):

* re-raises (any ``raise``), or
* logs (a call of a method named ``debug``, ``info``, ``warning``, ``error``, ``exception``,
  ``critical`` or ``log``), or
* counts (an augmented assignment ``x += ...`` or a call of a method named ``inc``, or of a
  function whose name starts with ``count``), or
* hands the exception to a function that logs and counts: :func:`sjf_core._faults.note_fault`,
  ``emit_failed``, ``log_fault``, a ``mark_down`` (any name containing ``fault`` or
  ``mark_down``), or
* passes the exception on: the name it is bound to (``except Exception as exc``) is used in
  the body (an argument, a stored value, a reason returned to the caller).

Runtime packages: ``sjf_core``, ``litellm_sjf``, ``openai_sjf``. Prints one
``path:line`` per unaccounted handler (``--all``: every broad handler, with its verdict);
``--check``: exit status 1 when there is one.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

RUNTIME = ("sjf_core", "litellm_sjf", "openai_sjf")
BROAD = {"Exception", "BaseException"}
LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical", "log", "emit_failed"}


def _names(node: ast.expr | None) -> set[str]:
    if node is None:
        return {"*"}
    if isinstance(node, ast.Tuple):
        return {n for e in node.elts for n in _names(e)}
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return set()


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def verdict(handler: ast.ExceptHandler) -> str | None:
    """How ``handler`` accounts for what it catches ("raises", "logs", "counts", "passes on"),
    or None."""
    for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
        if handler.name and isinstance(node, ast.Name) and node.id == handler.name:
            return "passes on"
        if isinstance(node, ast.Raise):
            return "raises"
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name in LOG_METHODS or "fault" in name or "mark_down" in name:
                return "logs"
            if name == "inc" or name.startswith("count"):
                return "counts"
        if isinstance(node, ast.AugAssign):
            return "counts"
    return None


def broad_handlers(root: Path):
    """(path relative to ``root``, line, verdict or None) for every broad handler of the runtime."""
    for pkg in RUNTIME:
        for path in sorted((root / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ExceptHandler) and (_names(node.type) & (BROAD | {"*"})):
                    yield str(path.relative_to(root)), node.lineno, verdict(node)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1] / "src"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--all", action="store_true")
    a = ap.parse_args(argv)
    found = list(broad_handlers(Path(a.root)))
    bad = [f"{p}:{n}" for p, n, v in found if v is None]
    for p, n, v in found:
        if a.all or v is None:
            print(f"{p}:{n} {v or 'UNACCOUNTED'}")
    print(f"broad except blocks: {len(found)}; neither logging, counting nor re-raising: {len(bad)}")
    return 1 if (a.check and bad) else 0


if __name__ == "__main__":
    sys.exit(main())
