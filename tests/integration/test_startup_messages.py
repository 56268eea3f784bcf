"""Issue 20: a configuration that cannot work stops the proxy with one short line naming the
setting, before the proxy's own traceback (a real LiteLLM proxy subprocess). Issue 29 (item 6):
every problem in one go: that line names every fatal problem, and the non-fatal ones (an
unknown ``SJF_*`` name) are still logged.

The start-up INFO line and the warning for a misspelt ``SJF_*`` name of a proxy that does
start are checked in tests/integration/test_probe_fallback.py (its proxy runs with
``SJF_SLOT=2``)."""

from __future__ import annotations

import pytest

from sjf_lab.proxy_runner import LiteLLMProxy, ProxyStartError, proxy_config

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def failed_start(env: dict) -> list[str]:
    """The log lines of a proxy (plugin on, one backend) that must fail to start with ``env``."""
    proxy = LiteLLMProxy(proxy_config({"emu": "http://127.0.0.1:9/v1"}, plugin=True), env=env, startup_timeout_s=300)
    with pytest.raises(ProxyStartError) as info:
        proxy.start()
    return str(info.value).splitlines() + proxy.log_text().splitlines()


def test_a_redis_url_without_scheme_stops_the_proxy_with_one_line_naming_it():
    log = failed_start({"SJF_REDIS_URL": "localhost:6379"})
    fatal = [i for i, line in enumerate(log) if line.startswith("litellm_sjf: FATAL")]
    assert fatal, "\n".join(log[-40:])
    line = log[fatal[0]]
    assert "SJF_REDIS_URL" in line and "redis://" in line and len(line) < 300
    tracebacks = [i for i, x in enumerate(log) if "Traceback" in x]
    assert not tracebacks or fatal[0] < tracebacks[0]  # first, not buried under the traceback


def test_every_configuration_problem_is_reported_in_one_start():
    """A bad Redis URL, a bad k and a misspelt SJF_SLOTS together: one FATAL line names both fatal
    problems, the misspelt name is warned with its correction, all before the traceback."""
    log = failed_start({"SJF_REDIS_URL": "localhost:6379", "SJF_PROMOTION": "one-in-k", "SJF_K": "0",
                        "SJF_SLOT": "2"})
    fatal = [i for i, line in enumerate(log) if line.startswith("litellm_sjf: FATAL")]
    assert len(fatal) == 1, "\n".join(log[-40:])
    line = log[fatal[0]]
    assert "SJF_REDIS_URL" in line and "redis://" in line, line  # the first problem, in its own words
    assert "SJF_K" in line and "k ('one-in-k' promotion) must be" in line, line  # and the second one
    warned = [x for x in log if "SJF_SLOT " in x]
    assert len(warned) == 1 and "did you mean SJF_SLOTS?" in warned[0] and warned[0].startswith("WARNING"), warned
    tracebacks = [i for i, x in enumerate(log) if "Traceback" in x]
    assert not tracebacks or max(fatal[0], log.index(warned[0])) < tracebacks[0]
