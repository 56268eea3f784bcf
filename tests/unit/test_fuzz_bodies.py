"""Property-based fuzzing (hypothesis) of request bodies and message shapes at the core level.

Properties:

* :func:`sjf_core.predict._text.scored_text` never raises and returns None or a non-blank,
  UTF-8-encodable string;
* :func:`sjf_core.predict._meta.request_meta` never raises and returns sane values;
* :meth:`Scheduler.ticket` never raises for any body, endpoint or headers (with the
  shipped ONNX predictor), its prediction is a valid probability vector or the ticket
  is unscored, and every ticket, acquired then released, cancelled while queued, or
  timed out, leaves the queue with nothing in flight and nothing waiting.

The number of examples per property is ``$SJF_FUZZ_EXAMPLES`` (default 200); run with
``--hypothesis-show-statistics`` to see the case counts.
"""

from __future__ import annotations

import asyncio
import math
import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sjf_core import Scheduler
from sjf_core.predict._meta import request_meta
from sjf_core.predict._text import scored_text

N = int(os.environ.get("SJF_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=N, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ---- strategies ---------------------------------------------------------------------------

# any code point including lone surrogates (U+D800–U+DFFF), controls, RTL scripts, emoji
any_text = st.text(alphabet=st.characters(codec=None, categories=None), max_size=200)
scripts = st.sampled_from([
    "你好，请解释一下量子计算。", "日本語で短く答えてください。", "Объясните, пожалуйста, теорию относительности.",
    "اشرح لي الحوسبة الكمومية", "mixed 中文 русский عربى 日本語 text", "\ud800\udfff lone \udc00 surrogates",
    "   \t\n  ", "", "\x00\x01\x02", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 😀 👍🏽",
])
texty = st.one_of(any_text, scripts)
json_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), texty)
json_value = st.recursive(json_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=12)

part = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": json_value}),
    st.fixed_dictionaries({"type": st.just("input_text"), "text": texty}),
    st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": texty})}),
    st.fixed_dictionaries({"type": st.just("input_audio"), "input_audio": st.fixed_dictionaries(
        {"data": st.text(max_size=20), "format": st.sampled_from(["wav", "mp3"])})}),
    st.fixed_dictionaries({"type": st.just("file"), "file": st.dictionaries(st.text(max_size=5), json_value, max_size=2)}),
    st.dictionaries(st.text(max_size=8), json_value, max_size=3),
    texty, st.integers(), st.none(),
)
content = st.one_of(st.none(), texty, st.lists(part, max_size=5), part, json_value)
role = st.one_of(st.sampled_from(["user", "assistant", "system", "developer", "tool", "function"]), json_value)
message = st.one_of(
    st.fixed_dictionaries({"role": role, "content": content},
                          optional={"name": texty, "tool_call_id": texty, "tool_calls": json_value}),
    st.fixed_dictionaries({"type": st.sampled_from(["input_text", "message", "function_call_output"]), "text": texty}),
    texty, json_value,
)
messages = st.one_of(st.lists(message, max_size=6), json_value)
prompt = st.one_of(texty, st.lists(texty, max_size=4), st.lists(st.integers(), max_size=6),
                   st.lists(st.lists(st.integers(), max_size=3), max_size=3), json_value)
endpoint = st.one_of(st.sampled_from(["chat/completions", "/v1/chat/completions", "completions", "/v1/completions",
                                      "responses", "/v1/responses", "embeddings", "images/generations",
                                      "audio/speech", "", "weird"]), st.text(max_size=20))
body = st.one_of(
    st.fixed_dictionaries({}, optional={
        "model": json_value, "messages": messages, "prompt": prompt, "input": st.one_of(texty, st.lists(message, max_size=4), json_value),
        "n": json_value, "max_tokens": json_value, "max_completion_tokens": json_value, "max_output_tokens": json_value,
        "stream": json_value, "metadata": st.one_of(
            st.fixed_dictionaries({}, optional={"sjf_priority": json_value, "sjf_deadline_s": json_value}), json_value),
    }),
    json_value,
)
headers = st.one_of(st.none(), st.dictionaries(st.one_of(st.sampled_from(["x-sjf-priority", "x-sjf-deadline-s", "X-SJF-PRIORITY"]),
                                                         st.text(max_size=10)), st.text(max_size=20), max_size=3))


