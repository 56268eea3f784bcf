"""The house's import graph: its circles, its upward imports and its layers, from the code.

Usage: ``python scripts/import_layers.py [--root src] [--markdown]``: prints the layers of
pyproject.toml's import contracts (``[tool.importlinter]``) with what each floor imports, then
the number of import circles and of upward imports. ``scripts/tree_lines.py --write FILE``
puts the same text between the ``<!-- layers:begin -->`` / ``<!-- layers:end -->`` markers.

The graph is grimp's (the graph library of import-linter, which checks the contracts):
imports inside functions count, and so do ``if TYPE_CHECKING:`` imports (an annotation names
the module it needs). A *circle* is a set of two or more modules each reachable from the
others (a strongly connected component; a module importing itself counts too). An *upward
import* is an import of a higher layer by a lower one, in either ``layers`` contract (the
packages, and the core's floors).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
#: What each floor of the core holds (the docs' words; the floors themselves are pyproject.toml's).
FLOOR_JOBS = {
    "_scheduler": "the Scheduler, which composes the rooms",
    "_scoring | _memory_wiring | config": "composition: scoring, the memory's wiring, the settings read, built, checked",
    "ext": "plugins and metrics, which observe the queues",
    "admission | memory": "the rooms: admission queues and stores; the online length memory",
    "policy": "the room of policies, pending structures and promotion rules",
    "predict": "the room of scored text, features, the predictor and the length classes",
    "settings": "the settings ground: every settings type and default, importing no room",
    "_errors | _faults": "the errors, and the absorbed-fault counter",
}


def contracts(pyproject: Path = ROOT / "pyproject.toml") -> dict:
    """``[tool.importlinter]`` of ``pyproject``: root_packages and contracts (by id)."""
    il = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {"root_packages": il["root_packages"], "contracts": {c["id"]: c for c in il["contracts"]}}


def build_graph(packages):
    """grimp's graph of ``packages`` (TYPE_CHECKING imports included, no cache)."""
    import grimp

    return grimp.build_graph(*packages, exclude_type_checking_imports=False, cache_dir=None)


def circles(graph) -> list[list[str]]:
    """The import circles of ``graph``: each a sorted list of modules, largest first."""
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in adj:  # Tarjan's algorithm, iterative (no recursion limit)
        if root in index:
            continue
        work = [(root, iter(adj[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(adj[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in adj[v]:
                    found.append(sorted(comp))
    return sorted(found, key=lambda c: (-len(c), c))


def _elements(layers: list[str]) -> list[tuple[int, str]]:
    """``(layer index, element)`` of every module or package a layers contract names, top first."""
    return [(i, n.strip()) for i, layer in enumerate(layers) for n in layer.replace(":", "|").split("|")]


def _place(module: str, layers: list[str], container: str | None) -> tuple[int, str] | None:
    """``(layer index, element)`` of ``module`` (the element that is it or holds it), or None."""
    for i, name in _elements(layers):
        full = f"{container}.{name}" if container else name
        if module == full or module.startswith(full + "."):
            return i, name
    return None


def upward(graph, contract: dict) -> list[tuple[str, str]]:
    """``(importer, imported)`` of every import of a higher layer by a lower one in ``contract``."""
    out = []
    for container in contract.get("containers") or [None]:
        for m in sorted(graph.modules):
            pm = _place(m, contract["layers"], container)
            for d in sorted(graph.find_modules_directly_imported_by(m)) if pm else ():
                pd = _place(d, contract["layers"], container)
                if pd is not None and pd[0] < pm[0]:
                    out.append((m, d))
    return out


def _element_imports(graph, contract: dict) -> list[tuple[int, str, list[str]]]:
    """Each element of ``contract``'s layers with the other elements its modules import."""
    container = (contract.get("containers") or [None])[0]
    layers = contract["layers"]
    order = [name for _, name in _elements(layers)]
    uses: dict[str, set[str]] = {name: set() for name in order}
    for m in graph.modules:
        pm = _place(m, layers, container)
        for d in graph.find_modules_directly_imported_by(m) if pm else ():
            pd = _place(d, layers, container)
            if pd is not None and pd[1] != pm[1]:
                uses[pm[1]].add(pd[1])
    return [(i, name, sorted(uses[name], key=order.index)) for i, name in _elements(layers)]


def report(root: Path = ROOT / "src", header: bool = True) -> tuple[list[str], int, int]:
    """(the printed lines, number of circles, number of upward imports) of the tree under
    ``root``; ``header``: start with the graph's size (left out of the docs, where it would
    change with every import)."""
    c = contracts()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    graph = build_graph(c["root_packages"])
    import grimp

    lines = [f"grimp {getattr(grimp, '__version__', '?')}: {len(graph.modules)} modules, "
             f"{sum(len(graph.find_modules_directly_imported_by(m)) for m in graph.modules)} imports "
             "(inside functions and under `if TYPE_CHECKING:` included)", ""] if header else []
    n_up = 0
    for cid in ("packages", "core-floors"):
        contract = c["contracts"][cid]
        lines.append(f"{contract['name']} ({cid}; top first):")
        last = None
        for i, name, imports in _element_imports(graph, contract):
            floor = f"{len(contract['layers']) - i}" if i != last else ""
            if i != last and cid == "core-floors":
                lines.append(f"  floor {floor}: {FLOOR_JOBS.get(contract['layers'][i], '')}")
            lines.append(f"    {name:<16} imports {', '.join(imports) or '-'}")
            last = i
        up = upward(graph, contract)
        n_up += len(up)
        lines += [f"  upward: {a} -> {b}" for a, b in up]
        lines.append("")
    found = circles(graph)
    lines.append(f"import circles: {len(found)}" + "".join(f"\n  {len(x)} files: {', '.join(x)}" for x in found))
    lines.append(f"upward imports: {n_up}")
    return lines, len(found), n_up


def docs_block(root: Path = ROOT / "src") -> str:
    """The text ``scripts/tree_lines.py --write`` puts between the layers markers."""
    lines, _, _ = report(root, header=False)
    return "\n".join(["```text", *lines, "```"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(ROOT / "src"))
    ap.add_argument("--markdown", action="store_true", help="wrap the layers in a fenced block")
    a = ap.parse_args(argv)
    lines, n_circles, n_up = report(Path(a.root))
    text = "\n".join(lines)
    print(f"```text\n{text}\n```" if a.markdown else text)
    return 1 if n_circles or n_up else 0


if __name__ == "__main__":
    sys.exit(main())
