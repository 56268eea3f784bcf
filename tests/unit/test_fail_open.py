"""litellm_sjf's fail-open (DESIGN.md invariant 5): one context manager, and the hooks'
deliberate refusals (HTTP 429 / 409) that it must not swallow.

The hooks are called directly with LiteLLM-shaped data on a real in-process scheduler
(no proxy, no sockets: nothing here reaches a backend).
"""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from fastapi import HTTPException

from litellm_sjf._fail_open import REFUSALS, fail_open
from litellm_sjf._stats import HandlerStats
from litellm_sjf.handler import SJFHandler
from litellm_sjf.settings import PluginSettings
from sjf_core._errors import AdmissionRejected, Superseded

SECRET = "my secret prompt text 4711"


# ---- the context manager ------------------------------------------------------------------
def test_fail_open_swallows_counts_and_logs_an_internal_error_without_its_text(caplog):
    stats = HandlerStats()
    reached = []
    with caplog.at_level(logging.DEBUG, logger="litellm_sjf"):
        with fail_open(stats, "litellm_sjf test hook failed"):
            reached.append("body")
            raise RuntimeError(SECRET)
        reached.append("after")  # the with statement swallowed it: execution goes on
    assert reached == ["body", "after"]
    assert stats.fail_open == 1 and stats.as_dict()["fail_open"] == 1
    records = [r for r in caplog.records if r.name == "litellm_sjf"]
    assert len(records) == 1 and records[0].levelno == logging.ERROR
    msg = records[0].getMessage()
    assert "litellm_sjf test hook failed" in msg and "RuntimeError" in msg and "test_fail_open.py:" in msg
    assert SECRET not in caplog.text and records[0].exc_info is None  # no message, no traceback


def test_fail_open_counts_each_fault_and_leaves_a_clean_body_alone(caplog):
    stats = HandlerStats()
    for exc in (KeyError(SECRET), TypeError(SECRET), ValueError(SECRET)):
        with fail_open(stats, "fault"):
            raise exc
    with fail_open(stats, "no fault"):
        pass
    assert stats.fail_open == 3
    assert SECRET not in caplog.text


@pytest.mark.parametrize("exc", [AdmissionRejected(2.5, "queue_depth", "b"), Superseded("b")])
def test_fail_open_does_not_swallow_the_deliberate_refusals(exc):
    assert isinstance(exc, REFUSALS)
    stats = HandlerStats()
    with pytest.raises(type(exc)) as info:
        with fail_open(stats, "refusal"):
            raise exc
    assert info.value is exc and stats.fail_open == 0


async def test_fail_open_lets_a_cancelled_wait_through():
    stats = HandlerStats()
    started = asyncio.Event()

    async def waiter():
        with fail_open(stats, "wait"):
            started.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(waiter())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stats.fail_open == 0


# ---- the handler: construction, and the refusals as HTTP errors ------------------------------
def test_constructing_the_handler_starts_nothing():
    before = {t.name for t in threading.enumerate()}
    h = SJFHandler(PluginSettings(predictor=None, tau="off", status_port=0))
    new = {t.name for t in threading.enumerate()} - before
    assert not {"sjf-preload", "litellm-sjf-status"} & new
    assert h._status_server is None and h._sched.peek() is None  # no server, no scheduler yet
    assert h.status()["backends"] == {} and h.status()["counters"]["fail_open"] == 0


def _request(cid: str, supersede: str | None = None) -> dict:
    headers = {"x-sjf-supersede": supersede} if supersede else {}
    return {"litellm_call_id": cid, "model": "m", "messages": [{"role": "user", "content": f"question {cid}"}],
            "proxy_server_request": {"headers": headers}}


async def _until(pred, steps: int = 1000):
    for i in range(steps + 500):
        if pred():
            return True
        await asyncio.sleep(0 if i < steps else 0.01)  # the first request of a backend reads its box (docs/boxes.md)
    return pred()


async def _queue(h: SJFHandler, data: dict) -> asyncio.Task:
    await h.async_pre_call_hook(None, None, data, "acompletion")
    return asyncio.ensure_future(h.async_pre_call_deployment_hook({**data, "api_base": "http://x/v1"}, None))


async def test_overload_refusal_is_an_http_429_not_a_fail_open():
    h = SJFHandler(PluginSettings(predictor=None, tau="off", overload={"max_queue_depth": 1}))
    holder = await _queue(h, _request("a"))
    assert await _until(holder.done) and holder.result() is None  # admitted
    waiter = await _queue(h, _request("b"))
    assert await _until(lambda: h.status()["backends"].get("http://x/v1", {}).get("waiting") == 1)
    refused = await _queue(h, _request("c"))
    with pytest.raises(HTTPException) as info:
        await refused
    assert info.value.status_code == 429 and int(info.value.headers["Retry-After"]) >= 1
    c = h.status()["counters"]
    assert c["rejected_429"] == 1 and c["fail_open"] == 0 and h.status()["tracked_calls"] == 2
    await h.async_post_call_success_hook(_request("a"), None, None)  # the slot passes to "b"
    assert await _until(waiter.done) and waiter.result() is None
    await h.async_post_call_success_hook(_request("b"), None, None)
    q = h.status()["backends"]["http://x/v1"]
    assert q["in_flight"] == 0 and q["waiting"] == 0 and h.status()["tracked_calls"] == 0


async def test_superseded_waiter_gets_an_http_409_not_a_fail_open():
    h = SJFHandler(PluginSettings(predictor=None, tau="off"))
    holder = await _queue(h, _request("a"))
    assert await _until(holder.done)
    old = await _queue(h, _request("b", supersede="draft-1"))
    assert await _until(lambda: h.status()["backends"]["http://x/v1"]["waiting"] == 1)
    new = await _queue(h, _request("c", supersede="draft-1"))
    with pytest.raises(HTTPException) as info:
        await old
    assert info.value.status_code == 409
    c = h.status()["counters"]
    assert c["superseded_409"] == 1 and c["fail_open"] == 0
    await h.async_post_call_success_hook(_request("a"), None, None)
    assert await _until(new.done) and new.result() is None  # the replacement runs
    await h.async_post_call_success_hook(_request("c", supersede="draft-1"), None, None)
    assert h.status()["backends"]["http://x/v1"]["in_flight"] == 0 and h.status()["tracked_calls"] == 0
