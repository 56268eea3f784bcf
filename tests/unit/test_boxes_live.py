"""Many-model boxes in the live queues (sjf_core.admission._boxes, _box_registry, _box_read,
_ledger stacking): a queue per model runner, the box-wide cap on every path, the box's turn,
learning what the box holds from its own listings. Real asyncio queues, no sockets
(tests/integration/test_box_read.py reads the emulator's listings over HTTP)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sjf_core import Scheduler
from sjf_core.admission import _box_registry
from sjf_core.admission._box_registry import BoxRegistry
from sjf_core.admission._boxes import runner_key, split_runner_key
from sjf_core.admission._ledger import SlotLedger
from sjf_core.predict._prediction import Prediction

URL = "http://127.0.0.1:11434/v1"


def pred(tokens: float) -> Prediction:
    return Prediction.from_probs([1.0, 0.0, 0.0], float(tokens))


def scheduler_with_box(kind: str = "ollama", models=("a", "b"), **box) -> tuple[Scheduler, object]:
    s = Scheduler(predictor=None, tau="off")
    reg = s.box_registry()
    b = reg.box(URL)
    b.catalogue = set(models)
    reg.configure(b, kind)
    for k, v in box.items():
        getattr(b, f"set_{k}")(v) if k in ("cap", "max_loaded") else None
    return s, b


def test_runner_keys_split_and_only_known_models_of_a_many_model_box_get_one():
    assert runner_key(URL, "qwen2.5:7b") == URL + "|qwen2.5:7b" and split_runner_key(URL + "|m") == (URL, "m")
    assert split_runner_key(URL) == (URL, None) and runner_key(URL, "") == URL
    s, b = scheduler_with_box(models=("qwen2.5:latest",))
    assert s.queue_key(URL, "qwen2.5") == URL + "|qwen2.5"  # Ollama: no tag means :latest
    assert s.queue_key(URL, "not-installed") == URL  # not the box's: the URL's own queue
    b.kind = "plain"
    assert s.queue_key(URL, "qwen2.5") == URL


def test_ledger_stacking_holds_the_box_cap_on_every_path():
    box = SlotLedger("box", 1)
    a, b = SlotLedger("a", 1), SlotLedger("b", 1)
    a.stack(box), b.stack(box)
    assert a.try_take()
    assert not b.try_take() and b.used == 0  # the box's one unit is a's: b takes nothing

    async def gate_path():
        await b.take()  # the last-resort gate's path waits for the runner's unit, then the box's
        return True

    async def run():
        t = asyncio.ensure_future(gate_path())
        await asyncio.sleep(0.01)
        assert not t.done() and b.used == 1 and box.used == 1
        a.give()
        assert await asyncio.wait_for(t, 5) and box.used == 1 and a.used == 0
        b.give()
        assert box.used == 0 and b.used == 0

    asyncio.run(run())


def test_a_cap_1_box_serves_its_models_one_at_a_time_shortest_in_seconds_first():
    s, b = scheduler_with_box(cap=1)
    ka, kb = s.queue_key(URL, "a"), s.queue_key(URL, "b")
    qa, qb = s.queue(ka), s.queue(kb)
    slow, fast = qa.gate.member, qb.gate.member
    slow.s_per_token, fast.s_per_token = 0.1, 0.001  # a 100x slower per token
    order = []

    async def one(key, tokens, tag):
        t = s.ticket(key, None, prediction=pred(tokens))
        await t.acquire()
        order.append(tag)
        assert b.box.in_flight() <= 1
        await asyncio.sleep(0)
        t.release(int(tokens))

    async def run():
        first = s.ticket(ka, None, prediction=pred(10))
        await first.acquire()  # the box's one answer: everything else waits
        tasks = [asyncio.ensure_future(one(ka, 100, "a100")), asyncio.ensure_future(one(kb, 1000, "b1000"))]
        await asyncio.sleep(0.01)
        assert order == [] and qa.waiting == 1 and qb.waiting == 1
        first.release(10)
        await asyncio.gather(*tasks)

    asyncio.run(run())
    # 1,000 tokens at 1 ms each (1 s) before 100 tokens at 100 ms each (10 s): seconds, not tokens
    assert order == ["b1000", "a100"]


def test_a_box_that_holds_one_model_groups_a_model_s_waiters():
    s, b = scheduler_with_box(max_loaded=1)
    ka, kb = s.queue_key(URL, "a"), s.queue_key(URL, "b")
    b.box.set_loaded(["a"], b.clock())
    order = []

    async def one(key, tag):
        t = s.ticket(key, None, prediction=pred(50))
        await t.acquire()
        order.append(tag)
        await asyncio.sleep(0)
        t.release(50)

    async def run():
        hold = s.ticket(ka, None, prediction=pred(50))
        await hold.acquire()
        tasks = [asyncio.ensure_future(one(ka if i % 2 == 0 else kb, f"{'ab'[i % 2]}{i}")) for i in range(8)]
        await asyncio.sleep(0.01)
        assert order == []  # b cannot load beside a busy a
        hold.release(50)
        await asyncio.gather(*tasks)

    asyncio.run(run())
    assert [x[0] for x in order] == ["a"] * 4 + ["b"] * 4
    assert b.loads == 1 and set(b.box.loaded) == {"b"}


def test_the_fit_is_learned_when_a_model_asked_for_is_not_loaded_twice_in_a_row(monkeypatch):
    s, b = scheduler_with_box()
    b.source = (URL, {})
    b.box.set_loaded(["a"], b.clock())
    reg = s.boxes
    reads = iter([{"a"}, {"a"}])

    async def fake_read(api_base, kind, headers=None):
        return next(reads)

    monkeypatch.setattr(_box_registry, "read_loaded", fake_read)
    monkeypatch.setattr(_box_registry, "REFRESH_DELAY_S", 0.0)

    async def run():
        reg.refresh(b, expect="b")  # a request for b was sent; the box still lists only a
        for _ in range(100):
            await asyncio.sleep(0)
            if not b.reading:
                break

    asyncio.run(run())
    assert b.box.max_loaded == 1


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_a_loaded_model_counts_once_whatever_ollama_tag_it_is_listed_or_served_under(data):
    """Ollama lists a loaded model as ``m`` and ``m:latest``; a deployment may name either. Before
    the fix the box's first reading kept both names: on a full box the second looked like an idle
    model to evict, so another model could start a load beside the busy one (issue 28, stumble A)."""
    from unittest import mock

    from sjf_core.admission._box_read import BoxReport, ollama_names

    models = ["a", "b", "c"]
    served = {m: data.draw(st.sampled_from([m, m + ":latest"])) for m in models}  # the deployments' spelling
    loaded = data.draw(st.lists(st.sampled_from(models), min_size=1, max_size=2, unique=True))
    listed = set().union(*(data.draw(st.sampled_from([{m}, {m + ":latest"}, {m, m + ":latest"}])) for m in loaded))
    attach_first = data.draw(st.booleans())  # runners made before the reading, or after it
    report = BoxReport("ollama", {x for m in models for x in ollama_names(m)}, listed)
    s = Scheduler(predictor=None, tau="off")
    reg = s.box_registry()
    b = reg.box(URL)

    def runners():
        return {m: s.queue(s.queue_key(URL, served[m])).gate.member for m in models}

    async def read(*a, **k):
        return report

    if attach_first:
        b.kind, b.catalogue = "ollama", set(report.catalogue)
        runners()
    with mock.patch.object(_box_registry, "read_box", read):
        asyncio.run(reg.discover(URL, URL))
    r = runners()
    assert all(r[m].key == runner_key(URL, served[m]) for m in models)
    assert len(b.box.loaded) == len(loaded) == len(b.status()["loaded"])
    now = b.clock()
    assert {m for m in models if b.box.is_loaded(r[m], now)} == set(loaded)
    b.set_max_loaded(len(loaded), known=True)  # the box is full ...
    for m in loaded:  # ... and every loaded model answers: no other model may start a load
        r[m].running[object()] = (now, 1.0)
    assert not any(b.box.allows(r[m], now) for m in models if m not in loaded)


@pytest.mark.parametrize("kind, cap, max_loaded", [("ollama", None, 3), ("llama-swap", None, 1), ("plain", 1, None)])
def test_kind_defaults_and_settings_win(kind, cap, max_loaded):
    s, b = scheduler_with_box(kind=kind)
    assert (b.box.cap, b.box.max_loaded) == (cap, max_loaded)
    reg = BoxRegistry(lambda k: None, settings=lambda key: {"cap": 1, "max_loaded": 2})
    b2 = reg.box(URL)
    reg.configure(b2, kind)
    assert (b2.box.cap, b2.box.max_loaded) == (1, 2)


def test_metrics_show_each_box_model_loaded_its_runner_queue_and_loads():
    from prometheus_client import CollectorRegistry, generate_latest

    from sjf_core.ext._box_metrics import watch_boxes

    s, b = scheduler_with_box(max_loaded=1)
    b.box.set_loaded(["a"], b.clock())
    kb = s.queue_key(URL, "b")

    async def run():
        t = s.ticket(kb, None, prediction=pred(50))
        await t.acquire()  # b is not loaded: this start loads it (a is idle: evicted)
        t.release(50)

    asyncio.run(run())
    reg = CollectorRegistry()
    assert watch_boxes(s.boxes, reg)
    text = generate_latest(reg).decode()
    assert f'sjf_model_loads_total{{backend="{URL}",model="b"}} 1.0' in text
    assert f'sjf_box_model_loaded{{backend="{URL}",model="b"}} 1.0' in text
    assert f'sjf_box_max_loaded{{backend="{URL}"}} 1.0' in text and f'sjf_box_cap{{backend="{URL}"}} NaN' in text


def test_the_startup_log_names_the_models_that_share_a_box():
    from litellm_sjf._startup import shared_boxes
    from litellm_sjf.settings import PluginSettings

    cfg = {"model_list": [
        {"model_name": "chat", "litellm_params": {"model": "ollama_chat/qwen2.5:7b", "api_base": "http://localhost:11434"}},
        {"model_name": "code", "litellm_params": {"model": "openai/qwen2.5-coder:1.5b", "api_base": URL}},
        {"model_name": "alone", "litellm_params": {"model": "openai/m", "api_base": "http://127.0.0.1:8080/v1"}}]}
    lines = shared_boxes(PluginSettings(), cfg)
    assert len(lines) == 1 and "qwen2.5-coder:1.5b, qwen2.5:7b share the box http://127.0.0.1:11434/v1 and " \
        "http://localhost:11434 (on the status page: http://127.0.0.1:11434/v1)" in lines[0], lines
    assert "an INFO line says which when the box is first read" in lines[0]
    cfg["model_list"][1]["litellm_params"]["api_base"] = "http://localhost:11434/"  # the root, as configured
    assert "share the box http://localhost:11434 (on the status page: http://127.0.0.1:11434/v1)" in \
        shared_boxes(PluginSettings(), cfg)[0]


def test_box_settings_are_checked_and_named_and_override_what_is_read():
    from sjf_core.config import SchedulerConfig
    from sjf_core.settings import BoxSettings

    c = SchedulerConfig.from_env({"SJF_BACKEND_BOX": '{"http://localhost:11434": {"kind": "serial", '
                                                     '"models": {"a": {"slots": 2}}, "cap": "none"}}',
                                  "SJF_BOX_ORDER": "tokens", "SJF_BOXES": "off"})
    assert c.box_settings(URL) == {"kind": "serial", "cap": None, "models": {"a": 2}}
    assert c.box_order == "tokens" and c.adapter.boxes is False
    with pytest.raises(ValueError) as info:
        SchedulerConfig.from_env({"SJF_BACKEND_BOX": '{"http://x": {"kind": "olama", "max_loaded": 0}}',
                                  "SJF_BOX_ORDER": "sec"})
    msg = str(info.value)
    assert "kind must be one of" in msg and "'olama'" in msg and "SJF_BOX_ORDER" in msg
    with pytest.raises(ValueError, match="max_loaded must be an integer"):
        BoxSettings.parse({"max_loaded": 0})
    with pytest.raises(ValueError, match="unknown key"):
        BoxSettings.parse({"slots": 2})
    # a box that lists nothing (llama-cpp-python): said to be serial, every model is a runner
    s = Scheduler(predictor=None, backends={URL: {"box": {"kind": "serial", "models": {"b": {"slots": 1}}}}})

    async def run():
        await s.read_box(URL, URL)

    asyncio.run(run())
    b = s.boxes.boxes[URL]
    assert b.kind == "serial" and (b.box.cap, b.box.max_loaded) == (1, 1) and b.fit_known
    assert s.queue_key(URL, "anything") == URL + "|anything"


def test_order_in_tokens_is_speed_and_load_blind():
    s = Scheduler(predictor=None, tau="off", box_order="tokens")
    reg = s.box_registry()
    b = reg.box(URL)
    assert b.rule.speed_aware is False


def test_the_last_resort_gate_keeps_a_runner_s_slots_and_the_box_cap():
    """A request whose admission failed waits at its runner's gate: the runner's ledger, stacked
    under the box's cap, is the one the normal queues take from (DESIGN.md invariants 1, 5)."""
    s, b = scheduler_with_box(cap=1)
    ka, kb = s.queue_key(URL, "a"), s.queue_key(URL, "b")

    async def run():
        normal = s.ticket(ka, None, prediction=pred(50))
        await normal.acquire()  # the box's one answer
        gated = s.last_resort.ticket(kb, RuntimeError("admission fault"))
        waiter = asyncio.ensure_future(gated.acquire())
        await asyncio.sleep(0.01)
        assert not waiter.done() and b.ledger.used == 1  # b's gate waits for the box's unit
        other = s.ticket(ka, None, prediction=pred(10))
        again = asyncio.ensure_future(other.acquire())
        normal.release(50)
        await asyncio.wait_for(waiter, 5)  # the gate's FIFO line is served first
        assert b.ledger.used == 1 and not again.done()
        gated.release(None)
        await asyncio.wait_for(again, 5)
        other.release(10)
        assert b.ledger.used == 0

    asyncio.run(run())


