"""docs/litellm.md's "Try it" section works as written: its ``ollama_chat/`` config, read from the
page (only the emulator's port is the test's own), starts a real LiteLLM proxy with the plugin
in front of ``sjf emulate``'s Ollama API, and a chat through it gets the demo trace's answer
length (the emulator scored the prompt it got through ``/api/chat``)."""

from __future__ import annotations

import re
from pathlib import Path

import openai
import pytest
import yaml

from sjf_lab.commands.demo import default_prompts
from sjf_lab.emulator import EmulatorThread
from sjf_lab.proxy_runner import LiteLLMProxy

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
DOC = Path(__file__).resolve().parents[2] / "docs" / "litellm.md"


def _try_it_ollama_config() -> dict:
    section = DOC.read_text().split("## Try it", 1)[1].split("\n## ", 1)[0]
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.S)]
    configs = [b for b in blocks if isinstance(b, dict) and "model_list" in b]
    assert len(configs) == 1, "the Try it section shows one proxy config (the ollama_chat/ one)"
    assert "sjf emulate --port 8001" in section
    return configs[0]


async def test_the_try_it_ollama_chat_config_answers_through_the_emulators_ollama_api():
    cfg = _try_it_ollama_config()
    params = cfg["model_list"][0]["litellm_params"]
    assert params["model"].startswith("ollama_chat/") and params["api_base"] == "http://127.0.0.1:8001"
    assert cfg["litellm_settings"]["callbacks"] == ["litellm_sjf.proxy_handler_instance"]
    demo = default_prompts()[0]
    emu = EmulatorThread(tokens_per_s=5000, trace_records=[{"prompt": demo.text, "answer_tokens": demo.answer_tokens}])
    params["api_base"] = f"http://127.0.0.1:{emu.port}"  # the doc's port 8001 is the reader's; ours is free
    proxy = None
    try:
        proxy = LiteLLMProxy(cfg).start()
        async with openai.AsyncOpenAI(base_url=proxy.openai_base_url, api_key=proxy.master_key, max_retries=0,
                                      timeout=120) as client:
            r = await client.chat.completions.create(model=cfg["model_list"][0]["model_name"],
                                                     messages=[{"role": "user", "content": demo.text}])
        assert r.usage.completion_tokens == demo.answer_tokens
        assert [o["api"] for o in emu.stats()["order"] if not o["probe"]] == ["ollama-chat"]
    finally:
        if proxy is not None:
            proxy.stop()
        emu.stop()
