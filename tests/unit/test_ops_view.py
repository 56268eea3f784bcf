"""The operator's view's new parts (issue 29): the pool's waiter view, the model names and
tenant labels, the seconds estimates, the grouped counters and the measured speed. No
sockets; no timed assertions."""

from __future__ import annotations

import asyncio
import dataclasses

from sjf_core._scheduler import Scheduler
from sjf_core.predict._prediction import Prediction

from litellm_sjf._estimates import add_estimates
from litellm_sjf._labels import OpsLabels, deployment_names, tenant_label
from litellm_sjf._stats import COUNTER_GROUPS, HandlerStats, TokenRates, grouped

A, B = "http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"


def pred(tokens: float) -> Prediction:
    return Prediction.from_probs((1.0, 0.0, 0.0) if tokens < 200 else (0.0, 0.0, 1.0), tokens)


def test_a_pool_lists_its_waiters_in_dispatch_order_and_the_tickets_name_their_rows():
    async def main():
        s = Scheduler(predictor=None, plugins=False, memory=False, metrics=False, tau="off")
        pool = s.pool([A, B])
        holds = [s.queue(A).ticket(None), s.queue(B).ticket(None)]
        for t in holds:
            await t.acquire()
        tasks = [asyncio.ensure_future(pool.admit(pred(n), None, None, lambda k, n=n: s.queue(k).ticket(pred(n))))
                 for n in (900, 40, 300)]
        for _ in range(5):
            await asyncio.sleep(0)
        view = await pool.view()
        assert view["waiting"] == 3 and view["running"] == [] and view["reserved"] == []
        assert [round(w["expected_tokens"]) for w in view["waiters"]] == [40, 300, 900]
        assert view["slots"] == 2 and view["in_flight"] == 2
        local = await s.queue(A).view()
        assert [r["id"] for r in local["running"]] == [holds[0].view_id]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert (await pool.view())["waiters"] == []

    asyncio.run(main())


def test_tenant_labels_are_litellms_key_alias_or_user_id_never_the_clients_own_fields():
    from litellm.proxy._types import UserAPIKeyAuth

    alias = UserAPIKeyAuth(api_key="sk-hashed", key_alias="support-bot", user_id="u-42", team_id="t1",
                           team_alias="support")
    plain = UserAPIKeyAuth(api_key="sk-hashed", user_id="u-42")
    assert tenant_label(alias, "key") == "support-bot" and tenant_label(plain, "key") == "u-42"
    assert tenant_label(alias, "team") == "support"
    assert tenant_label(alias, "user") is None and tenant_label(alias, "header:x-app") is None
    assert tenant_label(object(), "key") is None and tenant_label(None, "team") is None


def test_model_names_and_labels_go_beside_urls_and_hashes():
    assert deployment_names({"model": "ollama_chat/llama3", "metadata": {"model_group": "llama3"}}) == \
        ("llama3", "ollama_chat/llama3")
    assert deployment_names({"model": "openai/m", "litellm_metadata": {"model_group": "g"}}) == ("g", "openai/m")
    assert deployment_names(None) == (None, None)
    labels = OpsLabels()
    labels.backend_seen(A, "llama3", "ollama_chat/llama3")
    labels.pool_seen(f"{A}+{B}", "llama3")
    labels.tenant_seen("abc123", "support-bot")
    doc = {"backends": {A: {"queue": {"running": [], "waiters": [{"id": 3, "tenant": "abc123"}]}}, B: {}},
           "pools": [{"name": f"{A}+{B}", "queue": {"waiters": [{"id": 1, "tenant": "zzz"}]}}]}
    labels.annotate(doc)
    assert doc["backends"][A]["models"] == [{"group": "llama3", "deployment": "ollama_chat/llama3"}]
    assert doc["backends"][B]["models"] == []
    assert doc["backends"][A]["queue"]["waiters"][0]["tenant_label"] == "support-bot"
    assert doc["pools"][0]["model_group"] == "llama3"
    assert doc["pools"][0]["queue"]["waiters"][0] == {"id": 1, "tenant": "zzz", "tenant_label": None, "model": "llama3"}


def test_the_guard_and_the_start_are_given_in_seconds_at_the_measured_speed():
    doc = {"tokens_per_s": {A: 100.0},
           "backends": {A: {"queue": {"slots": 1, "running": [{"expected_tokens": 300, "running_s": 1.0}],
                                      "waiters": [{"expected_tokens": 50, "due_in_tokens": 800, "due_in_s": None},
                                                  {"expected_tokens": 900, "due_in_tokens": -5, "due_in_s": None},
                                                  {"expected_tokens": 10, "due_in_tokens": None, "due_in_s": 30.0}]}},
                        B: {"queue": {"slots": 1, "running": [], "waiters": [{"expected_tokens": 5,
                                                                               "due_in_tokens": 100}]}}}}
    add_estimates(doc)
    w = doc["backends"][A]["queue"]["waiters"]
    assert w[1]["promote_in_s"] == 0.0 and w[1]["start_in_s"] == 2.0  # due: next, after (300 - 100) / 100
    assert w[0]["promote_in_s"] == 8.0 and w[0]["start_in_s"] == 10.0  # (200 + 900) / 100 = 11; promoted: 8 + 2
    assert w[2]["promote_in_s"] == 30.0 and w[2]["start_in_s"] == 11.5  # (200 + 900 + 50) / 100
    b = doc["backends"][B]["queue"]["waiters"][0]
    assert b["promote_in_s"] is None and b["start_in_s"] is None  # nothing measured on B yet


def test_every_counter_is_in_one_group_with_what_it_counts():
    names = [n for _, _, items in COUNTER_GROUPS for n, _ in items]
    fields = [f.name for f in dataclasses.fields(HandlerStats)] + ["store_fail_open"]
    assert sorted(names) == sorted(fields) and len(set(names)) == len(names)
    groups = grouped({**HandlerStats().as_dict(), "store_fail_open": 0, "new_one": 3})
    assert groups[-1] == {"group": "other", "about": None, "counters": [{"name": "new_one", "value": 3, "means": None}]}
    assert all(c["means"] for g in groups[:-1] for c in g["counters"])


def test_the_speed_is_answer_tokens_over_slot_time_not_pulled_down_by_short_answers():
    r = TokenRates()
    for tokens, seconds in ((30, 0.25), (900, 4.6), (25, 0.22), (600, 3.1)):  # 200 tok/s + 0.1 s fixed cost
        r.observe(A, tokens, seconds)
    rate = r.as_dict()[A]
    assert 150 < rate < 200, rate  # a mean of per-request rates would read 150 here
    r.observe(B, 10, 0.01)  # too short to time
    assert B not in r.as_dict()
