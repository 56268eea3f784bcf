# Fresh-machine entry points. `make demo` runs the main job on its embedded default;
# `make test` runs the test suite (tests/unit and tests/integration, with a per-test timeout
# from pyproject and the 15 slowest tests listed), starting a throw-away redis-server for it, then the
# openai wrapper's tests again against the newest openai 3.x (`make test-openai3`) and the plugin's
# proxy tests against the newest LiteLLM (`make test-litellm-newest`). Each leg prints the versions it
# ran first (scripts/versions.py); the suite's legs install redis-server and Debian's chromium when
# they are missing (scripts/ensure_redis.sh, scripts/ensure_chromium.sh).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml setup.py | cksum | cut -d' ' -f1)
# openai 3.x (on httpx2) in its own venv: the pinned LiteLLM holds $(VENV) at openai 2.x.
VENV3  ?= .venv-openai3
PY3    := $(VENV3)/bin/python
STAMP3 := $(VENV3)/.installed-$(shell cat pyproject.toml setup.py | cksum | cut -d' ' -f1)
OPENAI3 ?= openai>=3,<4
# The newest LiteLLM in its own venv (the `dev` extra pins 1.106.12): the plain `litellm` wheel
# (it ships the proxy) plus its `proxy` extra's dependencies by name, without the `litellm-proxy`
# meta-package (scripts/litellm_proxy_deps.py reads them from the installed wheel's metadata).
VENVL  ?= .venv-litellm-newest
PYL    := $(VENVL)/bin/python
STAMPL := $(VENVL)/.installed-$(shell cat pyproject.toml setup.py scripts/litellm_proxy_deps.py | cksum | cut -d' ' -f1)
LITELLM_NEWEST ?= litellm>=1.106.0,!=1.107.0
# The core proxy tests: SJF order of a held burst, slots, release on every path, streams, τ,
# 429 (test_litellm_plugin); the status route and page on the proxy port (test_litellm_ops); the
# length of streamed Ollama answers, read from LiteLLM's chunks (test_litellm_ollama_streams).
LITELLM_NEWEST_TESTS ?= tests/integration/test_litellm_plugin.py tests/integration/test_litellm_ops.py \
	tests/integration/test_litellm_ollama_streams.py

export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_OFFLINE_MODE := true

.PHONY: install demo test test-suite test-openai3 test-litellm-newest bench clean

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	rm -f $(VENV)/.installed-*; touch $@

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/sjf demo

test: test-suite test-openai3 test-litellm-newest

test-suite: $(STAMP)
	bash scripts/ensure_redis.sh
	bash scripts/ensure_chromium.sh
	$(PY) scripts/versions.py test-suite
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
	$(PY3) scripts/versions.py test-openai3
	$(PY3) -m pytest -q --durations=15 tests/integration/test_openai_wrapper.py tests/integration/test_tenants_wrapper.py

# `pip install -e ".[litellm]"` must keep the newest LiteLLM (and its openai 3.x): checked here.
$(STAMPL): pyproject.toml setup.py scripts/litellm_proxy_deps.py
	test -x $(PYL) || $(PYTHON) -m venv $(VENVL)
	$(PYL) -m pip install -q --upgrade pip
	$(PYL) -m pip install -q --upgrade "$(LITELLM_NEWEST)"
	$(PYL) scripts/litellm_proxy_deps.py > $(VENVL)/proxy-requirements.txt
	$(PYL) -m pip install -q -r $(VENVL)/proxy-requirements.txt
	$(PYL) -c 'from importlib.metadata import version as v; print(v("litellm"), v("openai"))' > $(VENVL)/before.txt
	$(PYL) -m pip install -q -e ".[litellm,lab,test]"
	$(PYL) -c 'from importlib.metadata import version as v; print(v("litellm"), v("openai"))' | cmp -s - $(VENVL)/before.txt || { \
	  echo "make test-litellm-newest: pip install -e .[litellm] changed litellm/openai from $$(cat $(VENVL)/before.txt)" >&2; exit 1; }
	rm -f $(VENVL)/.installed-*; touch $@

test-litellm-newest: $(STAMPL)
	bash scripts/ensure_chromium.sh
	$(PYL) scripts/versions.py test-litellm-newest
	@echo "make test-litellm-newest: litellm and openai as before pip install -e .[litellm]: $$(cat $(VENVL)/before.txt)"
	$(PYL) -m pytest -q --durations=5 $(LITELLM_NEWEST_TESTS)

clean:
	rm -rf $(VENV) $(VENV3) $(VENVL) build dist src/*.egg-info .pytest_cache