def test_in_redis_mode_a_box_running_every_model_side_by_side_is_read_in_the_background(monkeypatch):
    """Redis mode reads a box's loaded set before a request. A box whose last reading listed
    every model it serves as loaded (nothing competes) is read in the background instead: read
    inline, the listing round trip delayed every autocomplete request (P95 1.36x no plugin with
    3 workers). Any other box is still read inline, which is also where what fits is learned
    (reading only in the background, a no-fit box kept 11-12 loads per burst instead of 3-5)."""
    from sjf_core.admission._box_redis import side_by_side

    def read(loaded):
        reg0 = Scheduler(predictor=None, tau="off").box_registry()
        b = reg0.box(URL)
        rep = type("Rep", (), {"catalogue": {"a", "b"}, "kind": "ollama", "loaded": set(loaded), "slots": {}})
        reg0._learn(b, rep)  # the box's listing: two models, these loaded
        return b

    assert side_by_side(read({"a", "b"}))
    one = read({"a"})
    assert not side_by_side(one)  # one of its two models listed: they may take turns, learn it
    one.box.set_loaded(["a", "b"], one.clock())  # the tracking (every model started) does not count
    assert not side_by_side(one)
    both = read({"a", "b"})
    both.set_max_loaded(1, known=True)  # learned or set: one model at a time, the models take turns
    assert not side_by_side(both)
    capped = read({"a", "b"})
    capped.set_cap(1)  # a box-wide cap: its models compete
    assert not side_by_side(capped)

    r = Scheduler(predictor=None, tau="off", redis_url="redis://127.0.0.1:1/0")  # never contacted here
    reg = r.box_registry()
    rb = reg.box(URL)
    inline: list[str] = []
    background: list[str] = []

    async def fresh(backend, max_age_s):
        inline.append(backend)

    async def discover(backend, api_base, headers=None, hint=None):
        return reg.boxes[backend]

    monkeypatch.setattr(reg, "fresh", fresh)
    monkeypatch.setattr(reg, "discover", discover)
    monkeypatch.setattr(reg, "refresh", lambda live, expect=None, every_s=None: background.append(live.key))
    monkeypatch.setattr("sjf_core.admission._box_redis.side_by_side", lambda live: live is rb and ok[0])
    ok = [True]
    asyncio.run(r.read_box(URL, URL))
    assert inline == [] and background == [URL]  # side by side: read, but nothing waits for it
    ok[0] = False
    asyncio.run(r.read_box(URL, URL))
    assert inline == [URL] and background == [URL]


