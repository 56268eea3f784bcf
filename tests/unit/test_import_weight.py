"""The runtime packages do not import the tooling or its dependencies (issue 15).

Each import runs in a fresh interpreter, so modules other tests loaded do not count. The dev
venv has aiohttp, tqdm, matplotlib and LiteLLM installed: these tests fail if our import
pulls any of them in.
"""

import json
import os
import subprocess
import sys

import pytest

TOOLING = ("aiohttp", "tqdm", "matplotlib", "sjf_lab", "xgboost")


def _loaded_after(statement: str) -> dict:
    probe = (f"import sys, json; {statement}; "
             f"print(json.dumps({{m: m in sys.modules for m in {list(TOOLING) + ['litellm', 'onnxruntime']!r}}}))")
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True,
                         env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true"))
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("statement", ["import sjf_core", "import litellm_sjf", "import openai_sjf",
                                       "import sjf_core; sjf_core.Scheduler; sjf_core.load_predictor"])
def test_runtime_import_pulls_in_no_tooling(statement):
    loaded = _loaded_after(statement)
    assert not any(loaded[m] for m in TOOLING), loaded


def test_import_litellm_sjf_does_not_import_litellm():
    # LiteLLM itself imports aiohttp; the handler class (a CustomLogger) loads on first access.
    loaded = _loaded_after("import litellm_sjf")
    assert not loaded["litellm"] and not loaded["onnxruntime"], loaded
