"""``oracle`` is the benchmarks' yardstick, never a live setting (the README trial's item 1).

A live proxy has no true answer lengths: ``SJF_POLICY=oracle`` used to start and order by the
prediction with the starvation guard off, silently. Now the config boundary refuses it with
one line naming ``SJF_POLICY`` (a real LiteLLM proxy subprocess), while the benchmark's oracle
contender, which the proxy runs as ``sjf-tokens`` with τ off fed by the true lengths through
``SJF_SCHEDULER_FACTORY`` (sjf_lab.bench.proxy.plugin_env), still starts and orders a held
queue by the true lengths (the emulator's own record of what it served).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from sjf_lab.bench.oracle import ENV_TRACE
from sjf_lab.bench.policies import BUILTIN
from sjf_lab.bench.proxy import plugin_env
from sjf_lab.emulator import EmulatorThread, prompt_hash, short_hash
from sjf_lab.proxy_runner import LiteLLMProxy, ProxyStartError, proxy_config
from waits import wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

HOLD = "Hold the backend for the oracle test, please."
# arrival order B, C, A; the shipped model ranks A (an essay) last; the true lengths rank it first
ARRIVALS = [("What is 2 + 2?", 300), ("Name a colour.", 150), ("Write a 3000-word essay about the fall of Rome.", 10)]
TRACE = [{"prompt": HOLD, "answer_tokens": 5, "fault": "hold"}] + [
    {"prompt": p, "answer_tokens": n} for p, n in ARRIVALS]


def test_sjf_policy_oracle_stops_the_proxy_with_one_line_naming_it():
    proxy = LiteLLMProxy(proxy_config({"emu": "http://127.0.0.1:9/v1"}, plugin=True),
                         env={"SJF_POLICY": "oracle"}, startup_timeout_s=300)
    with pytest.raises(ProxyStartError) as info:
        proxy.start()
    log = str(info.value).splitlines() + proxy.log_lines()
    fatal = [line for line in log if line.startswith("litellm_sjf: FATAL")]
    assert fatal, "\n".join(log[-40:])
    line = fatal[0]
    assert "SJF_POLICY" in line and "true answer length" in line and "benchmarks" in line, line
    assert line.endswith("choose one of ['fair', 'fcfs', 'sjf', 'sjf-tokens']"), line


async def test_the_benchmarks_oracle_contender_still_orders_by_true_length_through_the_real_proxy(tmp_path):
    trace = tmp_path / "oracle_trace.jsonl"  # what sjf_lab.bench.paths.write_hashed_trace writes: hashes only
    trace.write_text("".join(json.dumps({"sha256": prompt_hash(p), "answer_tokens": n}) + "\n" for p, n in ARRIVALS))
    emu = EmulatorThread(tokens_per_s=2000, slots=1, trace_records=TRACE)
    proxy = None
    try:
        env = {**plugin_env(BUILTIN["oracle"]), ENV_TRACE: str(trace)}
        assert env["SJF_POLICY"] == "sjf-tokens" and env["SJF_SCHEDULER_FACTORY"]
        proxy = LiteLLMProxy(proxy_config({"emu": emu.base_url}, plugin=True), env=env)
        await proxy.astart()
        auth = {"Authorization": f"Bearer {proxy.master_key}"}

        async def chat(prompt: str) -> int:
            async with httpx.AsyncClient(timeout=120) as c:
                r = await c.post(proxy.openai_base_url + "/chat/completions", headers=auth,
                                 json={"model": "emu", "messages": [{"role": "user", "content": prompt}]})
                assert r.status_code == 200, r.text
                return r.json()["usage"]["completion_tokens"]

        def waiting() -> int:
            doc = httpx.get(proxy.base_url + "/sjf/status", headers=auth, timeout=10).json()
            return sum(b["waiting"] for b in doc["backends"].values())

        tasks = [asyncio.create_task(chat(HOLD))]
        await wait_until(lambda: emu.stats()["held"] == 1, timeout=120)
        for prompt, _ in ARRIVALS:  # one at a time: arrival order B, C, A
            tasks.append(asyncio.create_task(chat(prompt)))
            n = len(tasks) - 1
            await wait_until(lambda: waiting() == n, timeout=60, step=0.1)
        emu.release_holds()
        assert await asyncio.gather(*tasks) == [5, 300, 150, 10]
        served = [o["hash"] for o in emu.stats()["order"] if not o["probe"]]
        assert served == [short_hash(HOLD)] + [short_hash(p) for p, _ in sorted(ARRIVALS, key=lambda a: a[1])]
    finally:
        if proxy is not None:
            await proxy.astop()
        emu.stop()
