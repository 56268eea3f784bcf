"""Configuration that cannot be silently wrong (issue 20): URLs checked at start-up with an
error naming the setting."""

from __future__ import annotations

import pytest

from sjf_core.config import SchedulerConfig


@pytest.mark.parametrize("url", ["localhost:6379", "127.0.0.1:6379/0", "redis://localhost:port/0",
                                 "user:secret@localhost:6379"])
def test_a_redis_url_that_cannot_work_names_sjf_redis_url(url):
    with pytest.raises(ValueError) as info:
        SchedulerConfig.from_env({"SJF_REDIS_URL": url})
    msg = str(info.value)
    assert msg.startswith("bad SJF setting SJF_REDIS_URL: ") and "secret" not in msg


def test_a_redis_url_in_the_file_names_the_file_and_key(tmp_path):
    f = tmp_path / "sjf.json"
    f.write_text('{"redis_url": "localhost:6379"}')
    with pytest.raises(ValueError, match=f"SJF_CONFIG file {f}: 'redis_url'.*redis://"):
        SchedulerConfig.from_env({"SJF_CONFIG": str(f)})


@pytest.mark.parametrize("url", ["redis://localhost:6379/0", "rediss://h:6380", "redis:///0", "unix:///tmp/r.sock"])
def test_redis_urls_redis_py_accepts_pass(url):
    assert SchedulerConfig.from_env({"SJF_REDIS_URL": url}).redis_url == url


# ---- misspelt names ---------------------------------------------------------------------------
def test_a_misspelt_env_name_is_a_warning_naming_it_and_the_closest_setting():
    c = SchedulerConfig.from_env({"SJF_SLOT": "2", "SJF_POLICIY": "fcfs", "SJF_FROBNICATE": "1"})
    assert c.slots == 1 and c.policy == "sjf-tokens"  # ignored, and said so:
    assert "unknown setting SJF_SLOT is ignored; did you mean SJF_SLOTS?" in c.warnings
    assert "unknown setting SJF_POLICIY is ignored; did you mean SJF_POLICY?" in c.warnings
    assert any(w.startswith("unknown setting SJF_FROBNICATE is ignored") and "did you mean" not in w
               for w in c.warnings)
    assert len(c.warnings) == 3


def test_known_and_tooling_names_are_not_warned_about():
    env = {"SJF_SLOTS": "2", "SJF_REDIS_PREFIX": "x", "SJF_NO_C_SCAN": "1", "SJF_MEMORY_SALT": "s",
           "SJF_BACKEND_SLOTS": "http://h:1/v1=2", "SJF_TEST_REDIS_URL": "redis://h/0", "SJF_BENCH_GGUF": "m",
           "SJF_CACHE_DIR": "/tmp", "SJF_ORPHAN_GRACE_S": "3", "OTHER": "x"}
    assert not [w for w in SchedulerConfig.from_env(env).warnings if w.startswith("unknown setting")]


@pytest.mark.parametrize("text, key, best", [("slot: 2\n", "slot", "slots"), ("polcy: fcfs\n", "polcy", "policy"),
                                             ("backends: {http://h/v1: {slotz: 2}}\n", "slotz", "slots")])
def test_a_misspelt_file_key_is_an_error_naming_the_file_the_key_and_the_closest_key(tmp_path, text, key, best):
    f = tmp_path / "sjf.yaml"
    f.write_text(text)
    with pytest.raises(ValueError) as info:
        SchedulerConfig.from_env({"SJF_CONFIG": str(f)})
    msg = str(info.value)
    assert msg.startswith(f"SJF_CONFIG file {f}") and f"unknown keys [{key!r}]" in msg
    assert f"did you mean {best!r}?" in msg and "known:" not in msg  # short: the hint, not the whole list


# ---- backend URLs -----------------------------------------------------------------------------
@pytest.mark.parametrize("env", [{"SJF_BACKEND_SLOTS": "127.0.0.1:8080=2"}, {"SJF_BACKEND_SLOTS": '{"gpu-box/v1": 2}'},
                                 {"SJF_BACKEND_SLOTS": "http://h:port/v1=2"}])
def test_a_backend_url_that_does_not_parse_names_sjf_backend_slots(env):
    with pytest.raises(ValueError, match="SJF_BACKEND_SLOTS: backend URL .* does not parse"):
        SchedulerConfig.from_env(env)


def test_a_backend_url_of_the_file_that_does_not_parse_names_the_file(tmp_path):
    f = tmp_path / "sjf.yaml"
    f.write_text("backends: {'localhost:11434': {slots: 1}}\n")
    with pytest.raises(ValueError, match=f"SJF_CONFIG file {f}: 'backends': backend URL 'localhost:11434' does not parse"):
        SchedulerConfig.from_env({"SJF_CONFIG": str(f)})


# ---- the start-up line and the fatal line -----------------------------------------------------
def test_the_start_up_line_says_policy_guard_slots_memory_store_and_status():
    from litellm_sjf._startup import startup_line
    from litellm_sjf.settings import PluginSettings

    line = startup_line(PluginSettings())
    assert line == ("litellm_sjf loaded: policy sjf-tokens, guard work-bound (tau 3x), slots 1 per backend, "
                    "memory on, store in-process, status not served (set SJF_STATUS_PORT)")
    line = startup_line(PluginSettings(SchedulerConfig.from_env({
        "SJF_POLICY": "fcfs", "SJF_PROMOTION": "strict", "SJF_BACKEND_SLOTS": "http://gpu:8080/v1=2",
        "SJF_MEMORY": "off", "SJF_REDIS_URL": "redis://:secret@r:6379/0", "SJF_STATUS_PORT": "4001"})))
    assert line == ("litellm_sjf loaded: policy fcfs, guard strict (tau 3x), slots 1 (http://gpu:8080/v1: 2) per "
                    "backend, memory off, store redis://r:6379/0 (fail_mode open), "
                    "status on http://127.0.0.1:4001/sjf/status")
    on_proxy = startup_line(PluginSettings(), on_proxy=True)
    assert on_proxy.endswith("status page /sjf/ on the proxy's port (JSON at /sjf/status; the master key)")


