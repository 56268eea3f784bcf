"""The discrete-event loop: k slots, a pending queue from a Policy, a virtual clock.

Events are arrivals and completions. At each event time all events of that instant
are applied (completions first, then arrivals, so a burst is queued as a whole),
then free slots are filled from ``pending.pop(now)`` — exactly the calls the live
:class:`~sjf_core.admission._local.AdmissionQueue` makes, with the virtual ``now``.
Completions feed ``pending.observe`` with the true class and tokens, so τ
("3x" × measured mean Short service time) and the DRR quanta adapt as live.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from sjf_core.admission._overload import OverloadConfig, OverloadControl
from sjf_core.policy._policies import Policy, RequestMeta
from sjf_core.predict._prediction import Prediction
from sjf_lab.sim.workload import Workload


@dataclass
class SimResult:
    """Outcome of one simulation.

    Attributes:
        wait: queue wait per job (dispatch − arrival, seconds; NaN if rejected), float64 [n].
        sojourn: wait + service (seconds; NaN if rejected), float64 [n].
        klass: true class per job, int64 [n].
        rejected: bool [n], refused by overload control.
        promotions: τ promotions made by the pending queue.
        makespan: time of the last completion (seconds).
        max_waiting: largest number of waiting requests seen.
    """

    wait: np.ndarray
    sojourn: np.ndarray
    klass: np.ndarray
    rejected: np.ndarray
    promotions: int = 0
    makespan: float = 0.0
    max_waiting: int = 0
    order: list = field(default_factory=list)

    def stat(self, what: str, klass: int | None, q: float) -> float:
        """Percentile ``q`` (0–100) of ``what`` ("wait" or "sojourn") for true class
        ``klass`` (None = all), over admitted jobs; NaN if none."""
        v = getattr(self, what)
        m = ~self.rejected if klass is None else (self.klass == klass) & ~self.rejected
        v = v[m]
        return float(np.percentile(v, q)) if len(v) else math.nan

    def max_wait(self, klass: int | None = None) -> float:
        """Largest queue wait (seconds) of class ``klass`` (None = all)."""
        m = ~self.rejected if klass is None else (self.klass == klass) & ~self.rejected
        return float(self.wait[m].max()) if m.any() else math.nan


def simulate(
    wl: Workload,
    predictions: list[Prediction | None],
    policy: Policy,
    slots: int = 1,
    metas: list[RequestMeta] | None = None,
    overload: OverloadConfig | None = None,
    record_order: bool = False,
    warmup: int = 0,
    idle_s: float = 600.0,
    warmup_speedup: float = 1.0,
    fairness=None,
    on_complete=None,
) -> SimResult:
    """Run one simulation of ``wl`` under ``policy`` with ``slots`` servers.

    Args:
        wl: the jobs (arrival order).
        predictions: one Prediction (or None = unscored) per job, or a callable
            ``predictions(i) -> Prediction | None`` called when job ``i`` arrives (an
            online predictor, e.g. one with the length memory learning as it goes).
        policy: the policy; a fresh pending structure is made with ``policy.new_pending()``.
        slots: parallel slots (M/G/k), >= 1.
        metas: optional request metadata per job (priority, deadline, max_tokens).
        overload: optional overload limits (requests refused at arrival).
        record_order: keep the dispatch order (job indices) in ``SimResult.order``.
        warmup: serve this many requests one at a time before the workload (each arriving
            when the previous one is done; the workload's own jobs, cyclically), then leave
            the queue idle ``idle_s`` seconds: the scheduler then starts "warm", as a proxy
            that has served a quiet morning does. Warm-up jobs are not in the result.
            With a callable ``predictions`` it is called for them too (index ``j``).
        idle_s: the quiet period between warm-up and workload, seconds.
        warmup_speedup: the backend is this many times faster during the warm-up (a
            backend whose speed changed, e.g. another model loaded).
        fairness: fair shares across tenants (a :class:`~sjf_core.settings._tenants.Fairness` or
            its spec, e.g. "user"; None / "off": none): the pending structure is then a
            :class:`~sjf_core.policy._fair_share.TenantPending` over ``policy.new_pending()``,
            each job's tenant taken from ``metas[i].tenant`` — the same structure the
            live queue uses.
        on_complete: optional ``on_complete(i)`` called when job ``i`` finishes (after
            ``pending.observe``), e.g. to feed the answer to an online predictor.

    Returns:
        :class:`SimResult`.
    """
    n = len(wl)
    arrival = wl.arrival
    service = wl.service
    klass = wl.klass
    tokens = wl.tokens
    from sjf_core.policy._fair_share import pending_of
    from sjf_core.settings import Fairness

    pending = pending_of(policy, Fairness.parse(fairness if fairness is not None else "off"))
    if hasattr(pending, "slots"):
        pending.slots = slots
    control = None
    if overload is not None and overload.enabled:
        control = OverloadControl(overload, pending.service, slots, length_aware=policy.name != "fcfs")
    start = np.full(n, math.nan)
    rejected = np.zeros(n, dtype=bool)
    done: list[tuple[float, int]] = []  # (finish time, job)
    entries = [None] * n
    order = []
    busy = 0
    i = 0
    max_waiting = 0
    now = 0.0
    push, pop, observe = pending.push, pending.pop, pending.observe
    make_entry = policy.make_entry
    predict = predictions if callable(predictions) else predictions.__getitem__
    inf = math.inf
    if warmup and n:
        t = float(arrival[0]) - idle_s - sum(float(service[j % n]) for j in range(warmup)) / warmup_speedup
        for w in range(warmup):
            j = w % n
            e = make_entry(n + w, t, predict(j), None if metas is None else metas[j])
            push(e)
            pop(t)
            s = float(service[j]) / warmup_speedup
            t += s
            observe(e, s, int(klass[j]), float(tokens[j]))
    while i < n or done:
        t_arr = arrival[i] if i < n else inf
        t_done = done[0][0] if done else inf
        now = t_done if t_done <= t_arr else t_arr
        while done and done[0][0] <= now:
            _, j = heapq.heappop(done)
            busy -= 1
            e = entries[j]
            if control is not None:
                control.finished(e)
            observe(e, float(service[j]), int(klass[j]), float(tokens[j]))
            if on_complete is not None:
                on_complete(j)
        while i < n and arrival[i] <= now:
            e = make_entry(i, float(arrival[i]), predict(i), None if metas is None else metas[i])
            e.payload = i
            entries[i] = e
            if control is not None:
                if control.check(e, len(pending), now) is not None:
                    rejected[i] = True
                    i += 1
                    continue
                control.enqueued(e)
            push(e)
            i += 1
        waiting = len(pending)
        if waiting > max_waiting:
            max_waiting = waiting
        while busy < slots and len(pending):
            e = pop(now)
            if e is None:
                break
            j = e.payload
            start[j] = now
            e.dispatched_at = now
            if control is not None:
                control.dispatched(e, now)
            busy += 1
            heapq.heappush(done, (now + float(service[j]), j))
            if record_order:
                order.append(j)
    wait = start - arrival
    return SimResult(wait=wait, sojourn=wait + service, klass=klass, rejected=rejected,
                     promotions=getattr(pending, "promotions", 0), makespan=now,
                     max_waiting=max_waiting, order=order)