def test_the_first_reading_of_a_box_is_logged_with_what_it_is_and_how_it_is_admitted(caplog):
    """Issue 28: the start-up line said "a queue per model runner once the box says …, else one
    queue for the URL" and nothing later said which; the box was named with /v1 although the
    root URL was configured."""
    import logging
    from unittest import mock

    from sjf_core.admission._box_read import BoxReport

    reg = BoxRegistry(lambda k: None, settings=lambda key: {"max_loaded": 1})

    async def read(*a, **k):
        return BoxReport("ollama", {"a", "a:latest", "b", "b:latest"}, {"a", "a:latest"})

    async def nothing(*a, **k):
        return None

    with caplog.at_level(logging.INFO, logger="sjf_core.admission.boxes"):
        with mock.patch.object(_box_registry, "read_box", read):
            asyncio.run(reg.discover(URL, "http://localhost:11434"))
        with mock.patch.object(_box_registry, "read_box", nothing):
            asyncio.run(reg.discover("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/"))
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        f"box http://localhost:11434 (on the status page: {URL}) read: kind ollama, holds 1 model(s) at once (set), box-wide cap none, "
        f"loaded now: a; a queue per model runner",
        "box http://127.0.0.1:8080/v1 read: it lists no models (plain): one queue for the URL"], lines
    # later requests read nothing again: one line per box
    with caplog.at_level(logging.INFO, logger="sjf_core.admission.boxes"):
        asyncio.run(reg.discover(URL, "http://localhost:11434"))
    assert len(caplog.records) == 2



