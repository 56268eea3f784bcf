"""Small modules, one job each: the runtime's size limits and the admission room's import
graph, checked with the same code that writes docs/architecture.md (scripts/tree_lines.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("tree_lines", ROOT / "scripts" / "tree_lines.py")
tree_lines = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tree_lines)

def test_no_runtime_module_over_350_lines():
    _, over = tree_lines.tree(ROOT / "src", 350)
    assert over == []


def test_no_runtime_function_over_60_lines():
    assert tree_lines.long_functions(ROOT / "src", 60) == []


def test_the_admission_room_has_no_import_cycle_and_its_contract_imports_no_store():
    lines, cycle = tree_lines.import_graph(ROOT / "src")
    assert cycle == []
    base = next(line for line in lines if line.startswith("_base "))
    assert base.split("->")[1].strip() == "_events, _ticket"  # the events and the ticket it names; no store


def test_the_checker_sees_a_long_function_and_a_cycle(tmp_path):
    room = tmp_path / "sjf_core" / "admission"
    room.mkdir(parents=True)
    (room / "_a.py").write_text("from sjf_core.admission._b import x\n")
    (room / "_b.py").write_text("def f():\n    from sjf_core.admission._a import y\n" + "    pass\n" * 60)
    assert tree_lines.import_graph(tmp_path)[1] == ["_a", "_b", "_a"]
    assert [h.split()[1] for h in tree_lines.long_functions(tmp_path, 60)] == ["f"]