# ---- properties ---------------------------------------------------------------------------

@FUZZ
@given(body=body, endpoint=endpoint)
def test_scored_text_never_raises(body, endpoint):
    text = scored_text(body, endpoint)
    assert text is None or (isinstance(text, str) and text.strip() != "")
    if text is not None:
        text.encode("utf-8")  # must be encodable: lone surrogates replaced


@FUZZ
@given(messages=st.lists(message, min_size=1, max_size=6))
@example(messages=[{"role": "user", "content": None}, {"role": "user", "content": "0"}, {"role": "system", "content": "0"}])
def test_message_shapes_scored_like_the_last_user_message(messages):
    text = scored_text({"messages": messages}, "chat/completions")
    last = None  # the last user-like item: a user message or a bare input_text item
    for m in reversed(messages):
        if isinstance(m, dict) and (m.get("role") == "user" or m.get("type") in ("text", "input_text", "output_text")):
            last = m
            break
    if last is not None and last.get("role") == "user" and isinstance(last.get("content"), str):
        c = last["content"]
        expect = c.encode("utf-8", "replace").decode("utf-8")
        instructed = any(isinstance(m, dict) and m.get("role") in ("system", "developer") for m in messages)
        if not instructed:
            assert text == (expect if expect.strip() else None)
        elif expect.strip():
            # system/developer instructions are appended after a blank line (DESIGN.md "Prediction")
            assert text == expect or text.startswith(expect + "\n\n")


@FUZZ
@given(body=body, headers=headers)
def test_request_meta_never_raises(body, headers):
    m = request_meta(body, headers)
    assert m.max_tokens is None or m.max_tokens > 0
    assert -100 <= m.priority <= 100
    assert m.deadline_s is None or (math.isfinite(m.deadline_s) and m.deadline_s > 0)


@pytest.fixture(scope="module")
def sched():
    s = Scheduler(predictor="default", plugins=False)
    assert s.predictor is not None  # the shipped model is what gets fuzzed
    return s


@pytest.fixture(scope="module")
def loop():
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


@FUZZ
@given(body=body, endpoint=endpoint, headers=headers, backend=st.one_of(st.none(), texty, json_value),
       fate=st.sampled_from(["release", "release_tokens", "cancel_queued", "timeout_queued", "context"]),
       answer=st.one_of(st.none(), st.integers(min_value=-5, max_value=5000)))
def test_ticket_never_raises_and_always_releases(sched, loop, body, endpoint, headers, backend, fate, answer):
    errors_before = sched.predictor_errors
    t = sched.ticket(backend, body, endpoint, headers)
    q = t.queue
    p = t.entry
    if not p.fallback:
        assert math.isfinite(p.key) and p.klass in (0, 1, 2) and math.isfinite(p.expected_tokens)
    assert sched.predictor_errors == errors_before  # the shipped model never raised

    async def drive():
        if fate in ("release", "release_tokens"):
            await asyncio.wait_for(t.acquire(), 5)
            assert q.in_flight == 1
            assert t.release(answer if fate == "release_tokens" else None) is True
            assert t.release(answer) is False  # idempotent
        elif fate == "context":
            async with t:
                assert q.in_flight == 1
        else:  # a holder keeps the slot; the fuzzed ticket waits and leaves
            holder = q.ticket(None)
            await holder.acquire()
            if fate == "cancel_queued":
                task = asyncio.create_task(t.acquire())
                await asyncio.sleep(0)
                assert q.waiting == 1
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            else:
                with pytest.raises(asyncio.TimeoutError):
                    await t.acquire(timeout=0.001)
            holder.release()
        assert q.in_flight == 0 and q.waiting == 0

    loop.run_until_complete(drive())
