"""The paper's 19 v1 features (sjf_core.predict._features)."""

from __future__ import annotations

import numpy as np
import pytest

from sjf_core.predict._features import FEATURE_NAMES, HEAD_CHARS, TAIL_CHARS, extract_v1, extract_v1_many, window

PUBLISHED_ORDER = (
    "prompt_token_len", "has_code_keyword", "has_length_constraint", "ends_with_question", "has_format_keyword",
    "clause_count", "verb_what", "verb_write", "verb_explain", "verb_summarize", "verb_how", "verb_list",
    "verb_implement", "verb_compare", "verb_describe", "verb_generate", "verb_why", "verb_define", "verb_other",
)


def f(text):
    return dict(zip(FEATURE_NAMES, extract_v1(text).tolist()))


def test_names_are_the_published_layout():
    assert FEATURE_NAMES == PUBLISHED_ORDER


def test_shape_dtype():
    x = extract_v1("hello")
    assert x.shape == (19,) and x.dtype == np.float32
    xs = extract_v1_many(["a", "b c", "Write code"])
    assert xs.shape == (3, 19) and xs.dtype == np.float32
    np.testing.assert_array_equal(xs[2], extract_v1("Write code"))


def test_token_len_is_chars_div_4():
    assert f("x" * 41)["prompt_token_len"] == 10
    assert f("é" * 8)["prompt_token_len"] == 2  # characters, not bytes


def test_example_vector():
    x = f("Briefly, explain how a Python function and a class differ, and list 3 examples in a table?")
    assert x["has_code_keyword"] == 1  # function, class
    assert x["has_length_constraint"] == 1  # briefly
    assert x["ends_with_question"] == 1
    assert x["has_format_keyword"] == 1  # table / list
    assert x["clause_count"] == 4  # 2 commas + 2 " and "
    # explain outranks list and how in the verb priority
    assert [k for k, v in x.items() if k.startswith("verb_") and v] == ["verb_explain"]


@pytest.mark.parametrize("text,verb", [
    ("Summarize this article and explain it", "verb_summarize"),
    ("What is the capital of France?", "verb_what"),
    ("Write a poem", "verb_write"),
    ("Translate this to French", "verb_other"),  # translate has no column
    ("Hello there", "verb_other"),
    ("Could you describe the moon", "verb_describe"),
    ("WHY is the sky blue", "verb_why"),
    ("generating ideas, defining terms", "verb_generate"),
])
def test_verb_one_hot(text, verb):
    x = f(text)
    hot = [k for k, v in x.items() if k.startswith("verb_") and v]
    assert hot == [verb]


def test_keywords_need_word_boundaries():
    x = f("A classic codex of programmatic whatnot")
    assert x["has_code_keyword"] == 0
    assert x["verb_other"] == 1


@pytest.mark.parametrize("text", ["in 50 words", "no more than 3", "tl;dr please", "a one-liner", "under 100 words",
                                  "in 2 sentences"])
def test_length_constraints(text):
    assert f(text)["has_length_constraint"] == 1


def test_ends_with_question_ignores_trailing_space():
    assert f("Is it?  \n")["ends_with_question"] == 1
    assert f("Is it? No.")["ends_with_question"] == 0


def test_empty_and_odd_text():
    x = extract_v1("")
    assert x[0] == 0 and x[FEATURE_NAMES.index("verb_other")] == 1 and x.sum() == 1
    extract_v1("\ud800 lone surrogate \x00 nul")  # never raises on odd characters
    with pytest.raises(TypeError):
        extract_v1(None)


def test_huge_prompt_scans_only_head_and_tail():
    filler = "lorem ipsum dolor sit amet " * 40_000  # ~1 MB
    buried = filler[:500_000] + " write some sql code, and explain " + filler[500_000:]
    x = f(buried)
    assert x["prompt_token_len"] == len(buried) // 4  # length uses the whole text
    assert x["has_code_keyword"] == 0 and x["verb_other"] == 1  # the middle is not scanned
    # the instruction at the start or end is seen
    assert f("Write SQL code for this: " + filler)["has_code_keyword"] == 1
    assert f(filler + " Summarize the above.")["verb_summarize"] == 1
    assert len(window(buried)) == HEAD_CHARS + TAIL_CHARS + 1


def test_short_text_window_is_identity():
    t = "abc " * 100
    assert window(t) is t
