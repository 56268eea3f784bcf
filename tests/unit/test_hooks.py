"""Pluggy extension points: discovery through the entry-point group, the example plugin,
custom predictor / ordering key / event hooks, and isolation of faulty plugins."""

from __future__ import annotations

import asyncio
import logging
import sys
import tomllib
from pathlib import Path

import pytest

from sjf_core import Prediction, Scheduler, SchedulerConfig
from sjf_core.ext._hooks import ENTRY_POINT_GROUP, PluginPolicy, discover_plugins, hookimpl, make_plugin_manager, to_prediction

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sjf_plugin_example"
BACKEND = "http://127.0.0.1:9/v1"


class FixedPredictor:
    """A deterministic built-in predictor: P(Long) grows with the prompt length."""

    def predict(self, text: str) -> Prediction:
        pl = min(0.9, len(text) / 1000)
        return Prediction.from_probs([1 - pl - 0.05, 0.05, pl])


def chat(text, **extra):
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


@pytest.fixture
def installed_example(tmp_path, monkeypatch):
    """The example plugin 'installed' on sys.path: its package plus a dist-info whose
    entry_points.txt is generated from the example's own pyproject.toml (what pip writes)."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    eps = project["entry-points"][ENTRY_POINT_GROUP]
    dist = tmp_path / f"sjf_plugin_example-{project['version']}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.delitem(sys.modules, "sjf_plugin_example", raising=False)
    yield eps
    sys.modules.pop("sjf_plugin_example", None)


def test_example_is_discovered_through_the_entry_point_group(installed_example, monkeypatch):
    assert installed_example == {"example": "sjf_plugin_example"}
    found = dict(discover_plugins(refresh=True))
    assert "example" in found
    s = Scheduler(predictor=FixedPredictor())  # default config: load all entry points
    assert s.plugins.manager is not None and s.plugins.manager.get_plugin("example") is found["example"]
    assert isinstance(s.make_policy(), PluginPolicy)


def test_sjf_plugins_env_selects_or_disables(installed_example, monkeypatch):
    def plugins(value):
        return Scheduler(SchedulerConfig.from_env({"SJF_PLUGINS": value}), predictor=FixedPredictor()).plugins

    assert plugins("none").manager is None and not plugins("none")
    assert plugins("example").manager.get_plugin("example") is not None
    assert plugins("").manager.get_plugin("example") is not None
    assert plugins("not_installed").manager is None
    assert Scheduler(predictor=FixedPredictor(), plugins=False).plugins.manager is None


def test_broken_entry_point_is_skipped(tmp_path, monkeypatch, caplog):
    dist = tmp_path / "broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nbroken = no_such_module_for_sjf_test\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.ERROR, logger="sjf_core.ext._hooks"):
        s = Scheduler(predictor=FixedPredictor())
    assert s.plugins.manager is None or s.plugins.manager.get_plugin("broken") is None
    assert any("broken" in r.getMessage() and "failed to load" in r.getMessage() for r in caplog.records)
    assert s.predict(chat("hello")) is not None


def test_example_predictor_and_deferral(installed_example):
    import sjf_plugin_example as ex

    with_plugin = Scheduler(predictor=FixedPredictor(), plugins=[ex])
    without = Scheduler(predictor=FixedPredictor(), plugins=False)
    p = with_plugin.predict(chat("Explain quantum tunnelling in 30 words."))
    assert p.label == "short" and p.expected_tokens == pytest.approx(40.0)
    p = with_plugin.predict(chat("Is Paris in France? Answer yes or no."))
    assert p.expected_tokens == 5.0
    p = with_plugin.predict(chat("Describe the history of Rome in three paragraphs."))
    assert p.expected_tokens == 330.0 and p.label == "medium"
    # no explicit limit: the plugin defers, so the built-in predictor's answer is used unchanged
    text = "Write a detailed essay on the causes of the First World War. " * 5
    assert with_plugin.predict(chat(text)) == without.predict(chat(text))


async def test_example_ordering_key_changes_dispatch_order(installed_example):
    import sjf_plugin_example as ex

    s = Scheduler(predictor=FixedPredictor(), policy="sjf", tau="off", plugins=[ex])
    holder = s.ticket(BACKEND, chat("x"))
    await holder.acquire()
    order: list[str] = []

    async def run(name, body):
        t = s.ticket(BACKEND, body)
        await t.acquire()
        order.append(name)
        t.release(10)

    long_text = "Write a long detailed essay about everything " * 20  # P(Long) 0.9 by FixedPredictor
    tasks = [asyncio.create_task(run("medium-length", chat("y" * 300))),
             asyncio.create_task(run("capped-long", chat(long_text, max_tokens=50)))]
    await asyncio.sleep(0.05)
    holder.release(10)
    await asyncio.gather(*tasks)
    # P(Long) of the capped request is 0.9, but max_tokens=50 < 200 makes its key 0: it goes first
    assert order == ["capped-long", "medium-length"]
    assert s.queue(BACKEND).in_flight == 0


async def test_example_event_hooks_count(installed_example):
    import sjf_plugin_example as ex
    from sjf_core._errors import AdmissionRejected

    ex.reset()
    s = Scheduler(predictor=FixedPredictor(), plugins=[ex], overload={"max_queue_depth": 1})
    async with s.ticket(BACKEND, chat("hello")) as t:
        pass
    holder = s.ticket(BACKEND, chat("a"))
    await holder.acquire()
    waiter = s.ticket(BACKEND, chat("b"))
    with pytest.raises(asyncio.TimeoutError):
        await waiter.acquire(timeout=0.01)
    queued = s.ticket(BACKEND, chat("c"))
    task = asyncio.create_task(queued.acquire())
    await asyncio.sleep(0)
    with pytest.raises(AdmissionRejected):  # overload control: the queue is full
        await s.ticket(BACKEND, chat("d")).acquire()
    holder.release()
    await task
    queued.release()
    b = BACKEND
    assert ex.COUNTS == {("enqueue", b): 4, ("dispatch", b): 3, ("complete", b): 3, ("cancel", b): 1, ("reject", b): 1}
    assert t.state == "released"


class Exploding:
    @hookimpl
    def sjf_predict(self, text):
        raise RuntimeError("boom")

    @hookimpl
    def sjf_ordering_key(self, prediction, meta, default_key, policy):
        raise RuntimeError("boom")

    @hookimpl
    def sjf_on_dispatch(self, backend, entry, wait_s):
        raise RuntimeError("boom")


class Garbage:
    @hookimpl
    def sjf_predict(self, text):
        return "long"


class Recorder:
    def __init__(self):
        self.dispatched = 0

    @hookimpl
    def sjf_on_dispatch(self, backend, entry, wait_s):
        self.dispatched += 1


@pytest.mark.parametrize("bad", [Exploding(), Garbage()], ids=["raises", "garbage"])
async def test_faulty_plugin_never_fails_a_request(bad):
    rec = Recorder()
    s = Scheduler(predictor=FixedPredictor(), plugins=[rec, bad])
    t = s.ticket(BACKEND, chat("hello"))
    assert t.entry.fallback  # unscored: FCFS order for it
    assert s.predictor_errors == 1
    await asyncio.wait_for(t.acquire(), 5)
    assert t.release(5) is True
    assert rec.dispatched == 1  # the other plugin still saw the event
    assert s.queue(BACKEND).in_flight == 0 and s.queue(BACKEND).waiting == 0


def test_invalid_plugin_is_rejected_not_fatal(caplog):
    class Misspelt:
        @hookimpl
        def sjf_on_dispatch(self, backend, entry, wait_seconds):  # not a spec argument
            pass

    with caplog.at_level(logging.ERROR, logger="sjf_core.ext._hooks"):
        pm = make_plugin_manager([Misspelt()])
    assert pm.get_plugins() == set()
    assert any("rejected" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("result,label,tokens", [
    ([0.7, 0.2, 0.1], "short", None),
    ((2, 2, 6), "long", None),
    (150, "short", 150.0),
    (900.0, "long", 900.0),
    ({"p_short": 0.1, "p_medium": 0.8, "p_long": 0.1, "expected_tokens": 420}, "medium", 420.0),
    ({"expected_tokens": 300}, "medium", 300.0),
])
def test_to_prediction_shapes(result, label, tokens):
    p = to_prediction(result)
    assert p.label == label
    assert p.p_short + p.p_medium + p.p_long == pytest.approx(1.0)
    if tokens is not None:
        assert p.expected_tokens == tokens


@pytest.mark.parametrize("bad", [[1, 2], [-1, 1, 1], [0, 0, 0], [float("nan"), 1, 1], -5, float("inf"), True,
                                 "short", {"foo": 1}, object()])
def test_to_prediction_rejects_garbage(bad):
    with pytest.raises((TypeError, ValueError)):
        to_prediction(bad)


class Tagger:
    """Implements every kind of hook, to see each one installed and undone."""

    def __init__(self):
        self.enqueued = 0

    @hookimpl
    def sjf_predict(self, text):
        return 7.0

    @hookimpl
    def sjf_ordering_key(self, prediction, meta, default_key, policy):
        return -1.0

    @hookimpl
    def sjf_on_enqueue(self, backend, entry):
        self.enqueued += 1


async def test_install_plugins_returns_a_handle_whose_undo_restores_the_scheduler():
    from sjf_core.ext._hooks import install_plugins

    s = Scheduler(predictor=FixedPredictor(), plugins=False, memory=False)
    plain = Scheduler(predictor=FixedPredictor(), plugins=False, memory=False)
    body = chat("Describe the history of Rome in three paragraphs.")
    listeners_before = list(s.listeners)
    early = s.queue("http://early/v1")  # made before the plugins were installed
    tag = Tagger()
    handle = install_plugins(s, [tag])
    assert handle and handle.installed and handle.manager.is_registered(tag)
    assert s.predict(body).expected_tokens == 7.0
    assert isinstance(s.make_policy(), PluginPolicy)
    async with s.ticket("http://early/v1", body):
        pass
    async with s.ticket(BACKEND, body):
        pass
    assert tag.enqueued == 2  # the queue made before installation sees the events too
    handle.undo()
    assert not handle.installed
    assert s.predict(body) == plain.predict(body) and s.predict(body).expected_tokens != 7.0
    assert not isinstance(s.make_policy(), PluginPolicy)
    assert s.listeners == listeners_before
    assert early.listeners == listeners_before and s.queue(BACKEND).listeners == listeners_before
    async with s.ticket("http://early/v1", body):
        pass
    assert tag.enqueued == 2  # no hook runs after undo
    handle.undo()  # idempotent
    assert s.listeners == listeners_before


def test_no_plugins_give_an_empty_handle():
    from sjf_core.ext._hooks import install_plugins

    s = Scheduler(predictor=FixedPredictor(), plugins=False, memory=False)
    handle = install_plugins(s, [])
    assert handle.manager is None and not handle and not handle.installed
    handle.undo()
    with pytest.raises(TypeError):
        install_plugins(s, 42)
