"""A LiteLLM proxy subprocess for one bench contender (via :mod:`sjf_lab.proxy_runner`).

Plugin contenders load ``litellm_sjf`` and get their policy through the plugin's
``SJF_*`` environment settings; ``oracle`` gets a predictor that reads the hashed
trace named by ``$SJF_BENCH_ORACLE_TRACE`` (:func:`sjf_lab.bench.oracle.from_env`).
No-plugin contenders (``fcfs``, ``litellm-priority``) get a plain proxy.
"""

from __future__ import annotations

from dataclasses import dataclass

from sjf_lab.proxy_runner import LiteLLMProxy, proxy_config
from sjf_lab.bench.policies import PolicySpec

MODEL_GROUP = "bench"

#: The plugin's scheduler factory for the oracle contender (reads ``$SJF_BENCH_ORACLE_TRACE``).
ORACLE_SCHEDULER_FACTORY = "sjf_lab.bench.oracle:oracle_scheduler"


def plugin_env(spec: PolicySpec) -> dict[str, str]:
    """``SJF_*`` environment settings that give the plugin ``spec``'s policy."""
    if not spec.plugin:
        return {}
    env = {"SJF_POLICY": str(spec.policy), "SJF_SLOTS": "1"}
    if spec.tau is not None:
        env["SJF_TAU"] = str(spec.tau)
    if "promotion" in spec.options:
        env["SJF_PROMOTION"] = str(spec.options["promotion"])
    for opt, var in (("k", "SJF_K"), ("slowdown", "SJF_SLOWDOWN"), ("work_slack", "SJF_WORK_SLACK"),
                     ("max_wait_s", "SJF_MAX_WAIT_S")):
        if opt in spec.options:
            env[var] = str(spec.options[opt])
    if spec.predictor == "oracle":
        env["SJF_SCHEDULER_FACTORY"] = ORACLE_SCHEDULER_FACTORY
    return env


@dataclass
class RunningProxy:
    proxy: LiteLLMProxy
    model: str = MODEL_GROUP

    @property
    def base_url(self) -> str:
        return self.proxy.openai_base_url

    @property
    def api_key(self) -> str:
        return self.proxy.master_key

    async def stop(self) -> None:
        await self.proxy.astop()


async def start_proxy(backend, spec: PolicySpec, workdir: str, env: dict | None = None,
                      timeout_s: float = 180.0) -> RunningProxy:
    """Start a proxy in front of ``backend`` configured for ``spec``; returns when healthy.

    Raises:
        sjf_lab.proxy_runner.ProxyStartError: the proxy did not start.
    """
    cfg = proxy_config({MODEL_GROUP: [backend.base_url]}, plugin=spec.plugin,
                       api_key=getattr(backend, "api_key", None) or "none",
                       litellm_settings={"request_timeout": 900})
    # the backend's model name, when it checks it (llama.cpp ignores it, Ollama does not)
    model = getattr(backend, "model", None)
    if model and model not in ("emulator", "default"):
        for d in cfg["model_list"]:
            d["litellm_params"]["model"] = f"openai/{model}"
    e = plugin_env(spec)
    e.update(env or {})
    proxy = LiteLLMProxy(cfg, env=e, startup_timeout_s=timeout_s)
    await proxy.astart()
    return RunningProxy(proxy)
