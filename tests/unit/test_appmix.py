"""App-mix workload (issue 14) and the simulator's online predictions: built from our own
prompts here (the team's data is not shipped), checked for shapes, splits and that a memory
learning as it goes orders the app's tasks first."""

from __future__ import annotations

import numpy as np
import pytest

from sjf_core import Scheduler
from sjf_lab.bench.workload import Row
from sjf_core.memory import LengthMemory, handle_of
from sjf_core.policy._policies import make_policy
from sjf_lab.sim import appmix
from sjf_lab.sim.engine import simulate
from sjf_lab.sim.workload import Workload
from sjf_lab.train_data import prompt_key, split_of

TOPICS = ["gardening", "compilers", "the Roman empire", "tax law", "jazz", "sourdough", "rust lifetimes",
          "volcanoes", "chess openings", "marathon training", "solar panels", "medieval castles"]
PROMPTS = [(f"Question {i}: please explain {t} in depth, with history, examples and a summary table.",
            150 + 97 * (i % 13)) for i, t in enumerate(TOPICS * 25)]


def test_app_requests_follow_the_mix_and_the_templates():
    reqs = appmix.app_requests(PROMPTS, 200, seed=1)
    apps = {r.app for r in reqs}
    assert apps == set(appmix.DEFAULT_MIX)
    for r in reqs:
        msgs = r.body["messages"]
        assert msgs[-1]["role"] == "user" and msgs[-1]["content"] == r.user
        if r.app == "title":
            assert 8 <= r.tokens <= 15 and r.user.startswith("Give the conversation below a title")
        elif r.app == "sentiment":
            assert msgs[0]["role"] == "system" and 1 <= r.tokens <= 3
        elif r.app == "summary":
            assert 200 <= r.tokens <= 600
        else:
            assert r.tokens == r.pasted_tokens and r.user in {p for p, _ in PROMPTS}
    with pytest.raises(ValueError):
        appmix.app_requests(PROMPTS[:3], 10)
    with pytest.raises(ValueError):
        appmix.app_requests(PROMPTS, 10, mix={"nope": 1.0})


def test_bench_app_burst_uses_held_out_prompts_and_training_warm_up():
    rows = [Row(p, 900 if i % 2 else 40) for i, (p, _) in enumerate(PROMPTS)]
    jobs, warm = appmix.bench_app_burst(rows, n_task=5, n_reply=5, n_warm=10, seed=0)
    assert len(jobs) == 10 and len(warm) == 10
    assert len({j.prompt for j in jobs + warm}) == 20  # the emulator needs unique prompts
    tasks = [j for j in jobs if j.prompt.startswith("Give the conversation")]
    replies = [j for j in jobs if not j.prompt.startswith("Give the conversation")]
    assert len(tasks) == 5 and all(j.tokens <= 15 for j in tasks)
    assert all(j.tokens >= 800 and split_of(prompt_key(j.prompt)) == "test" for j in replies)
    assert all(j.idx < 0 for j in warm)
    plain = [j for j in warm if not j.prompt.startswith("Give the conversation")]
    assert plain and all(split_of(prompt_key(j.prompt)) != "test" for j in plain)


def test_simulator_with_a_memory_learning_as_it_goes():
    reqs = appmix.app_requests(PROMPTS, 240, mix={"title": 0.5, "chat": 0.5}, seed=2)
    tokens = np.asarray([r.tokens for r in reqs], float)
    service = 0.3 + tokens / 30.0
    klass = np.where(tokens < 200, 0, np.where(tokens < 800, 1, 2)).astype(np.int64)
    arrival = np.cumsum(np.random.default_rng(0).exponential(service.mean() / 0.8, len(reqs)))
    wl = Workload(arrival, service, klass, tokens)
    s = Scheduler(memory=LengthMemory(), plugins=False)
    preds: list = [None] * len(reqs)

    def predict(i):
        preds[i] = s.predict(reqs[i].body)
        return preds[i]

    learnt = []

    def done(i):
        learnt.append(i)
        s.memory.observe(handle_of(preds[i]), int(tokens[i]))

    res = simulate(wl, predict, make_policy("sjf-tokens"), on_complete=done)
    assert sorted(learnt) == list(range(len(reqs)))
    assert not np.isnan(res.sojourn).any()
    late_titles = [i for i, r in enumerate(reqs) if r.app == "title" and i > 60]
    assert all(preds[i].expected_tokens < 60 for i in late_titles)  # learnt: ~12-token answers
    acc = s.memory.online_accuracy()
    # The base reads the title template's stated size ("three to five words", issue 23), so the
    # titles leave the memory little to add to the ranking; what it still changes here are the
    # repeated chat prompts (one key per topic once digits are normalised), within 1 pp of the base.
    assert acc["n"] == len(reqs) and acc["memory"] >= acc["base"] - 0.01