def test_while_what_fits_is_unknown_the_box_is_read_again_after_each_answer():
    """The tracking counts every model it started as loaded, so after a reading that missed a
    swap (the box reset right after a warm-up of both models, in benchmarks/box_bench.py's (b))
    no start looked like a load, nothing read the box again, and burst after burst alternated
    the models (19 loads of 20). While what fits is unknown and the box was not seen holding all
    its models, each answer now has the box read again; once it is known, or the box was seen
    holding every model it serves, only a load does."""
    s, b = scheduler_with_box(models=("a", "b"))
    calls: list = []
    b.refresher = lambda live, expect=None: calls.append(expect)
    ka = s.queue_key(URL, "a")

    def answer():
        async def run():
            t = s.ticket(ka, None, prediction=pred(50))
            await t.acquire()
            t.release(40)

        asyncio.run(run())

    b.box.set_loaded(["a", "b"], b.clock())  # the tracking: both count as loaded
    answer()
    assert calls == [None]  # read again: what does the box hold?
    calls.clear()
    b.listed_all = True  # the last reading listed both models loaded: nothing to learn
    answer()
    assert calls == []
    b.listed_all = False
    b.set_max_loaded(1, known=True)  # learned (or set)
    b.box.set_loaded(["a"], b.clock())
    answer()
    assert calls == []
