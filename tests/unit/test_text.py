"""Which text of a request body is scored (sjf_core.predict._text.scored_text)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sjf_core.predict._text import scored_text


def chat(*messages):
    return {"model": "m", "messages": list(messages)}


def test_chat_last_user_message_string():
    body = chat({"role": "system", "content": "be brief"}, {"role": "user", "content": "first"},
                {"role": "assistant", "content": "ok"}, {"role": "user", "content": "second question"})
    # the system prompt's instructions follow the last user message after a blank line
    assert scored_text(body) == "second question\n\nbe brief"


def test_chat_instructions_from_system_and_developer_are_appended_and_bounded():
    from sjf_core.predict._text import INSTRUCTION_CHARS

    body = chat({"role": "system", "content": "Reply with a 3-5 word title."},
                {"role": "developer", "content": [{"type": "text", "text": "No preamble."}]},
                {"role": "user", "content": "Here is the conversation: ..."})
    assert scored_text(body) == "Here is the conversation: ...\n\nReply with a 3-5 word title.\nNo preamble."
    long_sys = "A" * 5000 + "answer in one sentence"
    got = scored_text(chat({"role": "system", "content": long_sys}, {"role": "user", "content": "q"}))
    instr = got[len("q\n\n"):]
    assert got.startswith("q\n\n") and len(instr) == INSTRUCTION_CHARS + 1
    assert instr.endswith("answer in one sentence") and instr.startswith("AAAA")
    # an assistant turn or a whitespace-only system prompt adds nothing
    assert scored_text(chat({"role": "system", "content": "  "}, {"role": "assistant", "content": "x"},
                            {"role": "user", "content": "q"})) == "q"


def test_responses_instructions_field_is_appended():
    assert scored_text({"input": "q", "instructions": "one word"}, "responses") == "q\n\none word"
    assert scored_text({"input": [{"role": "user", "content": "q"}], "instructions": "be terse"},
                       "/v1/responses") == "q\n\nbe terse"
    assert scored_text({"input": "q", "instructions": 5}, "responses") == "q"


def test_chat_content_parts_join_text_and_ignore_media():
    body = chat({"role": "user", "content": [
        {"type": "text", "text": "describe this"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "file", "file": {"file_id": "f1"}},
        {"type": "text", "text": "in detail"},
    ]})
    assert scored_text(body) == "describe this\nin detail"


def test_chat_only_media_parts_is_unscorable():
    body = chat({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]})
    assert scored_text(body) is None


@pytest.mark.parametrize("content", [None, "", "   \n", [], 5, {"weird": 1}])
def test_chat_missing_or_empty_content(content):
    msg = {"role": "user"} if content is None else {"role": "user", "content": content}
    assert scored_text(chat(msg)) is None


def test_chat_last_user_wins_even_if_it_is_empty():
    # The request being scored is the last user turn; an earlier turn is not a stand-in.
    body = chat({"role": "user", "content": "old question"}, {"role": "user", "content": None})
    assert scored_text(body) is None


def test_chat_without_user_message_falls_back_to_system():
    assert scored_text(chat({"role": "system", "content": "write a poem"})) == "write a poem"


def test_legacy_completions_prompt():
    assert scored_text({"prompt": "once upon a time"}, "completions") == "once upon a time"
    assert scored_text({"prompt": ["a", "b"]}, "/v1/completions") == "a\nb"
    assert scored_text({"prompt": [1, 2, 3]}, "completions") is None
    assert scored_text({"prompt": [[1, 2], [3]]}, "completions") is None
    assert scored_text({"prompt": None}, "completions") is None


def test_responses_input():
    assert scored_text({"input": "tell me a story"}, "responses") == "tell me a story"
    body = {"input": [
        {"role": "user", "content": [{"type": "input_text", "text": "hello"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "write an essay"},
                                     {"type": "input_image", "image_url": "http://x"}]},
    ]}
    assert scored_text(body, "/v1/responses") == "write an essay"
    assert scored_text({"input": [{"type": "input_text", "text": "bare part"}]}, "responses") == "bare part"
    assert scored_text({"input": ["plain string item"]}, "responses") == "plain string item"


def test_endpoint_selects_field():
    body = {"messages": [{"role": "user", "content": "chat"}], "prompt": "legacy", "input": "resp"}
    assert scored_text(body, "chat/completions") == "chat"
    assert scored_text(body, "completions") == "legacy"
    assert scored_text(body, "responses") == "resp"
    assert scored_text(body, "something/else") == "chat"


@pytest.mark.parametrize("body", [None, "text", 42, [1, 2], b"bytes", {"messages": "nope"}, {"messages": [None, 3]},
                                  {"messages": [{"role": "user", "content": [None, 1]}]}, {"messages": {"role": "user"}}])
def test_non_dict_and_odd_bodies_are_unscorable(body):
    assert scored_text(body) is None


def test_lone_surrogates_are_replaced_and_encodable():
    text = scored_text(chat({"role": "user", "content": "bad \ud800 char"}))
    assert text is not None
    text.encode("utf-8")  # must not raise
    assert text.startswith("bad ")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["role", "content", "type", "text", "messages", "prompt", "input", "value"]) | st.text(max_size=5),
        children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(body=json_values, endpoint=st.sampled_from(["chat/completions", "completions", "responses", "", "x"]))
def test_never_raises(body, endpoint):
    out = scored_text(body, endpoint)
    assert out is None or (isinstance(out, str) and out.strip())
    if out is not None:
        out.encode("utf-8")
