"""A serial backend that can pause a running answer: the discrete-event loop of the
preemption study (issue 30; docs/preemption.md).

One slot. The waiting requests are held by the live policy's pending structure
(``policy.new_pending()`` via :func:`~sjf_core.policy._fair_share.pending_of`, the calls the
live queue makes: ``push``, ``pop(now)``, ``observe``); a :class:`~sjf_lab.sim.pause.PauseRule`
decides when the running answer is paused for a waiter and when a paused answer resumes.

Costs (:class:`Costs`, measured on the real backend, benchmarks/preempt_primitives.py): a
request first reads its prompt (``prompt_tokens / prefill_tps`` + ``overhead_s``), then
streams its answer at ``decode_tps``; a pause keeps the backend busy ``stop_s`` more (the
stream stops at its next token); a resume reads the prompt **and the partial answer** again
(``(prompt_tokens + age) / prefill_tps + overhead_s``) before the answer streams on.

Decisions are taken at arrivals, at completions, at the end of a stop, and every
``check_tokens`` answer tokens of the running answer (the live plugin would check at chunk
boundaries).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sjf_core.policy._fair_share import pending_of
from sjf_core.policy._policies import Policy, RequestMeta
from sjf_core.settings import Fairness
from sjf_lab.sim.pause import LengthBelief, PauseRule


@dataclass(frozen=True)
class Costs:
    """Backend speeds and the costs of a pause (seconds, tokens/s).

    ``segment_tokens`` (None: off) models segmented generation: an answer that may be paused
    is generated in segments of that many tokens that each end normally (the server's prompt
    cache saves its state, ``segment_overhead_s`` per boundary); it can be paused only at a
    boundary, with nothing to stop (``stop_s`` is then unused), and a resume is a cache hit
    (``resume_overhead_s`` + tokens / ``resume_tps``)."""

    decode_tps: float
    prefill_tps: float
    stop_s: float = 0.0
    overhead_s: float = 0.0
    resume_overhead_s: float | None = None  # None: overhead_s
    resume_tps: float | None = None  # None: prefill_tps (the prompt and partial answer are read again)
    segment_tokens: float | None = None
    segment_overhead_s: float = 0.0
    segment_overhead_per_token_s: float = 0.0  # a boundary's state save grows with the context
    free_resume: bool = False  # the ideal: a resume reads nothing again

    def first_s(self, prompt_tokens: float) -> float:
        return prompt_tokens / self.prefill_tps + self.overhead_s

    def resume_s(self, prompt_tokens: float, age: float) -> float:
        if self.free_resume:
            return 0.0
        over = self.overhead_s if self.resume_overhead_s is None else self.resume_overhead_s
        return (prompt_tokens + age) / (self.resume_tps or self.prefill_tps) + over

    def token_s(self, prompt_tokens: float = 0.0, answer_tokens: float = 0.0) -> float:
        """Seconds per answer token of an answer of ``answer_tokens`` after a prompt of
        ``prompt_tokens``, its segment boundaries spread over its tokens (each boundary costs
        ``segment_overhead_s`` + ``segment_overhead_per_token_s`` × the context there)."""
        base = 1.0 / self.decode_tps
        k = self.segment_tokens
        if not k or answer_tokens <= 0:
            return base + (self.segment_overhead_s / k if k else 0.0)
        b = int(answer_tokens // k)  # boundaries at k, 2k, ..., b·k
        over = b * self.segment_overhead_s + self.segment_overhead_per_token_s * (b * prompt_tokens + k * b * (b + 1) / 2)
        return base + over / answer_tokens

    @property
    def pause_stop_s(self) -> float:
        return 0.0 if self.segment_tokens else self.stop_s

    def service_s(self, prompt_tokens: float, answer_tokens: float) -> float:
        """Service time of an answer that is never paused."""
        return self.first_s(prompt_tokens) + answer_tokens * self.token_s(prompt_tokens, answer_tokens)


@dataclass
class Job:
    i: int
    arrival: float
    prompt: float
    tokens: float
    belief: LengthBelief
    klass: int = 0
    token_s: float = 0.0  # seconds per answer token on this backend (segment boundaries spread)
    score0: float = math.nan  # the rule's score of the waiting request (age 0)
    entry: object = None
    age: float = 0.0  # answer tokens streamed so far
    pauses: int = 0
    paused_s: float = 0.0
    paused_at: float = math.nan
    busy_s: float = 0.0
    done: float = math.nan


@dataclass
class PreemptResult:
    """Per job: ``sojourn`` (arrival → last token, s), ``tokens`` (true answer tokens),
    ``klass`` (true class), ``pauses`` (times paused); totals: ``pauses_total``, ``wasted_s``
    (seconds of stops and re-reads), ``makespan``."""

    sojourn: np.ndarray
    tokens: np.ndarray
    klass: np.ndarray
    pauses: np.ndarray
    wasted_s: float = 0.0
    makespan: float = 0.0
    max_paused_s: float = 0.0


class _Loop:
    """State of one run (one slot); see :func:`simulate_preempt`."""

    def __init__(self, jobs, policy: Policy, rule: PauseRule, costs: Costs, check_tokens: float, metas):
        self.jobs, self.rule, self.costs, self.check = jobs, rule, costs, float(check_tokens)
        self.pending = pending_of(policy, Fairness.parse("off"))
        self.policy, self.metas = policy, metas
        self.paused: list[Job] = []
        self.run: Job | None = None
        self.seg_start = self.seg_setup = 0.0  # running segment: start time, seconds before tokens flow
        self.seg_age0 = 0.0
        self.busy_until = 0.0  # end of a stop
        self.wasted = 0.0
        self._best = None  # cached (score, job) of the best waiter; None: recompute

    # ---- scores ---------------------------------------------------------------------
    def score(self, j: Job, age: float) -> float:
        return self.rule.score(j.belief, age, j.tokens)

    def best_waiting(self):
        if self._best is None:
            best = None
            for e in self.pending.live_entries():
                j = self.jobs[e.payload]
                s = j.score0
                if s != s:  # NaN: not scored yet
                    s = j.score0 = self.score(j, 0.0)
                if best is None or s < best[0]:
                    best = (s, j)
            self._best = best or (math.inf, None)
        return self._best

    def resume_cost_tokens(self, j: Job, age: float) -> float:
        return (self.costs.resume_s(j.prompt, age) + self.costs.pause_stop_s) / j.token_s

    # ---- the running answer ---------------------------------------------------------
    def age_at(self, now: float) -> float:
        j = self.run
        return min(j.tokens, self.seg_age0 + max(0.0, now - self.seg_start - self.seg_setup) / j.token_s)

    def end_time(self) -> float:
        j = self.run
        return self.seg_start + self.seg_setup + (j.tokens - self.seg_age0) * j.token_s

    def next_check(self, now: float) -> float:
        """Time of the next decision tick of the running answer (inf when nothing waits)."""
        if self.run is None or not self.rule.enabled or not len(self.pending):
            return math.inf
        a = self.age_at(now)
        nxt = (math.floor(a / self.check) + 1) * self.check
        ts = self.run.token_s
        t = self.seg_start + self.seg_setup + (nxt - self.seg_age0) * ts
        if t <= now:  # float edge at a tick: the next one
            t = self.seg_start + self.seg_setup + (nxt + self.check - self.seg_age0) * ts
        return t if t < self.end_time() else math.inf

    def start(self, j: Job, now: float, resume: bool) -> None:
        setup = self.costs.resume_s(j.prompt, j.age) if resume else self.costs.first_s(j.prompt)
        if resume:
            self.wasted += setup
            j.paused_s += now - j.paused_at
        self.run, self.seg_start, self.seg_setup, self.seg_age0 = j, now, setup, j.age

    def maybe_pause(self, now: float) -> bool:
        j, g = self.run, self.rule.guard
        if j is None or not self.rule.enabled or not len(self.pending) or j.pauses >= g.max_pauses:
            return False
        age = self.age_at(now)
        if age - self.seg_age0 < g.min_run_tokens or not self.rule.may_pause(j.belief, age):
            return False
        k = self.costs.segment_tokens
        if k and abs(age - round(age / k) * k) > 1e-6 * k:
            return False  # segmented: only at a segment boundary
        ws, _ = self.best_waiting()
        if not self.rule.beats(ws, self.score(j, age), self.resume_cost_tokens(j, age)):
            return False
        stop = self.costs.pause_stop_s
        j.age, j.pauses, j.paused_at = (round(age) if self.costs.segment_tokens else math.floor(age)), j.pauses + 1, now
        j.busy_s += now - self.seg_start + stop
        self.paused.append(j)
        self.run = None
        self.busy_until = now + stop
        self.wasted += stop
        return True

    # ---- a free slot ----------------------------------------------------------------
    def pick_paused(self, now: float) -> Job | None:
        """The paused answer to resume now, or None (a waiter goes first)."""
        if not self.paused:
            return None
        g = self.rule.guard
        due = [p for p in self.paused if p.paused_s + (now - p.paused_at) >= g.max_paused_s]
        if due:
            return min(due, key=lambda p: p.paused_at)
        p = min(self.paused, key=lambda p: self.score(p, p.age))
        if not len(self.pending):
            return p
        ws, _ = self.best_waiting()
        return None if self.rule.beats(ws, self.score(p, p.age), 0.0) else p

    def dispatch(self, now: float) -> None:
        if self.run is not None or now < self.busy_until:
            return
        p = self.pick_paused(now)
        if p is not None:
            self.paused.remove(p)
            self.start(p, now, resume=True)
            return
        if len(self.pending):
            e = self.pending.pop(now)
            self._best = None
            if e is not None:
                e.dispatched_at = now
                self.start(self.jobs[e.payload], now, resume=False)

    def finish(self, now: float) -> None:
        j = self.run
        j.busy_s += now - self.seg_start
        j.age, j.done = j.tokens, now
        self.run = None
        self.pending.observe(j.entry, j.busy_s, j.klass, j.tokens)

    def arrive(self, j: Job, pred, now: float) -> None:
        e = self.policy.make_entry(j.i, now, pred, self.metas[j.i] if self.metas else None)
        e.payload = j.i
        j.entry = e
        self.pending.push(e)
        self._best = None


def simulate_preempt(arrival, prompt_tokens, answer_tokens, klass, beliefs: list[LengthBelief], predictions,
                     policy: Policy, rule: PauseRule, costs: Costs, check_tokens: float = 16.0,
                     metas: list[RequestMeta] | None = None) -> PreemptResult:
    """Run one simulation (module docstring). Arrays are per job in arrival order;
    ``predictions[i]`` is what the waiting order sees, ``beliefs[i]`` what the pause rule sees."""
    n = len(arrival)
    jobs = [Job(i, float(arrival[i]), float(prompt_tokens[i]), float(answer_tokens[i]), beliefs[i], int(klass[i]),
                costs.token_s(float(prompt_tokens[i]), float(answer_tokens[i]))) for i in range(n)]
    L = _Loop(jobs, policy, rule, costs, costs.segment_tokens or check_tokens, metas)
    i, now, inf = 0, 0.0, math.inf
    while i < n or L.run is not None or L.paused or len(L.pending):
        t_arr = float(arrival[i]) if i < n else inf
        t_end = L.end_time() if L.run is not None else inf
        t_free = L.busy_until if L.run is None and L.busy_until > now else inf
        t_chk = L.next_check(now)
        now = min(t_arr, t_end, t_free, t_chk)
        if now == inf:
            raise RuntimeError("simulation stalled")  # defensive: work left and no event
        if t_end <= now:
            L.finish(now)
        while i < n and float(arrival[i]) <= now:
            L.arrive(jobs[i], predictions[i], now)
            i += 1
        if L.run is not None:
            L.maybe_pause(now)
        L.dispatch(now)
    soj = np.array([j.done - j.arrival for j in jobs])
    return PreemptResult(soj, np.asarray(answer_tokens, float), np.asarray(klass), np.array([j.pauses for j in jobs]),
                         wasted_s=L.wasted, makespan=now, max_paused_s=max((j.paused_s for j in jobs), default=0.0))
