"""The length memory end to end: a real LiteLLM proxy subprocess with the plugin, the real
openai SDK, the emulator as backend. The proxy learns an app from its own answers: after a
dozen answered tagging tasks, a new tagging task over a pasted essay request (which the base
predictor alone ranks *after* a plain question) is served first; /sjf/status shows it. The app's
prompt states no answer size (a title template that does is read by the base itself since
issue 23: tests/unit/test_stated.py)."""

from __future__ import annotations

import asyncio

import pytest

from sjf_lab.emulator import EmulatorThread, short_hash
from sjf_core.predict._predictor import load_predictor

from test_litellm_plugin import HOLD, Harness, _start, until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PASTED = [f"Write a long, detailed essay of at least 1500 words about topic number {i}: the history, the "
          f"economics and the future of {w}, with sections, examples and a conclusion."
          for i, w in enumerate(["railways", "coffee", "printing", "vaccines", "the internet", "shipping", "salt",
                                 "glass", "paper", "bicycles", "radio", "cotton", "maps", "clocks"])]


def tags_message(pasted: str) -> str:
    return f'Suggest tags for the text below.\n\n"""\n{pasted}\n"""'


QUESTION = "In two or three sentences, what does a compiler do?"
LEARN = [tags_message(p) for p in PASTED[:12]]
NEW_TASK = tags_message(PASTED[13])
TRACE = ([{"prompt": p, "answer_tokens": 12} for p in LEARN + [NEW_TASK]]
         + [{"prompt": QUESTION, "answer_tokens": 80}, {"prompt": HOLD, "answer_tokens": 5, "fault": "hold"}])


@pytest.fixture(scope="module")
def proxy():
    emus = {"a": EmulatorThread(tokens_per_s=2000, slots=1, trace_records=TRACE)}
    p = None
    try:
        p, port = _start(emus, {"SJF_TAU": "off", "SJF_PROMOTION": "strict"})
        yield Harness(p, port, emus)
    finally:
        if p is not None:
            p.stop()
        for e in emus.values():
            e.stop()


async def test_the_proxy_learns_an_app_from_its_answers(proxy):
    h = proxy
    base = load_predictor()
    cold_task, question = base.predict(NEW_TASK).expected_tokens, base.predict(QUESTION).expected_tokens
    assert question < cold_task, "precondition: the base alone ranks the new tagging task after the question"
    for p in LEARN:  # the app is answered a dozen times (one at a time)
        assert await h.chat("a", p) == 12
    st = h.status()["memory"]
    assert st["enabled"] and st["counters"]["observed"] >= len(LEARN)
    assert st["online_ranking_accuracy"]["n"] >= len(LEARN)
    # burst: hold the backend, submit the question first, then the new tagging task
    h.emus["a"].reset()
    holder = asyncio.create_task(h.chat("a", HOLD))
    assert await until(lambda: h.emus["a"].stats()["held"] == 1), h.dump()
    q = asyncio.create_task(h.chat("a", QUESTION))
    assert await until(lambda: h.queue("a")["waiting"] == 1), h.dump()
    t = asyncio.create_task(h.chat("a", NEW_TASK))
    assert await until(lambda: h.queue("a")["waiting"] == 2), h.dump()
    h.emus["a"].release_holds()
    assert await asyncio.gather(holder, q, t) == [5, 80, 12]
    served = [o["hash"] for o in h.emus["a"].stats()["order"]]
    assert served == [short_hash(HOLD), short_hash(NEW_TASK), short_hash(QUESTION)], \
        "the learnt tagging task must be served before the plain question"
    st = h.status()["memory"]
    assert st["counters"]["with_evidence"] >= 1
    assert set(st["key_kinds_used"]) & {"head", "tail", "outside"}
