"""examples/litellm_config.yaml lists every plugin setting, one line each with its default, and
cannot drift from what the plugin reads (after a fresh user's day: the README called it "the
documented example, with every setting explained" while it sent readers to
litellm_sjf/settings.py and left out SJF_REDIS_URL, SJF_POOL, SJF_MEMORY, SJF_METRICS_PORT,
SJF_FAIRNESS, SJF_OVERLOAD, SJF_RATE_LIMIT and others).

* the names: exactly the ``SJF_*`` settings the runtime knows (``sjf_core.config._read.KNOWN_ENV``)
  but the retired ones, which it names as retired;
* each default: setting the variable to the value shown changes nothing the plugin does
  (the effective settings equal those of an empty environment); an empty value means unset;
* each example value (``e.g. `...` ``) of a variable is accepted;
* no line sends the reader into the source code.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from litellm_sjf.settings import PluginSettings
from sjf_core.config import SchedulerConfig, memory_salt, native_scan_disabled
from sjf_core.config._read import KNOWN_ENV, RETIRED_ENV

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "litellm_config.yaml"
LINE = re.compile(r"^#\s+(SJF_[A-Z0-9_]+)=(\S*)\s+(\S.*)$")


def _listed() -> dict[str, tuple[str, str]]:
    out = {}
    for line in EXAMPLE.read_text().splitlines():
        m = LINE.match(line)
        if m:
            assert m.group(1) not in out, f"{m.group(1)} is listed twice"
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


def _effective(env: dict) -> dict:
    """What the plugin does with ``env``: its settings with every default resolved."""
    c = SchedulerConfig.from_env(env)
    s, policy = PluginSettings(c), c.make_policy()
    fields = {f.name: getattr(c, f.name) for f in dataclasses.fields(c)
              if f.name not in ("policy", "tau", "promotion", "lease_ttl_s")}
    return {**fields, "policy": policy.name, "guard": policy.new_promotion().wire(), "tau": policy.tau_config,
            "lease_ttl_s": s.lease_ttl_s, "native_scan_disabled": native_scan_disabled(env),
            "memory_salt": memory_salt(env)}


def test_the_example_lists_every_setting_once_and_names_the_retired_ones():
    listed = _listed()
    assert set(listed) == set(KNOWN_ENV) - set(RETIRED_ENV), (
        f"missing: {sorted(set(KNOWN_ENV) - set(RETIRED_ENV) - set(listed))}; "
        f"not settings: {sorted(set(listed) - set(KNOWN_ENV))}")
    text = EXAMPLE.read_text()
    assert all(name in text for name in RETIRED_ENV)
    for name in ("SJF_REDIS_URL", "SJF_POOL", "SJF_MEMORY", "SJF_METRICS_PORT", "SJF_FAIRNESS", "SJF_OVERLOAD",
                 "SJF_RATE_LIMIT"):  # the ones a fresh user looked for
        assert name in listed


@pytest.mark.parametrize("name", sorted(set(KNOWN_ENV) - set(RETIRED_ENV)))
def test_each_default_shown_is_what_the_plugin_does_unset(name):
    value, meaning = _listed()[name]
    if value == "":
        assert meaning.startswith("unset"), (name, meaning)  # an empty default is said to be unset
        return
    assert _effective({name: value}) == _effective({}), f"{name}={value} is not the default"


@pytest.mark.parametrize("name", sorted(n for n in set(KNOWN_ENV) - set(RETIRED_ENV) if n != "SJF_CONFIG"))
def test_each_example_value_is_accepted(name):
    _, meaning = _listed()[name]
    for example in re.findall(r"e\.g\. `([^`]*)`", meaning):
        SchedulerConfig.from_env({name: example})  # raises naming the setting if the example were wrong


def test_the_example_is_a_working_proxy_config_and_sends_no_one_into_the_source():
    cfg = yaml.safe_load(EXAMPLE.read_text())
    assert cfg["litellm_settings"]["callbacks"] == ["litellm_sjf.proxy_handler_instance"]
    assert cfg["general_settings"]["cancel_on_disconnect"] is True
    text = EXAMPLE.read_text()
    assert not re.search(r"\b[\w/]+\.py\b", text), re.findall(r"\b[\w/]+\.py\b", text)
    file_part = text.split("The SJF_CONFIG file takes")[1].split("\n#\n")[0]
    file_yaml = "\n".join(line[3:] for line in file_part.splitlines()[1:])
    SchedulerConfig.create(**{k: v for k, v in yaml.safe_load(file_yaml).items() if k != "backends"})
