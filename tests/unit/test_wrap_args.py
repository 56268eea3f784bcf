"""``openai_sjf.wrap`` arguments: errors that name the setting, ``promotion=`` as in the plugin,
and a re-wrap warning that labels every value it shows. No sockets: wrapping sends nothing."""

from __future__ import annotations

import uuid
import warnings

import pytest

openai = pytest.importorskip("openai")
import openai_sjf  # noqa: E402
from openai_sjf._registry import _reset_for_tests  # noqa: E402


@pytest.fixture
def client():
    _reset_for_tests()
    yield openai.AsyncOpenAI(base_url=f"http://127.0.0.1:9/{uuid.uuid4().hex[:8]}/v1", api_key="x")
    _reset_for_tests()


@pytest.mark.parametrize("bad", ["abc", "2", 0, -2, 1.5, True, [1]])
def test_bad_slots_name_the_setting(client, bad):
    with pytest.raises(ValueError, match=r"slots must be an integer >= 1.*got"):
        openai_sjf.wrap(client, slots=bad)


def test_promotion_reaches_the_queue_like_the_plugins_setting(client):
    q = openai_sjf.queue_of(openai_sjf.wrap(client, promotion="strict"))
    assert q.policy.promotion == "strict"
    with pytest.raises(ValueError, match="promotion"):
        openai_sjf.wrap(openai.AsyncOpenAI(base_url="http://127.0.0.1:9/other/v1", api_key="x"), promotion="nope")
    with pytest.raises(ValueError, match="scheduler= or .*promotion"):
        openai_sjf.wrap(client, scheduler=q, promotion="strict")


def test_rewrap_warning_labels_each_value(client):
    openai_sjf.wrap(client, slots=2, promotion="strict", default_priority=1, default_deadline_s=30)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        openai_sjf.wrap(client, slots=3, tau="off")
    msg = str(rec[0].message)
    assert "(slots=2, default_priority=1, default_deadline_s=30, promotion='strict')" in msg
    assert "(slots=3, tau='off')" in msg
