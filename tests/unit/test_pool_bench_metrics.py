"""The pool bench's figures (sjf_lab.bench.pool): backend idle while a request waited, served
per backend and where a retried job was served, from hand-made emulator records."""

from __future__ import annotations

import math

import pytest

from sjf_lab.bench.pool import idle_while_waiting, pool_row, starts_by_job
from sjf_lab.bench.stats import RequestRecord
from sjf_lab.bench.workload import Job
from sjf_lab.emulator import short_hash

JOBS = [Job(0, "first prompt", 50), Job(1, "second prompt", 900), Job(2, "third prompt", 50)]


def rec(job: Job, t_start: float, t_out: float, outcome: str = "ok") -> dict:
    return {"hash": short_hash(job.prompt), "t_in": t_start, "t_start": t_start, "t_out": t_out, "outcome": outcome}


def records(ends) -> list[RequestRecord]:
    return [RequestRecord(idx=j.idx, policy="x", true_tokens=j.tokens, submit=0.0, end=e) for j, e in zip(JOBS, ends)]


def test_a_backend_idle_while_a_job_waits_for_the_other_is_counted():
    # backend 0 serves job 0 (0–1 s) then idles; backend 1 serves job 1 (0–5 s) then job 2 (5–6 s):
    # job 2 waited 0–5 s, backend 0 idled 1–5 s meanwhile
    orders = [[rec(JOBS[0], 0.0, 1.0)], [rec(JOBS[1], 0.0, 5.0), rec(JOBS[2], 5.0, 6.0)]]
    idle = idle_while_waiting(JOBS, records([1.0, 5.0, 6.0]), orders, t0=0.0)
    assert idle == pytest.approx([4.0, 0.0])


def test_a_work_conserving_schedule_has_no_idle_while_waiting():
    orders = [[rec(JOBS[0], 0.0, 1.0), rec(JOBS[2], 1.0, 2.0)], [rec(JOBS[1], 0.0, 5.0)]]
    assert idle_while_waiting(JOBS, records([1.0, 5.0, 2.0]), orders, t0=0.0) == pytest.approx([0.0, 0.0])


def test_a_killed_backend_is_not_idle_after_its_death_and_a_retry_counts_where_it_was_served():
    orders = [[rec(JOBS[0], 0.0, 1.0), rec(JOBS[2], 1.0, 1.5, "dropped")],
              [rec(JOBS[1], 0.0, 5.0), rec(JOBS[2], 5.0, 6.0)]]
    starts = starts_by_job(JOBS, orders)
    assert starts[2] == (1, 5.0)
    idle = idle_while_waiting(JOBS, records([1.0, 5.0, 6.0]), orders, t0=0.0, alive_until=[1.5, math.inf])
    assert idle == pytest.approx([0.0, 0.0])
    row = pool_row(JOBS, records([1.0, 5.0, 6.0]), [{"order": orders[0], "max_in_flight": 1},
                                                     {"order": orders[1], "max_in_flight": 1}], 0.0, "x",
                   alive_until=[1.5, math.inf])
    assert row["served"] == [1, 2] and row["max_in_flight"] == [1, 1] and row["failed"] == 0


def test_a_backends_own_handoff_counts_raw_but_not_as_idle_with_nothing_on_its_way():
    orders = [[rec(JOBS[0], 0.0, 1.0)], [rec(JOBS[1], 0.0, 5.0), rec(JOBS[2], 5.1, 6.0)]]
    recs = records([1.0, 5.0, 6.0])
    assert idle_while_waiting(JOBS, recs, orders, t0=0.0) == pytest.approx([4.1, 0.1])
    assert idle_while_waiting(JOBS, recs, orders, t0=0.0, handoffs=False) == pytest.approx([4.1, 0.0])
    row = pool_row(JOBS, recs, [{"order": o, "max_in_flight": 1} for o in orders], 0.0, "x")
    assert row["handoff_gap_max_s"] == pytest.approx(0.1)
