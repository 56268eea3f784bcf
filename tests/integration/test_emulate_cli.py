"""``sjf emulate`` says when its answer lengths are random (no ``--trace``), and ``--trace demo``
serves the shipped demo prompts with their recorded answer lengths. A real subprocess on a
free port, stopped by its PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from importlib import resources

import httpx
import pytest

from sjf_lab.commands.emulate import NO_TRACE_WARNING


def _start(*args: str) -> tuple[subprocess.Popen, str, str]:
    """Start ``sjf emulate --port 0 ARGS``; (process, its base URL, what it printed before listening)."""
    proc = subprocess.Popen([sys.executable, "-m", "sjf_lab.cli", "emulate", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("emulator listening on "):
            return proc, line.split()[3], "".join(lines)
    proc.wait(10)
    pytest.fail("sjf emulate did not start:\n" + "".join(lines))


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    proc.wait(30)


def test_without_a_trace_it_warns_that_lengths_are_random():
    proc, _, out = _start()
    try:
        assert NO_TRACE_WARNING in out and "WARNING" in out
    finally:
        _stop(proc)


def test_trace_demo_serves_the_demo_prompts_answer_lengths():
    rec = json.loads(resources.files("sjf_lab").joinpath("data/demo_prompts.jsonl").read_text().splitlines()[0])
    proc, url, out = _start("--trace", "demo", "--tokens-per-s", "5000")
    try:
        assert NO_TRACE_WARNING not in out and "trace=40 prompts" in out
        r = httpx.post(url + "/chat/completions", timeout=30,
                       json={"model": "emulator", "messages": [{"role": "user", "content": rec["prompt"]}]})
        assert r.json()["usage"]["completion_tokens"] == rec["answer_tokens"]
    finally:
        _stop(proc)


def test_help_and_start_up_line_say_it_speaks_ollamas_api_too():
    """A user pointing LiteLLM's ollama_chat/ at it learns from --help and the start-up line that
    it can (before: "OpenAI-compatible" alone), and the URL said answers Ollama's /api/tags."""
    help_text = subprocess.run([sys.executable, "-m", "sjf_lab.cli", "emulate", "--help"], capture_output=True,
                               text=True, check=True).stdout
    flat = " ".join(help_text.split())
    assert "Ollama" in flat and all(e in flat for e in ("/api/chat", "/api/generate", "/api/tags", "ollama_chat/"))
    proc, url, out = _start("--trace", "demo")
    try:
        line = next(x for x in out.splitlines() if x.startswith("emulator listening on "))
        assert "Ollama API: /api/chat, /api/generate, /api/tags" in line, line
        ollama = line.split(" and ", 1)[1].split()[0]
        assert url == ollama + "/v1"
        assert httpx.get(ollama + "/api/tags", timeout=30).json()["models"]
    finally:
        _stop(proc)
