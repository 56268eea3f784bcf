"""The benchmark suite behind ``sjf bench`` (DESIGN.md "Benchmark protocol").

Modules: :mod:`.workload` (burst / Poisson / replay scenarios), :mod:`.stats`
(per-true-class percentiles and same-run ratios), :mod:`.client` (timed senders),
:mod:`.backend` (emulator with dispatch times, or a user's server), :mod:`.paths`
(LiteLLM proxy or openai_sjf wrapper), :mod:`.policies` (contenders),
:mod:`.runner`, :mod:`.report` (tables, JSON, plots), :mod:`.overhead`
(added latency of the plugin and wrapper), :mod:`.suite` (docs/benchmarks.md).
"""
