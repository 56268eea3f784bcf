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


# ---- help and behaviour agree (polish after issue 29) -------------------------------------------
def _demo_args(*argv):
    import argparse

    from sjf_lab.commands import demo

    p = argparse.ArgumentParser()
    demo.add_arguments(p)
    return p, p.parse_args(list(argv))


def test_the_help_says_what_the_burst_without_data_is_and_the_counts_apply_to_it():
    """Before: --help said "--n-short ... (default 20)" while the demo ran all 24 Short and 16 Long
    shipped prompts, and --n-short/--n-long without --data were ignored."""
    from sjf_lab.commands.demo import choose_prompts

    p, args = _demo_args()
    helps = " ".join(" ".join(a.help.split()) for a in p._actions if a.help)
    shipped = default_prompts()
    n_short, n_long = (sum(d.klass == k for d in shipped) for k in ("short", "long"))
    assert f"the {len(shipped)} shipped demo prompts ({n_short} Short, 0 Medium, {n_long} Long)" in helps
    assert f"default: all {n_short} of them" in helps and f"default: all {n_long} of them" in helps
    prompts, source = choose_prompts(args)
    assert [d.klass for d in prompts].count("short") == n_short and len(prompts) == len(shipped)
    prompts, source = choose_prompts(_demo_args("--n-short", "5", "--n-long", "3")[1])
    assert sorted(d.klass for d in prompts) == ["long"] * 3 + ["short"] * 5, source
    assert source == "the shipped demo prompts (5 Short + 3 Long, seed 0)"
    with pytest.raises(ValueError, match=f"only {n_short} Short"):
        choose_prompts(_demo_args("--n-short", str(n_short + 1))[1])


def test_a_small_demo_runs_the_asked_prompts_with_one_progress_bar_per_policy():
    """`sjf demo --n-short 2 --n-long 1` end to end (two real LiteLLM proxies, the emulator): 3
    prompts, and two progress bars, each counting its own run to 3 (before: the 40 shipped
    prompts, one bar counting to 80 relabelled from FCFS to SJF halfway)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "sjf_lab.cli", "demo", "--n-short", "2", "--n-long", "1",
                        "--tokens-per-s", "20000"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("sjf demo: 3 prompts from the shipped demo prompts (2 Short + 1 Long, seed 0): "
                               "2 Short, 0 Medium, 1 Long;"), r.stdout
    bars = [line.strip() for line in r.stderr.replace("\r", "\n").splitlines() if "req" in line]
    assert any(b.startswith("FCFS (no plugin): 100%") and "3/3" in b for b in bars), bars
    assert any(b.startswith("SJF (litellm_sjf): 100%") and "3/3" in b for b in bars), bars
    assert not any("/6 " in b or "/80 " in b for b in bars), bars
