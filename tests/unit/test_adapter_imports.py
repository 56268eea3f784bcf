"""The adapters use the core's public surface only: ``litellm_sjf`` and ``openai_sjf`` import
no ``sjf_core._*`` / ``sjf_core.*._*`` module (at import time or inside a function), and every
name they take from ``sjf_core`` is one of its documented ``__all__`` names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sjf_core

SRC = Path(__file__).resolve().parents[2] / "src"
ADAPTERS = ("litellm_sjf", "openai_sjf")


def core_imports(root: Path = SRC) -> list[tuple[str, int, str, tuple[str, ...]]]:
    """(file, line, module, names) of every import of ``sjf_core`` in the adapters."""
    out = []
    for pkg in ADAPTERS:
        for path in sorted((root / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                rel = str(path.relative_to(root))
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sjf_core":
                    out.append((rel, node.lineno, node.module, tuple(a.name for a in node.names)))
                elif isinstance(node, ast.Import):
                    out += [(rel, node.lineno, a.name, ()) for a in node.names if a.name.split(".")[0] == "sjf_core"]
    return out


def private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


def test_adapters_import_no_private_core_module():
    found = [f"{f}:{n} {m}" for f, n, m, _ in core_imports() if private(m)]
    assert found == []


def test_adapters_use_only_public_core_names():
    public = set(sjf_core.__all__)
    used = {(f, name) for f, _, m, names in core_imports() if m == "sjf_core" for name in names}
    assert used and {name for _, name in used} <= public, sorted(used - {(f, n) for f, n in used if n in public})


@pytest.mark.parametrize("module, is_private", [("sjf_core._scheduler", True), ("sjf_core.admission._probe", True),
                                                ("sjf_core.config", False), ("sjf_core", False)])
def test_the_rule(module, is_private):
    assert private(module) is is_private
