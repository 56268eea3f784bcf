"""Issue 20: faults under load, in the repo (the reduced form of ``sjf bench --scenario faults``).

One round of 120 concurrent requests through a real LiteLLM proxy in Redis mode (a real
redis-server) to the emulator in its own process: clients that leave mid-answer (timed
after their request got the backend's slot), probes that get 503 once the orphan is over,
the backend killed (SIGKILL) and restarted, Redis killed and restarted, a predictor that
raises and one whose prediction raises when read, and the fault mix of benchmarks/soak.py
(500, 503, dropped connections, streams dropped mid-answer or after their first chunk,
clients that leave while queued). Every figure comes from the clients and the emulator's
own count (sjf_lab/bench/faults.py)."""

from __future__ import annotations

import pytest

from sjf_lab.bench.faults import FaultOptions, line, run_faults

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def test_a_round_of_load_and_faults_keeps_every_guarantee():
    result = run_faults(FaultOptions(requests=120, rounds=1, tokens_per_s=8000.0, mid_frac=0.1, seed=3,
                                     deadline_s=240.0))
    f = result["rounds"][0]
    print(line(f))
    assert f["lost"] == 0 and f["hung"] == 0 and f["wrong_length"] == 0, f
    assert f["max_user_in_flight"] == 1, f  # the emulator's own count, over both of its lives
    assert sum(f["slots_leaked"].values()) == 0, f
    # the faults were exercised
    assert f["mid_answer_disconnects"] >= 8, f
    assert f["probes"]["error"] >= 1 and f["probes"]["estimate"] >= 1 and f["emulator_probe_faults"] >= 1, f
    assert set(f["restarts"]) == {"backend", "redis"}, f
    assert f["gated_by_kind"]["memory"] + f["gated_by_kind"]["predictor"] >= 1, f
    assert f["counters"]["unscored"] >= 1, f  # the predictor that raises: FCFS order for those
