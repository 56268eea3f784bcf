"""The box benchmark's columns and proxy config (sjf_lab.bench.box_metrics / box_run / box_workload)."""

from __future__ import annotations

import math

import pytest

from sjf_lab.bench.box_metrics import busy_share, pooled, rep_metrics
from sjf_lab.bench.box_run import box_proxy_config
from sjf_lab.bench.box_workload import BoxScenario, ModelJob, no_fit_burst, side_by_side, speeds_apart
from sjf_lab.bench.stats import RequestRecord
from sjf_lab.bench.workload import Job, Row
from sjf_lab.box import BoxConfig, ModelSpec


def _scenario(jobs) -> BoxScenario:
    box = BoxConfig(models=(ModelSpec("chat", tokens_per_s=100), ModelSpec("auto", tokens_per_s=1000)), max_loaded=2)
    return BoxScenario("t", box, [ModelJob(Job(i, f"p{i}", tok), m) for i, (m, tok) in enumerate(jobs)])


def _rec(idx, e2e, ok=True):
    return RequestRecord(idx=idx, policy="x", true_tokens=1, submit=10.0, end=10.0 + e2e if ok else math.nan, ok=ok)


def _stats(loads=0, mif=(1, 1)):
    return {"box": {"loads": loads, "max_loaded": 2, "models": {
        "chat": {"max_in_flight": mif[0], "tokens_per_s": 100.0}, "auto": {"max_in_flight": mif[1], "tokens_per_s": 1000.0}}},
        "order": []}


def test_columns_per_model_short_and_quick():
    sc = _scenario([("chat", 300), ("chat", 1000), ("chat", 400), ("auto", 16), ("auto", 150), ("chat", 1200)])
    recs = [_rec(0, 3.0), _rec(1, 9.0), _rec(2, 4.0), _rec(3, 0.2), _rec(4, 0.5), _rec(5, 20.0, ok=False)]
    m = rep_metrics(sc, recs, _stats(loads=2, mif=(4, 1)))
    assert m["lost"] == 1 and m["loads"] == 2 and m["max_in_flight"] == {"chat": 4, "auto": 1}
    assert m["auto"]["p50_s"] == pytest.approx(0.35) and m["chat"]["n"] == 4
    # chat short: the chat answers below the chat median (300, 400 < 700)
    assert m["chat"]["short_p50_s"] == pytest.approx(3.5)
    # Short class (< 200 tokens): the two autocompletes
    assert m["short_p50_s"] == pytest.approx(0.35)
    # quick: service below the median service (0.016, 0.15 s auto; 3, 4 s chat < median 3.5 s → 0.016, 0.15, 3.0)
    assert m["quick_p50_s"] == pytest.approx(0.5)
    assert m["makespan_s"] == pytest.approx(9.0) and m["mean_s"] == pytest.approx((3 + 9 + 4 + 0.2 + 0.5) / 5)


def test_pooled_sums_lost_and_averages_loads():
    sc = _scenario([("chat", 300), ("auto", 16)])
    reps = [([_rec(0, 3.0), _rec(1, 0.2)], _stats(loads=1), 0.0), ([_rec(0, 5.0), _rec(1, 0.4, ok=False)],
                                                                  _stats(loads=3, mif=(2, 1)), 0.0)]
    p = pooled(sc, reps)
    assert p["loads"] == 2 and p["loads_per_rep"] == [1, 3] and p["lost"] == 1 and p["reps"] == 2
    assert p["max_in_flight"] == {"chat": 2, "auto": 1} and p["chat"]["p50_s"] == pytest.approx(4.0)


def test_busy_share_merges_a_models_slot_intervals():
    order = [{"model": "chat", "t_start": 1.0, "t_out": 3.0}, {"model": "chat", "t_start": 2.0, "t_out": 4.0},
             {"model": "auto", "t_start": 0.0, "t_out": 10.0}, {"model": "chat", "t_start": 6.0, "t_out": 7.0,
                                                               "probe": True}]
    assert busy_share(order, "chat", 0.0, 10.0) == pytest.approx(0.3)


@pytest.mark.parametrize("provider, base", [("openai", "/v1"), ("ollama_chat", "")])
def test_the_proxy_names_every_model_on_the_boxs_one_url(provider, base):
    cfg = box_proxy_config(["chat", "auto"], 4321, provider, plugin=True)
    assert [(d["model_name"], d["litellm_params"]["model"], d["litellm_params"]["api_base"]) for d in cfg["model_list"]] \
        == [("chat", f"{provider}/chat", f"http://127.0.0.1:4321{base}"),
            ("auto", f"{provider}/auto", f"http://127.0.0.1:4321{base}")]
    assert cfg["litellm_settings"]["callbacks"] == ["litellm_sjf.proxy_handler_instance"]
    with pytest.raises(ValueError, match="provider"):
        box_proxy_config(["chat"], 1, "vllm", plugin=False)


def _rows(n=200):
    rows = [Row(f"short question {i}?", 40 + i % 100) for i in range(n)]
    rows += [Row(f"write a long essay {i}", 300 + 9 * (i % 100)) for i in range(n)]
    rows += [Row(f"a very long report {i}", 900 + i % 500) for i in range(n)]
    return rows


def test_scenarios_interleave_models_and_keep_prompts_unique():
    b = no_fit_burst(_rows(), n=10)
    assert [mj.model for mj in b.jobs[:4]] == ["model-a", "model-b", "model-a", "model-b"]
    assert len({mj.job.prompt for mj in b.jobs}) == 20 and b.box.max_loaded == 1
    a = side_by_side(_rows(), duration_s=60)
    chats = [mj for mj in a.jobs if mj.model == "chat"]
    autos = [mj for mj in a.jobs if mj.model == "auto"]
    assert all(300 <= mj.job.tokens <= 1200 for mj in chats) and all(mj.job.tokens == 16 for mj in autos)
    assert 30 <= len(autos) <= 60 and [mj.job.arrival for mj in a.jobs] == sorted(mj.job.arrival for mj in a.jobs)
    d = speeds_apart(_rows(), n=10)
    assert {m.name: m.tokens_per_s for m in d.box.models} == {"fast": 1000.0, "slow": 100.0}
