"""sjf demo: prompt selection, statistics and the table (the full demo runs via `make demo`)."""

from __future__ import annotations

import json
import math

import pytest

from sjf_lab.commands.demo import DemoPrompt, RunStats, Result, default_prompts, percentile, pick_from_data, render


def test_shipped_prompts_mix_short_and_long():
    ps = default_prompts()
    kinds = [p.klass for p in ps]
    assert kinds.count("short") >= 20 and kinds.count("long") >= 12
    assert len({p.text for p in ps}) == len(ps)


def test_pick_from_data(tmp_path):
    f = tmp_path / "d.jsonl"
    rows = [{"prompt": f"s{i}", "response_tokens": 10 + i} for i in range(30)]
    rows += [{"prompt": f"l{i}", "response_tokens": 900 + i} for i in range(30)]
    rows += [{"prompt": "m", "response_tokens": 400}, {"prompt": "", "response_tokens": 5}, {"prompt": "s0", "response_tokens": 3}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    a = pick_from_data(f, 5, 4, seed=1)
    assert [p.klass for p in a] == ["short"] * 5 + ["long"] * 4
    assert a == pick_from_data(f, 5, 4, seed=1) and a != pick_from_data(f, 5, 4, seed=2)
    with pytest.raises(ValueError, match="only 30 Short"):
        pick_from_data(f, 31, 4)
    from sjf_lab.train_data import prompt_key, split_of

    held = pick_from_data(f, 2, 2, split="test")
    assert all(split_of(prompt_key(p.text)) == "test" for p in held)


def test_percentile_and_render():
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5], 95) == 5 and math.isnan(percentile([], 50))
    fcfs = RunStats("FCFS", [Result("short", 10, 10.0, 9.0), Result("short", 10, 20.0, 19.0), Result("long", 900, 30.0, 1.0)])
    sjf = RunStats("SJF", [Result("short", 10, 2.0, 1.0), Result("short", 10, 4.0, 3.0), Result("long", 900, 33.0, 2.0),
                           Result("long", 900, error="APIError")])
    out = render([fcfs, sjf], stream=True)
    assert "short-P50 reduction (1 - P50_SJF/P50_FCFS): +80%" in out
    assert "long-P95 inflation  (P95_SJF/P95_FCFS - 1): +10%" in out
    assert "SJF: 1 request(s) failed" in out
    assert DemoPrompt("x", 800).klass == "long" and DemoPrompt("x", 199).klass == "short"
