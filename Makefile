# Fresh-machine entry points. `make demo` runs the main job on its embedded default;
# `make test` runs the test suite (tests/unit and tests/integration, with a per-test timeout
# from pyproject and the 15 slowest tests listed), starting a throw-away redis-server for it, then the
# openai wrapper's tests again against the newest openai 3.x (`make test-openai3`).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml setup.py | cksum | cut -d' ' -f1)
# openai 3.x (on httpx2) in its own venv: the pinned LiteLLM holds $(VENV) at openai 2.x.
VENV3  ?= .venv-openai3
PY3    := $(VENV3)/bin/python
STAMP3 := $(VENV3)/.installed-$(shell cat pyproject.toml setup.py | cksum | cut -d' ' -f1)
OPENAI3 ?= openai>=3,<4

export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_OFFLINE_MODE := true

.PHONY: install demo test test-suite test-openai3 bench clean

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	rm -f $(VENV)/.installed-*; touch $@

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/sjf demo

test: test-suite test-openai3

test-suite: $(STAMP)
	bash scripts/ensure_redis.sh
	bash scripts/with_redis.sh $(PY) -m pytest -q --durations=15

# The newest openai 3.x needs Python >= 3.11 (httpx2); the wrapper's test file runs there too.
$(STAMP3): pyproject.toml setup.py
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
	  echo "make test-openai3: openai 3.x needs Python >= 3.11, $(PYTHON) is older; set PYTHON=python3.11" >&2; exit 1; }
	test -x $(PY3) || $(PYTHON) -m venv $(VENV3)
	$(PY3) -m pip install -q --upgrade pip
	$(PY3) -m pip install -q --upgrade -e ".[openai,lab,test]" "$(OPENAI3)"
	rm -f $(VENV3)/.installed-*; touch $@

test-openai3: $(STAMP3)
	$(PY3) -c 'import openai, httpx2; print("openai", openai.__version__, "on httpx2", httpx2.__version__)'
	$(PY3) -m pytest -q --durations=15 tests/integration/test_openai_wrapper.py tests/integration/test_tenants_wrapper.py

clean:
	rm -rf $(VENV) $(VENV3) build dist src/*.egg-info .pytest_cache
