"""The benchmark's own arithmetic: percentiles, per-true-class summaries, same-run ratios,
workload generators and the oracle predictor (no servers; fast)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sjf_lab.bench import stats as st
from sjf_lab.bench import workload as wl
from sjf_lab.bench.oracle import OraclePredictor
from sjf_lab.bench.stats import RequestRecord
from sjf_lab.emulator import prompt_hash


def rec(idx, tokens, submit, dispatch, first, end, policy="p", ok=True):
    return RequestRecord(idx=idx, policy=policy, true_tokens=tokens, submit=submit, dispatch=dispatch,
                         first_byte=first, end=end, ok=ok)


# ---- percentiles -----------------------------------------------------------------------------
def test_percentile_linear_interpolation():
    assert st.percentile([1, 2, 3, 4], 50) == 2.5
    assert st.percentile([10], 99) == 10
    assert st.percentile(range(101), 95) == 95
    assert st.percentile([0, 10], 95) == pytest.approx(9.5)


def test_percentile_ignores_nan_and_handles_empty():
    assert st.percentile([1, math.nan, 3], 50) == 2
    assert math.isnan(st.percentile([], 50))
    assert math.isnan(st.percentile([math.nan], 50))
    with pytest.raises(ValueError):
        st.percentile([1], 101)


# ---- records and summaries -------------------------------------------------------------------
def test_record_metrics_and_true_class():
    r = rec(0, 150, submit=10.0, dispatch=12.0, first=12.5, end=14.0)
    assert (r.wait, r.ttft, r.e2e) == (2.0, 2.5, 4.0)
    assert r.true_class == 0
    assert rec(0, 200, 0, 0, 0, 1).true_class == 1  # paper bounds: Short < 200
    assert rec(0, 800, 0, 0, 0, 1).true_class == 2  # Long >= 800
    assert rec(0, -1, 0, 0, 0, 1, ok=False).true_class == -1


def test_record_roundtrip_json_with_nan():
    r = rec(3, 900, 1.0, math.nan, 2.0, 3.0)
    d = r.to_dict()
    assert d["dispatch"] is None and d["true_class"] == 2
    back = RequestRecord.from_dict(json.loads(json.dumps(d)))
    assert math.isnan(back.dispatch) and back.e2e == 2.0 and back.idx == 3


def test_summary_is_per_true_class_not_predicted():
    recs = [rec(i, 50, 0.0, 0.0, 0.0, float(i + 1)) for i in range(4)]  # Short e2e 1..4
    recs += [rec(10 + i, 900, 0.0, 0.0, 0.0, 10.0 * (i + 1)) for i in range(2)]  # Long e2e 10, 20
    for r in recs:
        r.predicted_class = 2  # the predictor said Long for all: must not matter
    s = st.summarize(recs, "sjf")
    assert s.classes["short"].n == 4 and s.classes["long"].n == 2
    assert s.classes["short"].get("e2e", "p50") == 2.5
    assert s.classes["long"].get("e2e", "p50") == 15.0
    assert s.classes["all"].n == 6
    assert "medium" not in s.classes


def test_failed_requests_are_counted_not_timed():
    recs = [rec(0, 50, 0, 0, 0, 1.0), rec(1, 50, 0, math.nan, math.nan, math.nan, ok=False)]
    s = st.summarize(recs)
    assert s.failed == 1
    # the failed record has no class from usage (true_tokens 50 was given here), so it is counted
    # as a failure of that class and excluded from the latency
    assert s.classes["short"].failed == 1 and s.classes["short"].get("e2e", "p50") == 1.0


def test_throughput_over_span():
    recs = [rec(0, 100, 0.0, 0.0, 0.5, 1.0), rec(1, 300, 0.0, 1.0, 1.5, 4.0)]
    s = st.summarize(recs)
    assert s.makespan_s == 4.0
    assert s.throughput_rps == pytest.approx(0.5)
    assert s.throughput_tps == pytest.approx(100.0)


def test_unobservable_wait_is_nan_not_zero():
    recs = [rec(0, 50, 0.0, math.nan, 1.0, 2.0)]
    s = st.summarize(recs)
    assert math.isnan(s.classes["short"].get("wait", "p50"))
    assert s.classes["short"].get("ttft", "p50") == 1.0


# ---- same-run ratios ---------------------------------------------------------------------------
def _policy(short_e2e, long_e2e, label):
    recs = [rec(i, 50, 0.0, 0.0, 0.0, v, label) for i, v in enumerate(short_e2e)]
    recs += [rec(100 + i, 1000, 0.0, 0.0, 0.0, v, label) for i, v in enumerate(long_e2e)]
    return recs


def test_reduction_inflation_and_gap_to_oracle():
    fcfs = _policy([10, 10, 10], list(range(1, 21)), "fcfs")   # Long P95 = 19.05
    sjf = _policy([2, 2, 2], [x * 1.2 for x in range(1, 21)], "sjf")
    oracle = _policy([1, 1, 1], list(range(1, 21)), "oracle")
    sums = {k: st.summarize(v, k) for k, v in (("fcfs", fcfs), ("sjf", sjf), ("oracle", oracle))}
    assert st.short_p50_reduction(sums["sjf"], sums["fcfs"]) == pytest.approx(0.8)
    assert st.long_p95_inflation(sums["sjf"], sums["fcfs"]) == pytest.approx(0.2)
    assert st.gap_to_oracle(sums["sjf"], sums["oracle"]) == pytest.approx(1.0)
    comps = st.compare(sums, {"fcfs": fcfs, "sjf": sjf, "oracle": oracle})
    assert comps["fcfs"].short_p50_reduction["e2e"] == 0.0
    assert comps["sjf"].short_p50_reduction["e2e"] == pytest.approx(0.8)
    assert comps["oracle"].gap_to_oracle["e2e"] == 0.0
    lo, hi = comps["sjf"].short_p50_reduction_ci
    assert lo == pytest.approx(0.8) and hi == pytest.approx(0.8)  # no spread in the data, no spread in the CI


def test_ratios_undefined_without_the_class():
    a = st.summarize(_policy([1.0], [], "a"))
    b = st.summarize(_policy([2.0], [], "b"))
    assert math.isnan(st.long_p95_inflation(a, b))
    assert st.short_p50_reduction(a, b) == pytest.approx(0.5)
    with pytest.raises(KeyError):
        st.compare({"a": a})  # no FCFS baseline


def test_bootstrap_interval_brackets_the_point_estimate():
    rng = np.random.default_rng(1)
    fcfs = _policy(list(rng.uniform(8, 12, 40)), [], "fcfs")
    sjf = _policy(list(rng.uniform(1, 3, 40)), [], "sjf")
    point = st.short_p50_reduction(st.summarize(sjf), st.summarize(fcfs))
    lo, hi = st.bootstrap_reduction(sjf, fcfs)
    assert lo < point < hi
    assert 0.7 < lo and hi < 0.95


def test_scv():
    assert st.scv([1, 1, 1]) == 0.0
    assert st.scv([0, 2]) == pytest.approx(1.0)
    assert math.isnan(st.scv([3]))


def test_to_jsonable_replaces_nan():
    out = st.to_jsonable({"a": math.nan, "b": (1.0, math.inf), "c": np.float32(2.5)})
    assert out == {"a": None, "b": [1.0, None], "c": 2.5}
    json.dumps(out, allow_nan=False)


# ---- workloads -------------------------------------------------------------------------------
def _rows(n_short=30, n_medium=10, n_long=30):
    rows = [wl.Row(f"short question {i}?", 20 + i % 150) for i in range(n_short)]
    rows += [wl.Row(f"medium task {i}", 300 + i % 400) for i in range(n_medium)]
    rows += [wl.Row(f"write a long essay {i}", 900 + 10 * i) for i in range(n_long)]
    return rows


def test_load_rows_filters_and_dedupes(tmp_path):
    p = tmp_path / "d.jsonl"
    lines = [{"prompt": "a", "response_tokens": 5}, {"prompt": "a", "response_tokens": 6},
             {"prompt": "b" * 50, "response_tokens": 7}, {"prompt": "c", "answer_tokens": 900},
             {"prompt": "d"}, {"prompt": 3, "response_tokens": 1}, {"prompt": "e", "response_tokens": -1}]
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n\n")
    rows = wl.load_rows(p, max_prompt_chars=10)
    assert [(r.prompt, r.tokens) for r in rows] == [("a", 5), ("c", 900)]
    p2 = tmp_path / "empty.jsonl"
    p2.write_text("{}\n")
    with pytest.raises(ValueError):
        wl.load_rows(p2)


def test_burst_is_seeded_balanced_and_simultaneous():
    rows = _rows()
    a = wl.burst(rows, 5, 7, seed=3)
    b = wl.burst(rows, 5, 7, seed=3)
    assert [j.prompt for j in a] == [j.prompt for j in b]
    assert sum(j.klass == 0 for j in a) == 5 and sum(j.klass == 2 for j in a) == 7
    assert all(j.arrival == 0.0 for j in a) and [j.idx for j in a] == list(range(12))
    assert len({j.prompt for j in a}) == 12
    assert [j.prompt for j in wl.burst(rows, 5, 7, seed=4)] != [j.prompt for j in a]
    with pytest.raises(ValueError):
        wl.burst(rows, 31, 1)


def test_poisson_hits_the_offered_load():
    rows = _rows(400, 200, 200)
    svc = wl.ServiceModel(tokens_per_s=100.0, overhead_s=0.1)
    jobs = wl.poisson(rows, 600, 0.74, svc, mix=(0.5, 0.25, 0.25), seed=1)
    assert len(jobs) == 600 and jobs[0].arrival == 0.0
    arr = np.array([j.arrival for j in jobs])
    assert np.all(np.diff(arr) >= 0)
    es = svc.mean(jobs)
    lam = (len(jobs) - 1) / arr[-1]
    assert lam * es == pytest.approx(0.74, rel=0.12)  # a Poisson sample of 600 arrivals
    d = wl.describe(jobs, svc)
    assert d["classes"]["short"] + d["classes"]["medium"] + d["classes"]["long"] == 600
    assert abs(d["classes"]["short"] - 300) < 60


def test_replay_keeps_file_order_and_rejects_bad_ranges():
    rows = _rows()
    svc = wl.ServiceModel(1000.0)
    jobs = wl.replay(rows, 10, 0.8, svc, offset=5)
    assert [j.prompt for j in jobs] == [r.prompt for r in rows[5:15]]
    with pytest.raises(ValueError):
        wl.replay(rows, 100, 0.8, svc)
    with pytest.raises(ValueError):
        wl.at_utilisation(jobs, 0.0, svc)


def test_poisson_arrivals_rate():
    t = wl.poisson_arrivals(20001, 5.0, seed=0)
    assert t[-1] / 20000 == pytest.approx(0.2, rel=0.03)
    with pytest.raises(ValueError):
        wl.poisson_arrivals(3, 0.0)


# ---- oracle --------------------------------------------------------------------------------
def test_oracle_knows_true_lengths_from_prompts_or_hashes(tmp_path):
    o = OraclePredictor.from_records([{"prompt": "hi", "answer_tokens": 30}, {"prompt": "essay", "response_tokens": 1200}])
    assert o.predict("hi").label == "short" and o.predict("hi").expected_tokens == 30
    assert o.predict("essay").label == "long" and o.predict("essay").expected_tokens == 1200
    assert o.predict("unknown").expected_tokens == 400
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"sha256": prompt_hash("hi"), "answer_tokens": 30}) + "\n")
    assert OraclePredictor.from_trace(p).predict("hi").expected_tokens == 30
    assert list(o.score_many(["essay", "hi"])) == [1200, 30]


# ---- inferred service start on a serial server, and the burst ranking diagnostic ------------------
def test_infer_serial_dispatch_uses_previous_completion():
    from sjf_lab.bench.backend import infer_serial_dispatch

    recs = [rec(0, 50, 0.0, math.nan, 1.0, 2.0), rec(1, 50, 0.0, math.nan, 3.0, 5.0),
            rec(2, 900, 6.0, math.nan, 6.5, 9.0), rec(3, 50, 0.0, math.nan, math.nan, math.nan, ok=False)]
    infer_serial_dispatch(recs)
    assert recs[0].dispatch == 0.0      # first: started at submit
    assert recs[1].dispatch == 2.0      # waited for request 0 to end
    assert recs[2].dispatch == 6.0      # arrived after the server went idle
    assert math.isnan(recs[3].dispatch)  # failed: left alone
    assert [r.wait for r in recs[:3]] == [0.0, 2.0, 0.0]


def test_longs_before_median_short():
    from sjf_lab.bench.docs import longs_before_median_short

    # dispatch order: L S L S S  -> the median (2nd of 3) Short starts after 2 Longs
    recs = [rec(0, 900, 0, 0.0, 0, 1), rec(1, 50, 0, 1.0, 0, 2), rec(2, 900, 0, 2.0, 0, 3),
            rec(3, 50, 0, 3.0, 0, 4), rec(4, 50, 0, 4.0, 0, 5)]
    assert longs_before_median_short(recs) == 2
    assert math.isnan(longs_before_median_short([rec(0, 900, 0, 0.0, 0, 1)]))


def test_readme_summary_is_replaced_between_markers_only(tmp_path):
    from sjf_lab.bench.docs import README_END, README_START, update_readme_summary

    readme = tmp_path / "README.md"
    readme.write_text(f"# x\nbefore\n{README_START}\nold table\n{README_END}\nafter\n")
    assert update_readme_summary(readme, [["burst", "proxy", "emulator", "80.0%", "85.0%", "–", "+1.0%", "≥ 80%"]])
    text = readme.read_text()
    assert "old table" not in text and "| burst | proxy | emulator | 80.0% |" in text
    assert text.startswith("# x\nbefore\n") and text.endswith(f"{README_END}\nafter\n")
    (tmp_path / "plain.md").write_text("no markers\n")
    assert not update_readme_summary(tmp_path / "plain.md", [["a"] * 8])
    assert (tmp_path / "plain.md").read_text() == "no markers\n"
    assert not update_readme_summary(tmp_path / "missing.md", [["a"] * 8])