def test_a_fatal_setting_is_one_short_line_on_stderr_naming_it(monkeypatch, capsys):
    import litellm_sjf

    monkeypatch.setenv("SJF_SLOTS", "0")
    monkeypatch.setattr(litellm_sjf, "_instance", None)
    with pytest.raises(ValueError, match="SJF_SLOTS"):
        litellm_sjf._handler(start=True)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("litellm_sjf: FATAL configuration error") and "SJF_SLOTS" in err[0]
    assert len(err[0]) < 200


# ---- the oracle is a yardstick, never a live policy ---------------------------------------------
def test_sjf_policy_oracle_is_refused_naming_the_setting_and_what_it_is_for(tmp_path):
    with pytest.raises(ValueError) as info:
        SchedulerConfig.from_env({"SJF_POLICY": "oracle"})
    msg = str(info.value)
    assert msg.startswith("bad SJF setting SJF_POLICY: 'oracle' orders by each request's true answer length")
    assert "simulator" in msg and "benchmarks" in msg
    f = tmp_path / "sjf.json"
    f.write_text('{"policy": "Oracle"}')
    with pytest.raises(ValueError, match=f"SJF_CONFIG file {f}: 'policy': 'oracle' orders"):
        SchedulerConfig.from_env({"SJF_CONFIG": str(f)})
    with pytest.raises(ValueError, match="bad SJF setting policy: 'oracle'"):
        SchedulerConfig.create(policy="oracle")


def test_the_bad_policy_message_offers_only_the_live_policies():
    with pytest.raises(ValueError) as info:
        SchedulerConfig.from_env({"SJF_POLICY": "lifo"})
    assert str(info.value) == ("bad SJF setting SJF_POLICY: unknown policy 'lifo'; "
                               "choose one of ['fair', 'fcfs', 'sjf', 'sjf-tokens']")


def test_the_wrapper_refuses_the_oracle_and_the_simulator_and_python_objects_keep_it():
    import openai

    import openai_sjf
    from sjf_core.policy._policies import OraclePolicy, make_policy

    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x")
    with pytest.raises(ValueError, match="policy: 'oracle' orders by each request's true answer length"):
        openai_sjf.wrap(client, policy="oracle")
    assert make_policy("oracle").name == "oracle"  # the simulator's yardstick (sjf_lab.sim)
    assert SchedulerConfig.create(policy=OraclePolicy()).policy.name == "oracle"  # a deliberate object


# ---- every problem in one go (issue 29, item 6) ----------------------------------------------
def test_every_problem_is_reported_at_once_each_in_its_own_words_with_the_warnings():
    from sjf_core.config import SettingsError

    alone = {}
    for name, value in (("SJF_REDIS_URL", "localhost:6379"), ("SJF_K", "zero"), ("SJF_POLICY", "nope"),
                        ("SJF_STATUS_PORT", "70000")):
        with pytest.raises(ValueError) as info:
            SchedulerConfig.from_env({name: value})
        alone[name] = str(info.value)
    with pytest.raises(SettingsError) as info:
        SchedulerConfig.from_env({"SJF_REDIS_URL": "localhost:6379", "SJF_K": "zero", "SJF_POLICY": "nope",
                                  "SJF_STATUS_PORT": "70000", "SJF_SLOT": "2", "SJF_ORPHAN_GRACE_S": "3"})
    err = info.value
    assert sorted(err.problems) == sorted(alone.values())  # each as it is alone, none twice
    assert str(err).startswith("4 problems: (1) ") and all(p in str(err) for p in err.problems)
    assert err.warnings == ("unknown setting SJF_SLOT is ignored; did you mean SJF_SLOTS?",)
    assert err.retired == ("SJF_ORPHAN_GRACE_S",)


def test_a_file_that_cannot_be_read_and_a_bad_variable_are_both_reported(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ValueError) as info:
        SchedulerConfig.from_env({"SJF_CONFIG": str(missing), "SJF_SLOTS": "0"})
    assert [p.split(":")[0] for p in info.value.problems] == [f"SJF_CONFIG file {missing} cannot be read",
                                                              "bad SJF setting SJF_SLOTS"]


def test_a_policy_that_cannot_run_live_is_reported_once():
    with pytest.raises(ValueError) as info:
        SchedulerConfig.from_env({"SJF_POLICY": "oracle", "SJF_REDIS_URL": "redis://localhost:6379/0"})
    assert len(info.value.problems) == 1 and "oracle" in str(info.value)


def test_the_fatal_line_names_every_problem_and_the_warnings_follow(capsys, caplog):
    from litellm_sjf._startup import fatal

    with pytest.raises(ValueError) as info:
        SchedulerConfig.from_env({"SJF_REDIS_URL": "localhost:6379", "SJF_SLOTS": "0", "SJF_SLOT": "2"})
    line = fatal(info.value)
    assert capsys.readouterr().err.splitlines() == [line]
    assert "SJF_REDIS_URL" in line and "SJF_SLOTS" in line and line.count("FATAL") == 1
    warned = [r for r in caplog.records if r.name == "litellm_sjf" and r.levelname == "WARNING"]
    assert [r.getMessage() for r in warned] == ["litellm_sjf: unknown setting SJF_SLOT is ignored; "
                                                "did you mean SJF_SLOTS?"]
