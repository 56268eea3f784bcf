"""Issue 20: a configuration that cannot work stops the proxy with one short line naming the
setting, before the proxy's own traceback (a real LiteLLM proxy subprocess).

The start-up INFO line and the warning for a misspelt ``SJF_*`` name of a proxy that does
start are checked in tests/integration/test_probe_fallback.py (its proxy runs with
``SJF_SLOT=2``)."""

from __future__ import annotations

import pytest

from sjf_lab.proxy_runner import LiteLLMProxy, ProxyStartError, proxy_config

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_redis_url_without_scheme_stops_the_proxy_with_one_line_naming_it():
    proxy = LiteLLMProxy(proxy_config({"emu": "http://127.0.0.1:9/v1"}, plugin=True),
                         env={"SJF_REDIS_URL": "localhost:6379"}, startup_timeout_s=300)
    with pytest.raises(ProxyStartError) as info:
        proxy.start()
    log = str(info.value).splitlines() + proxy.log_text().splitlines()
    fatal = [i for i, line in enumerate(log) if line.startswith("litellm_sjf: FATAL")]
    assert fatal, "\n".join(log[-40:])
    line = log[fatal[0]]
    assert "SJF_REDIS_URL" in line and "redis://" in line and len(line) < 300
    tracebacks = [i for i, x in enumerate(log) if "Traceback" in x]
    assert not tracebacks or fatal[0] < tracebacks[0]  # first, not buried under the traceback
