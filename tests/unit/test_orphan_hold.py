"""A failed idle probe never waits for the lease (sjf_core.admission._orphan_hold): the
orphan's slot is released at its estimated end, or earlier when a retried probe returns.

A fake probe gate stands in for the backend (no sockets; the integration side is
tests/integration/test_probe_fallback.py)."""

from __future__ import annotations

import math
import time

import pytest

from sjf_core.admission._orphan_hold import (DEFAULT_S_PER_TOKEN, DEFAULT_TOKENS, MAX_BACKOFF_S, hold_until_idle,
                                            orphan_deadline)
from sjf_core.policy._entry import Entry


class FakeGate:
    """Answers probes from a script: True (returned), False (failed)."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = []
        self.estimates = 0

    async def wait_idle(self, send, timeout_s, retry=False):
        self.calls.append((round(timeout_s, 3), retry))
        return self.answers.pop(0) if self.answers else False

    def count_estimate(self):
        self.estimates += 1


def sender(timeout_s):
    async def send():
        return None

    return send


async def test_a_probe_that_returns_releases_at_once():
    g = FakeGate([True])
    assert await hold_until_idle(g, sender, 600, lambda: pytest.fail("no estimate needed")) == "probe"
    assert g.calls == [(600, False)]


async def test_after_a_failed_probe_a_retry_that_returns_releases_before_the_estimate():
    g = FakeGate([False, False, True])
    t0 = time.monotonic()
    assert await hold_until_idle(g, sender, 600, lambda: time.monotonic() + 30) == "retry"
    assert time.monotonic() - t0 < 5 and [r for _, r in g.calls] == [False, True, True]
    assert g.calls[1][0] <= 30  # a retry never waits past the estimate
    assert g.estimates == 0


async def test_probes_that_keep_failing_release_at_the_estimate_with_backoff_and_renewals():
    g = FakeGate([])
    renewed = []
    t0 = time.monotonic()
    out = await hold_until_idle(g, sender, 600, lambda: t0 + 1.2, renew=lambda: renewed.append(1), renew_every_s=0.05)
    took = time.monotonic() - t0
    assert out == "estimate" and g.estimates == 1
    assert 1.1 <= took < 1.2 + MAX_BACKOFF_S + 2  # never long after the estimate (slack: a loaded machine)
    assert 2 <= len(g.calls) <= 5 and all(t <= 1.2 for t, _ in g.calls[1:])


async def test_an_estimate_already_over_releases_at_once():
    g = FakeGate([False])
    t0 = time.monotonic()
    assert await hold_until_idle(g, sender, 600, lambda: t0 - 1) == "estimate"
    assert len(g.calls) == 1 and time.monotonic() - t0 < 2


class T:
    def __init__(self, entry, queue=None):
        self.entry, self.queue = entry, queue


def _entry(tokens, dispatched, fallback=False):
    e = Entry(1, 0.0, expected_tokens=tokens, fallback=fallback)
    e.dispatched_at = dispatched
    return e


def test_the_estimate_is_the_expected_answer_capped_by_max_tokens_at_the_measured_speed():
    now = 100.0
    e = _entry(300.0, 99.0)
    assert orphan_deadline(T(e), None, 100.0, now) == pytest.approx(99.0 + 3.0)
    assert orphan_deadline(T(e), 50, 100.0, now) == now  # capped: 0.5 s from dispatch, already over
    assert orphan_deadline(T(e), 200, 100.0, now) == pytest.approx(101.0)
    unscored = _entry(0.0, 99.0, fallback=True)
    assert orphan_deadline(T(unscored), None, 200.0, now) == pytest.approx(99.0 + DEFAULT_TOKENS / 200.0)
    # speed never measured: the default seconds per token
    assert orphan_deadline(T(e), None, None, now) == pytest.approx(99.0 + 300.0 * DEFAULT_S_PER_TOKEN)
    # the queue's own measurement when the adapter has none
    from sjf_core.admission._local import LocalAdmissionQueue

    q = LocalAdmissionQueue(1, "sjf-tokens")
    q.pending.service.s_per_token = 0.01
    assert orphan_deadline(T(e, q), None, None, now) == pytest.approx(102.0)
    not_yet = _entry(300.0, math.nan)  # never dispatched: counted from now
    assert orphan_deadline(T(not_yet), None, 100.0, now) == pytest.approx(103.0)
    assert orphan_deadline(object(), None, None, now) > now  # never raises
