"""The baselines and policies a benchmark run compares (DESIGN.md "Benchmark protocol").

Each :class:`PolicySpec` says how one contender is realised on a path:

* ``fcfs``: no plugin at all: requests go straight to the serial backend, which
  serves them first-come first-served from its own queue;
* ``litellm-priority``: no plugin, but LiteLLM's built-in ``priority`` scheduler is
  fed our predicted class (0 Short, 1 Medium, 2 Long; lower runs sooner) as the
  request's integer ``priority`` (LiteLLM proxy only);
* ``sjf``: the project's defaults (``Scheduler()``): ``sjf-tokens`` (ascending
  expected answer tokens, capped by ``max_tokens``), τ = 3x, the default promotion;
* ``sjf-no-tau``: the same without the starvation guard;
* ``sjf-fcfs-bound``: the default policy with the previous default guard ("fcfs-bound");
* ``sjf-plong``: the paper's key, ascending P(Long), with the default τ and promotion;
* ``sjf-paper``: P(Long) with the paper's literal τ rule (strict oldest-first
  promotion at τ = 3 × mean Short service time, paper §3.4);
* ``fair``: deficit round robin across classes (when the policy exists);
* ``oracle``: ascending **true** answer length (``sjf-tokens`` fed by
  :class:`~sjf_lab.bench.oracle.OraclePredictor`, τ off): the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PolicySpec:
    """One contender of a benchmark run.

    Attributes:
        label: the name in tables and plots.
        policy: ``sjf_core`` policy name for the plugin, or None for no plugin.
        tau: τ setting for the plugin ("3x", seconds, "off"), or None for the policy default.
        options: extra policy options (e.g. ``{"promotion": "strict"}``).
        predictor: "default" (the shipped model) or "oracle" (true lengths).
        litellm_priority: send our predicted class as LiteLLM's ``priority`` (no plugin).
    """

    label: str
    policy: str | None = None
    tau: Any = None
    options: dict = field(default_factory=dict)
    predictor: str = "default"
    litellm_priority: bool = False

    @property
    def plugin(self) -> bool:
        """True when the contender runs our admission plugin."""
        return self.policy is not None

    def scheduler_kwargs(self) -> dict:
        """Keyword arguments for :class:`sjf_core._scheduler.Scheduler` (without the predictor)."""
        kw: dict = {"policy": self.policy}
        if self.tau is not None:
            kw["tau"] = self.tau
        if self.options:
            kw["policy_options"] = dict(self.options)
        return kw


BUILTIN: dict[str, PolicySpec] = {
    s.label: s
    for s in (
        PolicySpec("fcfs"),
        PolicySpec("litellm-priority", litellm_priority=True),
        PolicySpec("sjf", "sjf-tokens"),
        PolicySpec("sjf-no-tau", "sjf-tokens", tau="off"),
        # the default guard before "work-bound" (it turned a burst after a quiet period into FCFS)
        PolicySpec("sjf-fcfs-bound", "sjf-tokens", options={"promotion": "fcfs-bound"}),
        PolicySpec("sjf-plong", "sjf"),
        PolicySpec("sjf-paper", "sjf", tau="3x", options={"promotion": "strict"}),
        PolicySpec("fair", "fair"),
        PolicySpec("oracle", "sjf-tokens", tau="off", predictor="oracle"),
        # the oracle's true lengths behind the default starvation guard: what the guard costs SJF
        PolicySpec("oracle-guarded", "sjf-tokens", predictor="oracle"),
    )
}

DEFAULT_POLICIES = ("fcfs", "litellm-priority", "sjf", "sjf-no-tau", "sjf-plong", "sjf-paper", "fair", "oracle")


def available_policies() -> set[str]:
    """Policy names the installed ``sjf_core`` knows."""
    from sjf_core.policy._policies import POLICIES

    return set(POLICIES)


def resolve(names) -> list[PolicySpec]:
    """Specs for a list (or comma-separated string) of labels; unknown plugin policies are dropped
    with a note on stderr (e.g. ``fair`` before it exists). ``fcfs`` is always first.

    Raises:
        ValueError: an unknown label.
    """
    import sys

    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    known = available_policies()
    out = []
    for n in names:
        if n not in BUILTIN:
            raise ValueError(f"unknown bench policy {n!r}; choose from {', '.join(BUILTIN)}")
        spec = BUILTIN[n]
        if spec.policy is not None and spec.policy not in known:
            print(f"sjf bench: policy {spec.policy!r} is not available in this install; skipping {n}", file=sys.stderr)
            continue
        out.append(spec)
    if not any(s.label == "fcfs" for s in out):
        out.insert(0, BUILTIN["fcfs"])
    out.sort(key=lambda s: s.label != "fcfs")
    return out
