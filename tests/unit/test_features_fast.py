"""The C accelerator (sjf_core.predict._scan) computes exactly the Python reference features."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sjf_core.predict import _fastscan as fastscan
from sjf_core.predict._features import HEAD_CHARS, TAIL_CHARS, extract_v1, extract_v1_py
from sjf_core.predict._features_v2 import FEATURE_NAMES_V2, extract_v2, extract_v2_py



def _why_unavailable() -> str:
    try:
        from sjf_core.predict import _scan  # noqa: F401
    except ImportError as exc:
        return f"sjf_core.predict._scan was not built (pip install builds it): {exc}"
    return "sjf_core.predict._scan is built but fastscan refused it: the v2 column layout no longer matches _scan.c"


@pytest.fixture(autouse=True)
def _accelerator():
    """Run only with the accelerator. Forced off (SJF_NO_C_SCAN): skip. Not built: skip
    locally, fail in CI (the install builds it there). Built but refused (a layout that no
    longer matches the C code): always fail."""
    if fastscan.available():
        return
    if os.environ.get("SJF_NO_C_SCAN"):
        pytest.skip("SJF_NO_C_SCAN is set: the C accelerator is off on purpose")
    why = _why_unavailable()
    if os.environ.get("CI") or "refused" in why:
        pytest.fail(why, pytrace=False)
    pytest.skip(why)

CASES = [
    "", " ", "?", "What is 2+2?", "Briefly, explain how a Python function and a class differ, and list 3 examples?",
    "Write a 2,000-word essay about cats.\n\nList 10 ideas? Is it ok?\n", "tl;dr this: ...", "give me a one-liner",
    "in 5 words", "no more than 3 sentences", "under 200 words please", "IN 50 WORDS", "summarise in 3 sentences",
    "```python\nprint(1)\n```\nwhy does this fail?", 'Rewrite: """some text"""\n> quoted\nnote:\n',
    "Summarize the following:\n\n" + "lorem ipsum dolor sit amet, " * 600 + "\n\nWhat is the main point?",
    "日本語のテキストです。何ですか？", "Привет, как дела? Напиши эссе.", "What’s “this” — a test… «ok»",
    "list 5 tips, give me 12 names, three paragraphs, a dozen ideas, 1,500 words, 10-15 pages",
    "yes or no: is it one word?", "Continue the story. Roleplay as a pirate.", "\ud800 lone surrogate",
    "x" * (HEAD_CHARS + TAIL_CHARS + 10), "word " * 3000, "and and and , ; ;; because but",
]


@pytest.mark.parametrize("text", CASES)
def test_fast_equals_python(text):
    np.testing.assert_array_equal(extract_v1(text), extract_v1_py(text))
    a, b = extract_v2(text), extract_v2_py(text)
    diff = [FEATURE_NAMES_V2[i] for i in np.flatnonzero(a != b)]
    assert not diff, diff


_pieces = st.sampled_from([
    " ", "\n", "\n\n", ",", ";", "?", ":", "```", '"""', "\n>", " and ", " but ", "-", "’", "“", "。", "？",
    "write", "list", "essay", "words", "word", "in", "no more than", "under", "one", "liner", "tl;dr", "2", "000",
    "10", "five", "steps", "what", "Is", "code", "Python", "日本", "да", "é", "_x", "A",
])


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.one_of(_pieces, st.text(max_size=6)), max_size=60))
def test_fast_equals_python_random(parts):
    text = "".join(parts)
    np.testing.assert_array_equal(extract_v1(text), extract_v1_py(text))
    np.testing.assert_array_equal(extract_v2(text), extract_v2_py(text))
