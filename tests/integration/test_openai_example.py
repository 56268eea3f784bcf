"""examples/openai_client.py as a user runs it (a subprocess): on its built-in emulator it
sends its burst through the wrapped client; where the ``lab`` extra is missing (only
``pip install ".[openai]"``: no aiohttp) it says in one line which extra to install instead
of dying with ``ModuleNotFoundError: No module named 'aiohttp'``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "openai_client.py"


def _run(env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SJF_")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=300, env=env)


def test_the_example_runs_its_burst_on_the_built_in_emulator():
    r = _run({"SJF_METRICS": "off"})
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [x for x in r.stdout.splitlines() if " tokens  " in x]
    assert len(lines) == 6, r.stdout
    assert "queue: 7 dispatched, 0 in flight, 0 waiting" in r.stdout, r.stdout


def test_without_the_lab_extra_the_example_names_the_extra_to_install(tmp_path):
    shim = tmp_path / "aiohttp"  # what an install with only the `openai` extra lacks
    shim.mkdir()
    (shim / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'aiohttp'\", name='aiohttp')\n")
    r = _run({"PYTHONPATH": str(tmp_path)})
    assert r.returncode != 0
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "'lab' extra" in err[0] and 'pip install -e ".[openai,lab]"' in err[0] and "aiohttp" in err[0], err
