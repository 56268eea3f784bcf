"""The online length memory (issue 14): evidence keys, Bayesian blending, learning through the
real admission queue (eager and lazy scoring), decay, bounds, persistence, status."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from sjf_core import Scheduler
from sjf_core.memory import LengthMemory, LocalStore, evidence_keys, handle_of
from sjf_core.memory import _stats as st
from sjf_core.memory._keys import template_parts
from sjf_core.memory._neighbours import NeighbourRing, embed
from sjf_lab.sim import appmix

PASTED = [
    "How do I sort a list of dictionaries by a key in Python? I tried sorted() but it fails on None values.",
    "Write a detailed essay about the history of the printing press and its effect on European society.",
    "Explain, with examples, the difference between TCP and UDP, and when a game server should use each.",
    "My cat refuses to eat dry food since we moved. What could be going on and what should I try first?",
    "Draft a cover letter for a junior data analyst position at a logistics company in Rotterdam.",
    "Compare three ways to cache HTTP responses in a Go service and list their trade-offs in a table.",
    "What are the main causes of the French Revolution? Give a thorough answer with dates.",
    "Create a 7-day vegetarian meal plan with shopping list and calories for each day.",
]


def title(i: int) -> dict:
    return appmix.APPS["title"].body(PASTED[i % len(PASTED)] + f" (variant {i})", "m")


def tags(i: int) -> dict:
    """An app whose prompt does not state its answer size: the base alone is far from its answers."""
    text = "Suggest tags for the text below.\n\n\"\"\"\n" + PASTED[i % len(PASTED)] + f" (variant {i})\n\"\"\""
    return {"model": "m", "messages": [{"role": "user", "content": text}]}


def chat(i: int) -> dict:
    return appmix.chat_body(PASTED[i % len(PASTED)] + f" (variant {i})", "m")


async def answer(s: Scheduler, body: dict, tokens: int | None, backend="http://127.0.0.1:9/v1"):
    t = s.ticket(backend, body)
    await t.acquire()
    t.release(tokens)
    return t


def test_keys_hold_digests_only_and_find_the_template():
    a, b = title(1), title(2)
    ka, kb = evidence_keys(a, a["messages"][0]["content"]), evidence_keys(b, b["messages"][0]["content"])
    assert all(isinstance(d, bytes) and len(d) == 16 for _, d in ka.keys)
    kinds_a = dict(ka.keys)
    kinds_b = dict(kb.keys)
    # the instruction outside the pasted block is the same app: head and outside keys agree
    assert kinds_a["head"] == kinds_b["head"] and kinds_a["outside"] == kinds_b["outside"]
    assert kinds_a["group"] == kinds_b["group"]
    # another model is another deployment: no key is shared
    c = dict(a, model="other")
    kc = dict(evidence_keys(c, c["messages"][0]["content"]).keys)
    assert not set(kc.values()) & set(kinds_a.values())
    # a system prompt is a key; max_tokens too
    s = appmix.APPS["sentiment"].body("I love this phone", "m") | {"max_tokens": 5}
    ks = dict(evidence_keys(s, "I love this phone").keys)
    assert "system" in ks and "max" in ks
    assert template_parts("one line") == {"head": "one line"}
    assert evidence_keys("not a dict", "x") is None


def test_estimate_without_evidence_is_the_base_and_consistent_answers_win():
    x = math.log1p(400.0)
    assert st.estimate(None, x, 1.3) == (x, 1.3, 0.0)
    stats = None
    for i in range(20):
        xi = math.log1p(100.0 + 50 * i)  # the base guesses all over the place
        stats = st.update(stats, xi, math.log1p(12.0), st.decay_factor(200))
    m, v, n = st.estimate(stats, x, 1.3)
    assert abs(math.expm1(m) - 12.0) < 6.0 and v < 0.3 and n == pytest.approx(20, rel=0.1)


async def test_no_evidence_no_change_then_the_app_is_learned_through_the_queue():
    mem = LengthMemory()
    s = Scheduler(memory=mem, plugins=False)
    off = Scheduler(memory=False, plugins=False)
    cold = s.predict(tags(100))
    assert cold == off.predict(tags(100))  # no evidence: the base prediction, unchanged
    for i in range(12):
        await answer(s, tags(i), 12)
    warm = s.predict(tags(100))
    assert warm.expected_tokens < 40 < cold.expected_tokens
    assert warm.label == "short"
    # plain chat shares no template: it keeps the base prediction
    assert s.predict(chat(100)) == off.predict(chat(100))
    st_ = s.memory_status()
    assert st_["counters"]["observed"] == 12 and st_["counters"]["with_evidence"] >= 1
    assert st_["online_ranking_accuracy"]["n"] == 12


async def test_unknown_answer_length_teaches_nothing_and_each_answer_counts_once():
    s = Scheduler(memory=LengthMemory(), plugins=False)
    t = await answer(s, title(1), None)
    assert s.memory.counters["observed"] == 0
    p = s.predict(title(2))
    assert s.memory.observe(handle_of(p), 12) and not s.memory.observe(handle_of(p), 12)
    assert not s.memory.observe(handle_of(p), -1) and not s.memory.observe(None, 5)
    assert t.state == "released"


async def test_lazy_tickets_learn_even_when_never_scored():
    """The openai_sjf path: at zero contention the request is never scored, but its answer
    still teaches the memory (the body is read at completion)."""
    s = Scheduler(memory=LengthMemory(), plugins=False)
    cold = s.predict(tags(50))
    for i in range(10):
        t = s.lazy_ticket("http://127.0.0.1:9/v1", lambda i=i: (tags(i), None))
        await t.acquire()
        assert t.entry.scored is False
        t.release(12)
    assert s.memory.counters["observed"] == 10
    assert s.predict(tags(50)).expected_tokens < cold.expected_tokens / 3


async def test_a_changed_app_is_relearned():
    mem = LengthMemory(half_n=20)
    s = Scheduler(memory=mem, plugins=False)
    for i in range(40):
        await answer(s, tags(i), 12)
    assert s.predict(tags(999)).expected_tokens < 30
    for i in range(60):
        await answer(s, tags(200 + i), 700)
    assert s.predict(tags(999)).expected_tokens > 300


async def test_a_stated_size_template_and_the_memory_agree_on_the_true_scale():
    """Issue 23: the title app states its size ("three to five words"), so the cold base is already
    on the true scale; the memory learns the small residual (12 vs ~7 tokens) and still relearns a
    changed app. With a constant base the key's variance falls below the deployment's only once
    the old answers have decayed: about 80 answers at half_n=20 (60 without a stated size)."""
    mem = LengthMemory(half_n=20)
    s = Scheduler(memory=mem, plugins=False)
    cold = s.predict(title(999))
    assert 3 <= cold.expected_tokens <= 15 and cold.label == "short"
    for i in range(40):
        await answer(s, title(i), 12)
    assert 9 <= s.predict(title(999)).expected_tokens <= 16
    for i in range(100):
        await answer(s, title(200 + i), 700)
    warm = s.predict(title(999))
    assert warm.expected_tokens > 300 and warm.label != "short"


def test_bounded_store_and_ring():
    store = LocalStore(max_keys=3)
    for i in range(10):
        store.add([(bytes([i]) * 16, [1, 0, 0, 0, 0, 0])], 0.9)
    assert len(store) == 3
    ring = NeighbourRing(capacity=5, k=2, min_sim=0.5)
    p = embed(np.arange(40, dtype=np.float32))
    for i in range(12):
        ring.add(p, 7, float(i))
    assert len(ring) == 5
    corr, n = ring.query(p, 7)
    assert n == 2 and corr >= 7.0  # the most recent entries only
    assert ring.query(p, 8) == (0.0, 0)  # another deployment's answers are not neighbours


async def test_persistence_is_opt_in_and_round_trips(tmp_path):
    path = str(tmp_path / "mem.npz")
    a = Scheduler(memory=LengthMemory(persist_path=path), plugins=False)
    for i in range(10):
        await answer(a, title(i), 12)
    a.memory.save()
    b = Scheduler(memory=LengthMemory(persist_path=path), plugins=False)
    assert b.predict(title(77)).expected_tokens == pytest.approx(a.predict(title(77)).expected_tokens, rel=1e-6)
    assert len(b.memory.ring) == 10
    assert Scheduler(plugins=False).memory.persist_path is None  # off by default


def test_memory_off_by_env():
    from sjf_core.config import SchedulerConfig

    off = SchedulerConfig.from_env({"SJF_MEMORY": "off"})
    assert Scheduler(off, plugins=False).memory is None
    assert Scheduler(off, plugins=False).memory_status() == {"enabled": False}
    assert Scheduler(SchedulerConfig.from_env({}), plugins=False).memory is not None


async def test_bad_bodies_never_fail_and_leave_no_slot():
    s = Scheduler(memory=LengthMemory(), plugins=False)
    for body in (None, 5, {"messages": "x"}, {"messages": [{"role": "user", "content": None}]},
                 {"model": {"x": 1}, "messages": [{"role": "user", "content": "hi"}], "max_tokens": float("nan")}):
        t = s.ticket("http://127.0.0.1:9/v1", body)
        await t.acquire()
        t.release(10)
    assert s.queue("http://127.0.0.1:9/v1").in_flight == 0
    assert s.memory.counters["errors"] == 0


async def test_prometheus_shows_evidence_and_online_accuracy(monkeypatch):
    import weakref

    from prometheus_client import CollectorRegistry

    from sjf_core.memory import _core
    from sjf_core.memory._prom import MemoryCollector

    # only this test's memory is alive for the collector (others' would be summed in)
    monkeypatch.setattr(_core, "_LIVE", weakref.WeakSet())
    s = Scheduler(memory=LengthMemory(), plugins=False)
    for i in range(6):
        await answer(s, title(i), 12)
    for i in range(6):
        await answer(s, chat(i), 900)
    s.predict(title(50))
    m = s.memory
    assert _core.live_memories() == [m]
    c, acc = dict(m.counters), m.online_accuracy()
    assert acc["n_short"] == 6 and acc["n_long"] == 6
    assert c["key_evidence"] >= 1 and c["observed"] == 12  # the memory did learn and use a key
    reg = CollectorRegistry()
    reg.register(MemoryCollector())

    def sample(name, **labels):
        v = reg.get_sample_value(name, labels)
        assert v is not None, name
        return v

    # the collector shows this memory's own figures, not placeholders
    assert sample("sjf_memory_predictions_total", evidence="key") == c["key_evidence"]
    assert sample("sjf_memory_predictions_total", evidence="neighbour") == c["neighbour_evidence"]
    assert sample("sjf_memory_predictions_total", evidence="none") == c["scored"] - c["with_evidence"]
    assert sample("sjf_memory_answers_learned_total") == 12
    assert sample("sjf_memory_keys") == len(m.store) > 0
    assert sample("sjf_memory_ring_entries") == len(m.ring)
    for predictor in ("memory", "base"):
        v = sample("sjf_memory_online_ranking_accuracy", predictor=predictor)
        # a Short and a Long were answered: a real accuracy, not the NaN of "no data yet"
        assert math.isfinite(v) and 0.0 <= v <= 1.0 and v == acc[predictor], (predictor, v, acc)
