"""The one-way house (issue 27): no import circle in src/, no upward import, the layers in the docs.

The contracts are pyproject.toml's ``[tool.importlinter]``, checked by import-linter (a
well-kept tool, on grimp's import graph): imports inside functions and under
``if TYPE_CHECKING:`` count. ``scripts/import_layers.py`` counts the same graph's circles and
upward imports and writes the layers into docs/architecture.md."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("import_layers", ROOT / "scripts" / "import_layers.py")
import_layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_layers)

_LINT = ("import sys; from importlinter.cli import lint_imports; "
         "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True))")


def lint_imports(config: Path, cwd: Path, pythonpath: Path | None = None) -> tuple[int, str]:
    """Run import-linter on ``config`` in a fresh interpreter: (exit status, its report without colours)."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", _LINT, str(config)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    return done.returncode, re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


def test_the_import_contracts_are_kept():
    rc, out = lint_imports(ROOT / "pyproject.toml", ROOT)
    assert rc == 0 and "3 kept, 0 broken" in out, out


def test_no_circle_and_no_upward_import_in_src():
    lines, n_circles, n_up = import_layers.report(ROOT / "src")
    assert (n_circles, n_up) == (0, 0), "\n".join(lines)


def test_the_docs_show_the_layers_of_the_code():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    shown = doc.split("<!-- layers:begin -->\n", 1)[1].split("\n<!-- layers:end -->", 1)[0]
    assert shown == import_layers.docs_block(ROOT / "src"), (
        "docs/architecture.md is stale: python scripts/tree_lines.py --write docs/architecture.md")


def test_the_contract_breaks_on_a_circle_and_on_an_upward_import(tmp_path):
    """The same kinds of contract, on a package with a circle hidden in a function and a
    TYPE_CHECKING import up a floor, are broken (the contract can fail)."""
    pkg = tmp_path / "house_probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "top.py").write_text("from house_probe import room_a\n")
    (pkg / "room_a.py").write_text("def f():\n    from house_probe import room_b\n")
    (pkg / "room_b.py").write_text("from house_probe import room_a\n")
    (pkg / "ground.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from house_probe import top\n")
    config = tmp_path / "contracts.toml"
    config.write_text(textwrap.dedent("""\
        [tool.importlinter]
        root_packages = ["house_probe"]

        [[tool.importlinter.contracts]]
        id = "no-circle"
        name = "no circle"
        type = "acyclic_siblings"
        ancestors = ["house_probe"]

        [[tool.importlinter.contracts]]
        id = "floors"
        name = "floors"
        type = "layers"
        containers = ["house_probe"]
        layers = ["top", "room_a | room_b", "ground"]
        """))
    rc, out = lint_imports(config, tmp_path, pythonpath=tmp_path)
    assert rc != 0 and "no circle BROKEN" in out and "floors BROKEN" in out, out
    sys.path.insert(0, str(tmp_path))
    try:
        graph = import_layers.build_graph(["house_probe"])
    finally:
        sys.path.remove(str(tmp_path))
    assert import_layers.circles(graph) == [["house_probe.room_a", "house_probe.room_b"]]
    contract = {"containers": ["house_probe"], "layers": ["top", "room_a | room_b", "ground"]}
    assert import_layers.upward(graph, contract) == [("house_probe.ground", "house_probe.top")]
