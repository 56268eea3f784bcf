"""The box emulator's settings and its shared speed (sjf_lab.box), on a virtual clock."""

from __future__ import annotations

import pytest

from sjf_lab.box.config import BoxConfig, ModelSpec, keep_alive_seconds, ollama_name, parse_model_spec
from sjf_lab.box.speed import SharedSpeed


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_answers_side_by_side_split_the_box_and_speed_up_when_one_ends():
    clock = Clock()
    box = SharedSpeed(share=1.0, clock=clock)
    chat = box.start(100.0, "chat")
    clock.t = 1.0
    assert chat.tokens() == pytest.approx(100.0)  # alone: its own speed
    auto = box.start(400.0, "auto")
    clock.t = 2.0  # two answers: each at half its own speed
    assert chat.tokens() == pytest.approx(150.0) and auto.tokens() == pytest.approx(200.0)
    auto.close()
    clock.t = 3.0
    assert chat.tokens() == pytest.approx(250.0)
    assert chat.due() == 251  # the first token is due at once, as in the emulator


@pytest.mark.parametrize("share, factor", [(0.0, 1.0), (0.5, 1 / 2.0), (1.0, 1 / 3.0)])
def test_share_sets_how_much_three_answers_slow_each_other(share, factor):
    box = SharedSpeed(share=share, clock=Clock())
    for _ in range(3):
        box.start(10.0, "m")
    assert box.factor() == pytest.approx(factor)


def test_share_by_runners_lets_one_runners_slots_batch():
    box = SharedSpeed(share=1.0, share_by="runners", clock=Clock())
    box.start(10.0, "chat")
    box.start(10.0, "chat")
    assert box.running() == 1 and box.factor() == 1.0
    box.start(10.0, "auto")
    assert box.running() == 2 and box.factor() == pytest.approx(0.5)


def test_a_closed_pace_closes_once():
    box = SharedSpeed(share=1.0, clock=Clock())
    a, b = box.start(10.0), box.start(10.0)
    a.close()
    a.close()
    assert box.running() == 1 and b.rate == 10.0


def test_model_specs_from_flags_and_dicts():
    m = parse_model_spec("qwen2.5:0.5b,tps=400,load=3,slots=2,size_gb=0.4")
    assert (m.name, m.tokens_per_s, m.load_s, m.slots, m.size_gb) == ("qwen2.5:0.5b", 400.0, 3.0, 2, 0.4)
    e = parse_model_spec("embed,kind=embedding")
    assert e.runner_slots(4) == 1 and e.speed(200.0) == 200.0  # Ollama: embedding models get one slot
    cfg = BoxConfig.from_dict({"models": ["chat,tps=200", {"name": "auto", "tokens_per_s": 300}], "max_loaded": 1})
    assert [x.name for x in cfg.models] == ["chat", "auto"] and cfg.max_loaded == 1


def test_a_request_may_name_a_model_with_or_without_ollamas_latest_tag():
    cfg = BoxConfig(models=(ModelSpec("chat"), ModelSpec("code:7b")))
    assert cfg.find("chat:latest").name == "chat" and cfg.find("chat").name == "chat"
    assert cfg.find("code:7b").name == "code:7b" and cfg.find("code") is None and cfg.find(None) is None
    assert ollama_name("chat") == "chat:latest" and ollama_name("code:7b") == "code:7b"


@pytest.mark.parametrize("kw, named", [
    ({"models": ()}, "models"),
    ({"models": ("a", "a")}, "distinct"),
    ({"models": ("a",), "max_loaded": 0}, "max_loaded"),
    ({"models": ("a",), "share": 1.5}, "share"),
    ({"models": ("a",), "pending": "lifo"}, "pending"),
    ({"models": ("a",), "evict": "random"}, "evict"),
    ({"models": ("a",), "preload": ("b",)}, "preload"),
    ({"models": ("a",), "memory_gb": 0}, "memory_gb"),
    ({"models": ({"name": "a", "load_s": -1},)}, "load_s"),
    ({"models": ({"name": "a", "kind": "vision"},)}, "kind"),
    ({"models": ({"name": "a", "speed": 3},)}, "unknown key"),
])
def test_a_bad_box_setting_names_itself(kw, named):
    with pytest.raises(ValueError, match=named):
        BoxConfig.from_dict(kw)


def test_an_unknown_box_key_is_refused():
    with pytest.raises(ValueError, match="unknown key"):
        BoxConfig.from_dict({"models": ["a"], "max_models": 2})


@pytest.mark.parametrize("value, seconds", [
    (0, 0.0), (30, 30.0), ("300", 300.0), ("5m", 300.0), ("1h30m", 5400.0), ("-1", -1.0), ("-1m", -60.0),
    ("250ms", 0.25), (None, None), ("soon", None), (True, None),
])
def test_ollama_keep_alive_values(value, seconds):
    got = keep_alive_seconds(value)
    assert got == (pytest.approx(seconds) if seconds is not None else None)
