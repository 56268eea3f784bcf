"""Issue 20: a configuration that cannot work stops the proxy with one line naming the
setting (a real LiteLLM proxy subprocess). Issue 29 (item 6): every problem in one go: that
line names every fatal problem, and the non-fatal ones (an unknown ``SJF_*`` name) are still
logged. Since: the FATAL line also names the warned ones and is the proxy's last line (the
process ends with status 3, without LiteLLM's traceback).

The start-up INFO line and the warning for a misspelt ``SJF_*`` name of a proxy that does
start are checked in tests/integration/test_probe_fallback.py (its proxy runs with
``SJF_SLOT=2``)."""

from __future__ import annotations

import pytest

from sjf_lab.proxy_runner import LiteLLMProxy, ProxyStartError, proxy_config

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def failed_start(env: dict) -> list[str]:
    """The log lines of a proxy (plugin on, one backend) that must fail to start with ``env``."""
    return failed_start_and_log(env)[1]


def failed_start_and_log(env: dict) -> tuple[str, list[str]]:
    """(the runner's error, the proxy's own log lines) of a proxy that must fail to start."""
    proxy = LiteLLMProxy(proxy_config({"emu": "http://127.0.0.1:9/v1"}, plugin=True), env=env, startup_timeout_s=300)
    with pytest.raises(ProxyStartError) as info:
        proxy.start()
    return str(info.value), proxy.log_lines()


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
    problems, the misspelt name is warned with its correction (and named in the FATAL line)."""
    log = failed_start({"SJF_REDIS_URL": "localhost:6379", "SJF_PROMOTION": "one-in-k", "SJF_K": "0",
                        "SJF_SLOT": "2"})
    fatal = [i for i, line in enumerate(log) if line.startswith("litellm_sjf: FATAL")]
    assert len(fatal) == 1, "\n".join(log[-40:])
    line = log[fatal[0]]
    assert "SJF_REDIS_URL" in line and "redis://" in line, line  # the first problem, in its own words
    assert "SJF_K" in line and "k ('one-in-k' promotion) must be" in line, line  # and the second one
    warned = [x for x in log if "SJF_SLOT " in x and not x.startswith("litellm_sjf: FATAL")]
    assert len(warned) == 1 and "did you mean SJF_SLOTS?" in warned[0] and warned[0].startswith("WARNING"), warned
    assert log.index(warned[0]) < fatal[0] and "did you mean SJF_SLOTS?" in line  # logged, then in the last line
    tracebacks = [i for i, x in enumerate(log) if "Traceback" in x]
    assert not tracebacks or max(fatal[0], log.index(warned[0])) < tracebacks[0]


def test_a_failed_start_ends_with_the_fatal_line_naming_every_problem_without_a_traceback(tmp_path):
    """A file with an unknown key and bad values, a bad Redis URL and a misspelt SJF_SLOT: the
    proxy exits non-zero, no traceback follows, and its last line is the FATAL line naming all
    five, the file's bad values beside its unknown key (before: only the unknown key, and ~370
    lines of LiteLLM's traceback whose last line repeated the first problem alone)."""
    f = tmp_path / "sjf.yaml"
    f.write_text("polcy: fcfs\ntau: abc\nbackends:\n  http://localhost:11434: {slots: two}\n")
    error, log = failed_start_and_log({"SJF_CONFIG": str(f), "SJF_REDIS_URL": "localhost:6379", "SJF_SLOT": "2"})
    assert "exited with code 3" in error, error
    assert not [x for x in log if "Traceback" in x], "\n".join(log[-60:])
    lines = [x for x in log if x.strip()]
    last = lines[-1]
    assert last.startswith("litellm_sjf: FATAL configuration error"), "\n".join(lines[-20:])
    for said in ("unknown keys ['polcy'] ('polcy': did you mean 'policy'?)", "'backends': slots of backend "
                 "http://localhost:11434 (or 'auto') must be an integer >= 1, got 'two'", "'tau': cannot parse tau='abc'",
                 "SJF_REDIS_URL: 'localhost:6379' has no Redis scheme", "did you mean SJF_SLOTS?"):
        assert said in last, (said, last)
    assert last.startswith("litellm_sjf: FATAL configuration error, the proxy cannot start: 4 problems: (1) "), last
    assert "'policy' / 'tau'" not in last
    warned = [x for x in lines if "SJF_SLOT " in x and x.startswith("WARNING")]  # its own log line, too
    assert len(warned) == 1 and lines.index(warned[0]) < len(lines) - 1
