"""SchedulerConfig: defaults, file < env precedence, clear errors naming the setting, one reader."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from sjf_core import Scheduler
from sjf_core.admission._overload import OverloadConfig
from sjf_core.config import AdapterConfig, BackendConfig, SchedulerConfig

SRC = Path(__file__).resolve().parents[2] / "src"


def test_defaults_are_the_documented_ones():
    c = SchedulerConfig.from_env({})
    assert c == SchedulerConfig()
    assert (c.predictor, c.policy, c.tau, c.slots, c.lease_ttl_s) == ("default", "sjf-tokens", "3x", 1, None)
    assert (c.memory, c.plugins, c.metrics, c.metrics_port, c.metrics_addr) == (True, "auto", True, None, "127.0.0.1")
    assert c.fairness.mode == "key" and c.redis_url is None and dict(c.backends) == {}
    assert c.adapter == AdapterConfig(on_disconnect="probe", probe_timeout_s=600.0, drain_max_s=600.0)


def test_config_is_frozen():
    c = SchedulerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.slots = 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.promotion.k = 3  # typed settings, frozen too
    assert c.replace(slots=4).slots == 4 and c.slots == 1


def test_env_beats_the_file_and_the_file_beats_defaults(tmp_path):
    f = tmp_path / "sjf.yaml"
    f.write_text("policy: sjf\ntau: 4\nslots: 2\npromotion: strict\nredis_url: redis://127.0.0.1:7/0\n"
                 "redis: {fail_mode: closed, redis_lease_ttl_s: 4}\n"
                 "backends:\n  http://h:1/v1/: {slots: 3, overload: {max_queue_depth: 5}, on_disconnect: release}\n")
    from_file = SchedulerConfig.from_file(str(f))
    assert (from_file.policy, from_file.tau, from_file.slots) == ("sjf", 4, 2)
    assert from_file == SchedulerConfig.from_env({"SJF_CONFIG": str(f)})
    c = SchedulerConfig.from_env({"SJF_CONFIG": str(f), "SJF_TAU": "off", "SJF_SLOTS": "5",
                                  "SJF_REDIS_FAIL_MODE": "open", "SJF_BACKEND_SLOTS": "http://h:1/v1=6,http://h:2/v1=1"})
    assert (c.policy, c.tau, c.slots) == ("sjf", "off", 5)  # policy from the file, the rest from env
    assert (c.redis.fail_mode, c.redis.redis_lease_ttl_s) == ("open", 4)  # SJF_REDIS_* beats the file
    assert c.backends["http://h:1/v1"] == BackendConfig(slots=6, overload=OverloadConfig(max_queue_depth=5),
                                                        on_disconnect="release")
    assert c.backend("http://h:2/v1").slots == 1 and c.backend("http://other/v1").slots == 5
    assert c.backend("http://other/v1").overload is None and c.backend("http://other/v1").on_disconnect == "probe"
    assert c.promotion.rule == "strict"


def test_queue_names_join_urls_and_conflicts_keep_the_fewest_slots(tmp_path):
    f = tmp_path / "sjf.json"
    f.write_text('{"backends": {"http://localhost:1/v1": {"queue": "box", "slots": 2},'
                 ' "http://127.0.0.2:9": {"queue": "box", "slots": 3}}}')
    c = SchedulerConfig.from_file(str(f))
    assert c.queue_key("http://127.0.0.1:1") == c.queue_key("http://127.0.0.2:9/v1/") == "queue:box"
    assert c.backend("queue:box").slots == 2 and any("different slots" in w for w in c.warnings)


@pytest.mark.parametrize("env, named", [
    ({"SJF_POLICY": "lifo"}, "SJF_POLICY"), ({"SJF_TAU": "soon"}, "SJF_TAU"), ({"SJF_SLOTS": "0"}, "SJF_SLOTS"),
    ({"SJF_SLOTS": "two"}, "SJF_SLOTS"), ({"SJF_K": "x"}, "SJF_K"), ({"SJF_LEASE_TTL_S": "-1"}, "SJF_LEASE_TTL_S"),
    ({"SJF_METRICS_PORT": "abc"}, "SJF_METRICS_PORT"), ({"SJF_METRICS_PORT": "70000"}, "SJF_METRICS_PORT"),
    ({"SJF_ON_DISCONNECT": "ignore"}, "SJF_ON_DISCONNECT"), ({"SJF_BACKEND_SLOTS": "nonsense"}, "SJF_BACKEND_SLOTS"),
    ({"SJF_OVERLOAD": "{"}, "SJF_OVERLOAD"), ({"SJF_OVERLOAD": '{"bogus": 1}'}, "SJF_OVERLOAD"),
    ({"SJF_RATE_LIMIT": "fast"}, "SJF_RATE_LIMIT"), ({"SJF_FAIRNESS": "bogus"}, "SJF_FAIRNESS"),
    ({"SJF_DEFAULT_PRIORITY": "high"}, "SJF_DEFAULT_PRIORITY"), ({"SJF_PROMOTION": "never"}, "SJF_PROMOTION"),
    ({"SJF_PROBE_TIMEOUT_S": "0"}, "SJF_PROBE_TIMEOUT_S"), ({"SJF_STATUS_PORT": "x"}, "SJF_STATUS_PORT"),
    ({"SJF_REDIS_URL": "redis://h/0", "SJF_REDIS_FAIL_MODE": "sometimes"}, "SJF_REDIS_FAIL_MODE"),
    ({"SJF_REDIS_URL": "redis://h/0", "SJF_POLICY": "fair"}, "SJF_POLICY"),
    ({"SJF_REDIS_LEASE_TTL_S": "x"}, "SJF_REDIS_LEASE_TTL_S"), ({"SJF_CONFIG": "/nonexistent/sjf.yaml"}, "SJF_CONFIG"),
])
def test_a_bad_env_value_names_its_variable(env, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        SchedulerConfig.from_env(env)


@pytest.mark.parametrize("text, named", [
    ("slots: 0\n", "'slots'"), ("tau: soon\n", "'tau'"), ("lease_ttl_s: -3\n", "'lease_ttl_s'"),
    ("overload: {bogus: 1}\n", "'overload'"),
    ("bogus: 1\n", "unknown keys ['bogus']"),
    ("backends: {http://h/v1: {slots: none}}\n", "'backends'"),
    ("backends: {http://h/v1: {speed: 3}}\n", "unknown keys ['speed']"),
    ("redis_url: redis://h/0\nredis: {lease: 4}\n", "unknown Redis options"),
])
def test_a_bad_file_value_names_the_file_and_its_key(tmp_path, text, named):
    f = tmp_path / "sjf.yaml"
    f.write_text(text)
    with pytest.raises(ValueError, match=re.escape(named)) as err:
        SchedulerConfig.from_file(str(f))
    assert str(f) in str(err.value), f"the message does not name the file: {err.value}"


def test_env_switches_of_the_parts():
    c = SchedulerConfig.from_env({"SJF_MEMORY": "off", "SJF_PLUGINS": "none", "SJF_METRICS": "0",
                                  "SJF_METRICS_PORT": "9109", "SJF_PREDICTOR": "none", "SJF_MEMORY_PATH": "/tmp/m.npz"})
    assert (c.memory, c.plugins, c.metrics, c.metrics_port, c.predictor) == (False, "none", False, 9109, None)
    s = Scheduler(c)
    assert s.memory is None and s.plugins.manager is None and s.predictor is None
    assert not any(type(x).__name__ == "PrometheusMetrics" for x in s.listeners)


def test_keyword_shorthand_is_config_replace():
    s = Scheduler(predictor=None, plugins=False, slots=3, backend_slots={"http://b/v1/": 2}, lease_ttl_s=5)
    assert s.config == SchedulerConfig().replace(slots=3, backend_slots={"http://b/v1": 2}, lease_ttl_s=5)
    assert s.queue("http://a/v1").slots == 3 and s.queue("http://b/v1").slots == 2
    with pytest.raises(TypeError, match="bogus"):
        Scheduler(predictor=None, bogus=1)
    assert s.set_slots("http://c/v1", 4) and s.queue("http://c/v1").slots == 4
    assert not s.set_slots("http://c/v1", 1) and s.queue("http://c/v1").slots == 4  # the queue exists


def test_settings_are_read_only_in_config_py():
    """No other runtime module reads the environment (sjf_lab is tooling, with its own switches):
    the composition (sjf_core/config/) and the two process-wide switches of the settings ground."""
    readers = set()
    for pkg in ("sjf_core", "litellm_sjf", "openai_sjf"):
        for path in (SRC / pkg).rglob("*.py"):
            with open(path, "rb") as fh:  # code tokens only: docstrings and comments may name os.environ
                names = [t.string for t in tokenize.tokenize(fh.readline) if t.type == tokenize.NAME]
            if "environ" in names or "getenv" in names or "environb" in names:
                readers.add(str(path.relative_to(SRC)))
    assert readers == {"sjf_core/config/__init__.py", "sjf_core/settings/_switches.py"}


def test_scheduler_and_metrics_work_without_prometheus_client():
    code = (
        "import sys, asyncio\n"
        "sys.modules['prometheus_client'] = None  # import fails as if not installed\n"
        "from sjf_core import Scheduler, SchedulerConfig, start_metrics\n"
        "from sjf_core.ext import _metrics\n"
        "assert not _metrics.AVAILABLE\n"
        "c = SchedulerConfig.from_env({'SJF_METRICS_PORT': '0'})\n"
        "s = Scheduler(c, predictor=None, plugins=False)\n"
        "async def go():\n"
        "    async with s.ticket('http://127.0.0.1:9/v1', {'messages': []}):\n"
        "        pass\n"
        "asyncio.run(go())\n"
        "assert start_metrics(c) is None\n"
        "_metrics.count_probe('http://127.0.0.1:9/v1', 'sent')\n"
        "print('OK', s.queue('http://127.0.0.1:9/v1').stats.released)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["OK", "1"]


def test_redis_settings_are_taken_as_themselves_or_as_a_mapping():
    """The typed settings are accepted where their mapping is: Scheduler(redis=RedisSettings(...))."""
    from sjf_core.config import RedisSettings, SchedulerConfig

    typed = SchedulerConfig().replace(redis=RedisSettings(retry_s=0.2, redis_lease_ttl_s=1.5))
    mapped = SchedulerConfig().replace(redis={"retry_s": 0.2, "redis_lease_ttl_s": 1.5})
    assert typed.redis == mapped.redis
    assert typed.redis.retry_s == 0.2 and typed.redis.redis_lease_ttl_s == 1.5
