"""One default for each setting, defined in the settings ground (:mod:`sjf_core.settings`): every layer that has a
default derives it from there (the promotion rule today: it was "work-bound" in Policy but
"strict" in make_promotion, the pending structures, the Redis wire defaults and PluginPolicy)."""

from __future__ import annotations

import ast
from pathlib import Path

import pluggy

from sjf_core import config
from sjf_core.admission._redis_config import policy_server_args
from sjf_core.config import DEFAULT_PROMOTION, SchedulerConfig
from sjf_core.ext._plugin_parts import PluginPolicy
from sjf_core.policy._drr import DRRPending
from sjf_core.policy._heap import HeapPending
from sjf_core.policy._policies import POLICIES, Policy, make_policy
from sjf_core.policy.promotion import PROMOTIONS, make_promotion

SRC = Path(__file__).resolve().parents[2] / "src"


class NoPromotion(Policy):
    """A policy object that never ran Policy.__init__ (a plugin's own wrapper)."""

    def __init__(self):
        self.tau_config = make_policy("sjf").tau_config


def test_every_layer_takes_the_promotion_default_from_config():
    assert DEFAULT_PROMOTION in PROMOTIONS
    keyed = [n for n in POLICIES if n not in ("fcfs", "oracle")]  # τ off by default: TAU_OFF_PROMOTION
    assert {make_policy(n).promotion for n in keyed} == {DEFAULT_PROMOTION}
    assert {make_policy(n).promotion for n in ("fcfs", "oracle")} == {config.TAU_OFF_PROMOTION}
    assert make_promotion().name == DEFAULT_PROMOTION
    assert HeapPending().promotion == DRRPending().promotion == DEFAULT_PROMOTION
    assert SchedulerConfig().make_policy().promotion == DEFAULT_PROMOTION
    assert policy_server_args(make_policy("sjf-tokens")).promotion == DEFAULT_PROMOTION  # the Redis store
    assert PluginPolicy(NoPromotion(), pluggy.PluginManager("sjf")).promotion == DEFAULT_PROMOTION


def _rule_literal_defaults(path: Path) -> list[str]:
    """Where ``path`` writes a promotion rule name as a default: a parameter default, a
    ``setdefault("promotion", "...")``, a ``getattr(x, "promotion", "...")`` or a
    ``"promotion": "..."`` dict entry."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        values = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            values = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[-2], ast.Constant) \
                and node.args[-2].value == "promotion":
            values = [node.args[-1]]
        elif isinstance(node, ast.Dict):
            values = [v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and k.value == "promotion"]
        found += [f"{path.relative_to(SRC)}:{v.lineno}" for v in values
                  if isinstance(v, ast.Constant) and v.value in PROMOTIONS]
    return found


def test_the_promotion_default_is_written_once():
    runtime = [p for pkg in ("sjf_core", "litellm_sjf", "openai_sjf") for p in (SRC / pkg).rglob("*.py")]
    assert [hit for p in runtime for hit in _rule_literal_defaults(p)] == []
    defined = [str(p.relative_to(SRC)) for p in runtime
               if any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "DEFAULT_PROMOTION" for t in n.targets)
                      for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))))]
    assert defined == ["sjf_core/settings/_policy.py"]
