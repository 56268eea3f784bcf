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
    assert doc["pools"][0]["queue"]["waiters"][0] == {"id": 1, "tenant": "zzz", "tenant_label": None, "model": "llama3",
                                                      "request_id": None}


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


def test_a_runner_waiting_for_the_box_s_turn_starts_after_the_loaded_model_s_work_and_its_load():
    """Issue 28: model-a's waiters showed ≈ 0 s while model-b, loaded on a box that holds one
    model, had 8 waiters ahead plus a load: the estimate now adds the box's turn."""
    box, ka, kb = "http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1|model-a", "http://127.0.0.1:11434/v1|model-b"

    def doc(cap=None, b_rate=100.0, a_load=3.0):
        return {"tokens_per_s": {kb: b_rate} if b_rate else {},
                "backends": {ka: {"queue": {"slots": 1, "running": [], "waiters": [{"expected_tokens": 20},
                                                                                   {"expected_tokens": 300}]}},
                             kb: {"queue": {"slots": 1, "running": [{"expected_tokens": 300, "running_s": 1.0}],
                                            "waiters": [{"expected_tokens": 100} for _ in range(8)]}}},
                "boxes": [{"box": box, "cap": cap, "max_loaded": 1, "loaded": ["model-b"], "default_load_s": 5.0,
                           "runners": [{"model": "model-a", "queue": ka, "loaded": False, "slots": 1, "waiting": 2,
                                        "load_s": a_load, "tokens_per_s": None},
                                       {"model": "model-b", "queue": kb, "loaded": True, "slots": 1, "waiting": 8,
                                        "load_s": None, "tokens_per_s": None}]}]}

    d = add_estimates(doc())
    a = d["backends"][ka]["queue"]["waiters"]
    # b: (300 - 100) running + 8 x 100 waiting = 1,000 tokens at 100/s = 10 s; then a's load, 3 s
    assert a[0]["start_in_s"] == 13.0 and "start_after" not in a[0]
    assert a[1]["start_in_s"] is None  # a's own speed unknown: what follows its first is not told
    assert [w["start_in_s"] for w in d["backends"][kb]["queue"]["waiters"]][:2] == [2.0, 3.0]  # b's own: unchanged
    assert add_estimates(doc(a_load=None))["backends"][ka]["queue"]["waiters"][0]["start_in_s"] == 15.0  # default load
    for unknown in (doc(b_rate=None), doc(cap=1)):  # b's speed unknown; a cap: the turn interleaves in seconds
        w = add_estimates(unknown)["backends"][ka]["queue"]["waiters"][0]
        assert w["start_in_s"] is None and w["start_after"] == "box turn"


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


# ---- after a fresh user's day (polish): ids, api_bases, streamed, slowdown ------------------------
def test_one_request_id_follows_a_request_from_the_pool_to_its_backend_and_into_the_completions():
    """Before: a pooled waiter was #N in the pool and #M on its backend, and the completions had
    no id. Now the adapter's request_id is on the pool's row, the backend's row and the
    completion, with the model group and whether it was streamed."""
    from litellm_sjf._recorder import OpsRecorder

    async def main():
        rec, labels = OpsRecorder(), OpsLabels()
        rec.describe = labels.describe
        s = Scheduler(predictor=None, plugins=False, memory=False, metrics=False, tau="off", listeners=[rec])
        pool = s.pool([A, B])
        holds = [s.queue(A).ticket(None), s.queue(B).ticket(None)]
        for t in holds:
            await t.acquire()
        meta = s.meta(A, {}, None, request_id="c0ffee12")
        admit = asyncio.ensure_future(pool.admit(pred(40), meta, None, lambda k: s.ticket(k, {}, prediction=pred(40),
                                                                                          request_id="c0ffee12")))
        for _ in range(5):
            await asyncio.sleep(0)
        assert [w["request_id"] for w in (await pool.view())["waiters"]] == ["c0ffee12"]
        holds[1].release(5)
        ticket = await admit
        labels.ticket_seen(ticket, "llama3", True)
        assert [r["request_id"] for r in (await s.queue(B).view())["running"]] == ["c0ffee12"]
        assert [r["request_id"] for r in (await s.queue(A).view())["running"]] == [None]  # none given: none shown
        ticket.release(42)
        done = rec.recent()[0]
        assert (done["request_id"], done["model"], done["streamed"], done["answer_tokens"]) == ("c0ffee12", "llama3",
                                                                                                  True, 42)
        holds[0].release(5)

    asyncio.run(main())


def test_the_call_id_gives_a_short_stable_request_id_and_redis_rows_get_it_from_the_call():
    from types import SimpleNamespace

    from litellm_sjf._calls import Call, request_id_of

    call = Call("3f2c-litellm-call-id", 1, "chat/completions", None, {}, None, False)
    assert call.request_id == request_id_of("3f2c-litellm-call-id") and len(call.request_id) == 8
    assert int(call.request_id, 16) >= 0 and "litellm" not in call.request_id
    call.backend, call.group = A, "local"
    call.ticket = SimpleNamespace(view_id="r-17")  # a Redis ticket: the store's row has no id of ours
    doc = {"backends": {A: {"queue": {"running": [{"id": "r-17", "request_id": None, "tenant": None}]}}}}
    OpsLabels().annotate(doc, [call])
    row = doc["backends"][A]["queue"]["running"][0]
    assert row["request_id"] == call.request_id and row["model"] == "local"


def test_a_backend_shows_the_api_base_it_was_configured_as_without_credentials():
    labels = OpsLabels()
    labels.backend_seen(A, "llama3", "ollama_chat/llama3.2", "http://localhost:8001")
    labels.backend_seen(A, "llama3", "ollama_chat/llama3.2", "http://ops:s3cret@127.0.0.1:8001/")
    labels.backend_seen(B, None, None, None)
    doc = {"backends": {A: {}, B: {}}}
    labels.annotate(doc)
    assert doc["backends"][A]["api_bases"][0] == "http://localhost:8001"
    assert len(doc["backends"][A]["api_bases"]) == 2 and "s3cret" not in str(doc)
    assert doc["backends"][B]["api_bases"] == []


def test_the_backends_slowdown_and_the_settings_slowdown_agree():
    """Before: each backend said "slowdown": null while settings.slowdown said 8.0 (the policy
    object has no slowdown; its promotion rule has)."""
    from litellm_sjf._status import _effective_settings, _queue_status
    from litellm_sjf.settings import PluginSettings
    from sjf_core.config import SchedulerConfig

    s = Scheduler(predictor=None, plugins=False, memory=False, metrics=False)
    settings = PluginSettings()
    assert _queue_status(s.queue(A))["slowdown"] == _effective_settings(settings)["slowdown"] == 8.0
    cfg = SchedulerConfig.create(promotion="one-in-k", k=4)  # a rule that reads no slowdown: none, both
    s2 = Scheduler(cfg, predictor=None, plugins=False, memory=False, metrics=False)
    assert _queue_status(s2.queue(A))["slowdown"] is None
    assert _effective_settings(PluginSettings(config=cfg))["slowdown"] is None
