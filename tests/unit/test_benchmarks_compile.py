"""Every script under benchmarks/ and scripts/ compiles (they run by hand, so no other test imports them).

A broken import line in benchmarks/redis_workers_bench.py went unnoticed for a whole session.
"""

from __future__ import annotations

import py_compile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*.py")])


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_script_compiles(path: Path, tmp_path: Path):
    py_compile.compile(str(path), cfile=str(tmp_path / "out.pyc"), doraise=True)


def test_there_are_scripts():
    assert len(SCRIPTS) > 10
