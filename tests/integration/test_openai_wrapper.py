"""openai_sjf.wrap: the real openai SDK over real sockets against the backend emulator.

Every test drives ``openai.AsyncOpenAI`` (wrapped) against an in-process
:class:`sjf_lab.emulator.Emulator` (a real aiohttp server on 127.0.0.1). The
emulator's own counters (``max_in_flight``, service ``order``) are the ground
truth for what reached the backend.

The file runs against openai 1.x/2.x (on ``httpx``) and 3.x (on ``httpx2``): ``SDK_HTTP``
is the HTTP library of the installed SDK's default client, and the tests that bring
their own ``http_client`` run once per library the installed SDK accepts (``USER_HTTP``).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import sys
import warnings

import httpx
import openai
import pytest
from backend_truth import may_exceed_slots
from waits import wait_until as until

import openai_sjf
from openai_sjf import _registry as registry
from sjf_core.admission._local import QueueEvents
from sjf_core.admission._probe import PROBE_HEADER, PROBE_PROMPT
from sjf_lab.emulator import REQUEST_ID_HEADER, short_hash
from sjf_core.predict._prediction import Prediction
from sjf_core._scheduler import Scheduler

FAULT = "x-emulator-fault"


def _sdk_http_module():
    """The HTTP library (module) of the installed SDK's default async client."""
    for c in openai.DefaultAsyncHttpxClient.__mro__:
        if c.__name__ == "AsyncClient" and c.__module__.split(".")[0] in ("httpx", "httpx2"):
            return sys.modules[c.__module__.split(".")[0]]
    raise AssertionError(f"the openai SDK's default client is on neither httpx nor httpx2: "
                         f"{openai.DefaultAsyncHttpxClient.__mro__}")


def _accepted_user_http_modules():
    """httpx, and httpx2 where it is installed and the SDK accepts an httpx2.AsyncClient."""
    mods = [httpx]
    try:
        httpx2 = importlib.import_module("httpx2")
    except ImportError:
        return mods
    try:
        openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", http_client=httpx2.AsyncClient())
    except TypeError:  # openai 1.x: httpx only
        return mods
    return mods + [httpx2]


SDK_HTTP = _sdk_http_module()
USER_HTTP = _accepted_user_http_modules()


class KeywordPredictor:
    """Deterministic stand-in predictor: "long" in the prompt → P(Long) 0.9, else 0.1."""

    def predict(self, text: str) -> Prediction:
        p_long = 0.9 if "long" in text.lower() else 0.1
        return Prediction.from_probs([1 - p_long, 0.0, p_long])


class Recorder(QueueEvents):
    """Queue listener recording arrivals and releases (numbers only)."""

    def __init__(self):
        self.enqueued = []  # (seq, arrival)
        self.completed = []  # answer_tokens

    def on_enqueue(self, queue, entry):
        self.enqueued.append((entry.seq, entry.arrival))

    def on_complete(self, queue, entry, service_s, answer_tokens):
        self.completed.append(answer_tokens)



def msg(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def rid(name: str) -> dict:
    return {REQUEST_ID_HEADER: name}


def served_ids(emu) -> list:
    return [o["id"] for o in emu.stats()["order"]]


@pytest.fixture
def fresh_registry():
    registry._reset_for_tests()
    yield
    registry._reset_for_tests()


async def _open_blocker(client, name="blocker"):
    """A streaming request that holds the backend's slot until closed."""
    stream = await client.chat.completions.create(
        model="m", messages=msg("blocker long"), stream=True, extra_headers=rid(name))
    await stream.__anext__()  # admitted and generating
    return stream


async def _finish(stream) -> None:
    """Read a stream to its end: the slot is released when the backend is done."""
    async for _ in stream:
        pass


# ---- client identity and configuration -------------------------------------------------------
async def test_wrap_keeps_class_settings_and_original(emulator_factory):
    emu = await emulator_factory(tokens_per_s=5000)
    base = openai.AsyncOpenAI(
        base_url=emu.base_url, api_key="sk-test", organization="org-1", project="proj-1",
        timeout=12.5, max_retries=4, default_headers={"x-team": "a"}, default_query={"q": "1"})
    wrapped = openai_sjf.wrap(base, scheduler=Scheduler(predictor=KeywordPredictor()))
    assert type(wrapped) is type(base)
    assert (wrapped.base_url, wrapped.api_key, wrapped.organization, wrapped.project) == (
        base.base_url, "sk-test", "org-1", "proj-1")
    assert (wrapped.timeout, wrapped.max_retries) == (12.5, 4)
    assert wrapped.default_headers["x-team"] == "a" and wrapped.default_query == {"q": "1"}
    assert isinstance(wrapped._client._transport, openai_sjf.SJFTransport)
    # the wrapped client and its transport are of the SDK's own HTTP library
    assert isinstance(wrapped._client, SDK_HTTP.AsyncClient)
    assert isinstance(wrapped._client._transport, SDK_HTTP.AsyncBaseTransport)
    # the original client is untouched and keeps working without admission
    assert not isinstance(base._client._transport, openai_sjf.SJFTransport)
    assert wrapped._client._transport.inner is base._client._transport
    r = await base.chat.completions.create(model="m", messages=msg("hi"))
    assert r.choices[0].message.content
    # rewrapping replaces the admission layer instead of nesting it
    again = openai_sjf.wrap(wrapped, scheduler=Scheduler(predictor=KeywordPredictor()))
    assert again._client._transport.inner is base._client._transport
    r = await again.chat.completions.create(model="m", messages=msg("hi"))
    assert r.choices[0].message.content
    with pytest.raises(TypeError):
        openai_sjf.wrap(openai.OpenAI(base_url=emu.base_url, api_key="x"))
    with pytest.raises(ValueError):
        openai_sjf.wrap(base, scheduler=Scheduler(), slots=2)


@pytest.mark.parametrize("lib", USER_HTTP, ids=lambda m: m.__name__)
async def test_user_transport_headers_query_and_retries_take_effect(emulator_factory, lib):
    emu = await emulator_factory(tokens_per_s=5000)
    seen: list = []
    hooked: list[str] = []

    class CountingTransport(lib.AsyncHTTPTransport):
        async def handle_async_request(self, request):
            seen.append(request)
            return await super().handle_async_request(request)

    async def hook(request):
        hooked.append(request.url.path)

    http = lib.AsyncClient(transport=CountingTransport(), event_hooks={"request": [hook]})
    sched = Scheduler(predictor=KeywordPredictor(), listeners=[rec := Recorder()])
    client = openai_sjf.wrap(
        openai.AsyncOpenAI(base_url=emu.base_url, api_key="sk-user", organization="org-9", http_client=http,
                           max_retries=2, default_headers={"x-team": "blue"}, default_query={"tenant": "t1"}),
        scheduler=sched)
    client = client.with_options(max_retries=2)  # SDK copies keep the wrapper too
    assert isinstance(client._client._transport, openai_sjf.SJFTransport)
    assert isinstance(client._client._transport, lib.AsyncBaseTransport)

    r = await client.chat.completions.create(model="m", messages=msg("short please"))
    assert r.choices[0].message.content
    req = seen[-1]
    assert req.headers["x-team"] == "blue" and req.headers["authorization"] == "Bearer sk-user"
    assert req.headers["openai-organization"] == "org-9" and req.url.params["tenant"] == "t1"
    assert hooked[-1].endswith("/chat/completions")

    # max_retries=2 on a 500: three attempts reach the user's transport and the backend
    n0, errors0 = len(seen), emu.stats()["errors"]
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model="m", messages=msg("fails"), extra_headers={FAULT: "500"})
    assert len(seen) - n0 == 3
    assert emu.stats()["errors"] - errors0 == 3
    # every retry re-entered admission with the first attempt's arrival
    arrivals = [a for _, a in rec.enqueued[-3:]]
    assert arrivals[0] == arrivals[1] == arrivals[2]
    assert [h for h in (s.headers["x-stainless-retry-count"] for s in seen[-3:])] == ["0", "1", "2"]

    # GET requests pass straight through (not admitted)
    enq = len(rec.enqueued)
    models = await client.models.list()
    assert [m.id for m in models.data] == ["emulator"]
    assert len(rec.enqueued) == enq
    assert openai_sjf.transport_of(client).stats.passed_through == 1
    q = sched.queue(client.base_url)
    assert q.in_flight == 0 and q.waiting == 0
    await http.aclose()


# ---- SJF order and the concurrency bound ---------------------------------------------------------
async def test_burst_served_in_predicted_sjf_order(emulator_factory):
    predictor = KeywordPredictor()
    shorts = [f"short question {i}" for i in range(6)]
    longs = [f"write a long essay {i}" for i in range(6)]
    trace = [{"prompt": p, "answer_tokens": 20} for p in shorts] + [{"prompt": p, "answer_tokens": 120} for p in longs]
    emu = await emulator_factory(tokens_per_s=4000, trace_records=trace)
    sched = Scheduler(predictor=predictor, policy="sjf", tau="off")
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x"), scheduler=sched)
    q = openai_sjf.queue_of(client)

    blocker = await _open_blocker(client)
    # interleave long and short, longs first: FCFS would serve them first
    burst = [p for pair in zip(longs, shorts) for p in pair]

    async def call(p):
        r = await client.chat.completions.create(model="m", messages=msg(p), extra_headers=rid(p))
        return r.usage.completion_tokens

    tasks = asyncio.gather(*(call(p) for p in burst))
    await until(lambda: q.waiting == len(burst))
    await _finish(blocker)
    tokens = await tasks
    assert sorted(tokens) == sorted([20] * 6 + [120] * 6)

    order = served_ids(emu)
    assert order[0] == "blocker"
    # the service order is the predicted order: ascending P(Long), FCFS among equals
    keys = {p: predictor.predict(p).p_long for p in burst}
    expected = sorted(burst, key=lambda p: (keys[p], burst.index(p)))
    assert order[1:] == expected
    assert order[1:7] == shorts  # every Short before any Long
    assert emu.stats()["max_in_flight"] == 1
    assert q.in_flight == 0 and q.waiting == 0


async def test_never_more_than_slots_in_flight_at_the_backend(emulator_factory):
    # the emulator would run 6 at once; the wrapper must hold it to 2
    emu = await emulator_factory(tokens_per_s=3000, slots=6)
    sched = Scheduler(predictor=KeywordPredictor(), slots=2)
    plain = openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0)
    client = openai_sjf.wrap(plain, scheduler=sched)
    prompts = [("long " if i % 3 == 0 else "short ") + str(i) for i in range(14)]
    await asyncio.gather(*(client.chat.completions.create(model="m", messages=msg(p)) for p in prompts))
    s = emu.stats()
    assert s["served"] == 14
    assert s["max_in_flight"] == 2  # bounded, and the bound was used
    assert sched.queue(client.base_url).stats.max_in_flight == 2
    # control: the same burst without the wrapper does exceed 2, so the counter can tell
    may_exceed_slots(emu, "control burst without the wrapper")
    emu.reset()
    await asyncio.gather(*(plain.chat.completions.create(model="m", messages=msg(p)) for p in prompts))
    assert emu.stats()["max_in_flight"] > 2


# ---- exactly-once release on every path ----------------------------------------------------------
async def test_zero_leaked_slots_after_mixed_outcomes(emulator_factory):
    emu = await emulator_factory(tokens_per_s=3000)
    rec = Recorder()
    sched = Scheduler(predictor=KeywordPredictor(), listeners=[rec], tau="off")
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0),
                             scheduler=sched)
    q = openai_sjf.queue_of(client)
    t = openai_sjf.transport_of(client)

    # successes, streamed and not, on all three endpoints
    r = await client.chat.completions.create(model="m", messages=msg("short ok"))
    assert r.choices[0].message.content
    s = await client.chat.completions.create(model="m", messages=msg("short stream"), stream=True,
                                             stream_options={"include_usage": True})
    chunks = [c async for c in s]
    assert chunks[-1].usage.completion_tokens > 0
    r = await client.completions.create(model="m", prompt="short legacy")
    assert r.choices[0].text
    r = await client.responses.create(model="m", input="short responses")
    assert r.output_text

    # backend 500 and dropped connections (before and in the middle of a stream)
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model="m", messages=msg("short"), extra_headers={FAULT: "500"})
    with pytest.raises(openai.APIConnectionError):
        await client.chat.completions.create(model="m", messages=msg("short"), extra_headers={FAULT: "drop"})
    # openai 1.x/2.x surfaces a mid-stream drop as the httpx error, 3.x as APIConnectionError
    with pytest.raises((SDK_HTTP.RemoteProtocolError, openai.APIConnectionError)):
        st = await client.chat.completions.create(model="m", messages=msg("long drop mid"), stream=True,
                                                  extra_headers={FAULT: "drop-mid"})
        async for _ in st:
            pass
    # a broken connection may leave the backend working: both drops held their slot until an
    # idle probe of the backend returned (openai_sjf._orphans), then released it
    await until(lambda: q.in_flight == 0)
    assert (t.stats.orphans, t.stats.probes_ok) == (2, 2)

    # cancellation while queued: the request leaves the queue and never reaches the backend
    blocker = await _open_blocker(client)
    task = asyncio.ensure_future(client.chat.completions.create(
        model="m", messages=msg("short cancelled"), extra_headers=rid("cancelled")))
    await until(lambda: q.waiting == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert q.waiting == 0 and q.in_flight == 1

    # client-side timeout while queued: APITimeoutError, leaves the queue, never reaches the backend
    with pytest.raises(openai.APITimeoutError):
        await client.with_options(timeout=0.3).chat.completions.create(
            model="m", messages=msg("short timed out"), extra_headers=rid("timed-out"))
    assert q.waiting == 0 and t.stats.queue_timeouts == 1

    # a stream closed early (the blocker) frees the slot
    await blocker.close()
    await until(lambda: q.in_flight == 0)

    # a stream abandoned without closing is released when garbage-collected
    abandoned = await client.chat.completions.create(model="m", messages=msg("long abandoned"), stream=True,
                                                     extra_headers=rid("abandoned"))
    await abandoned.__anext__()
    assert q.in_flight == 1
    del abandoned
    gc.collect()
    await until(lambda: q.in_flight == 0)

    # with_streaming_response and the chat.completions.stream helper release on exit
    async with client.chat.completions.with_streaming_response.create(
            model="m", messages=msg("short raw"), stream=True) as raw:
        async for _ in raw.iter_lines():
            break
    async with client.chat.completions.stream(model="m", messages=msg("short helper")) as hs:
        final = await hs.get_final_completion()
    assert final.choices[0].message.content

    r = await client.chat.completions.create(model="m", messages=msg("short after all that"))
    assert r.choices[0].message.content
    await until(lambda: q.in_flight == 0)
    assert q.waiting == 0
    assert q.stats.dispatched == q.stats.released
    assert q.stats.cancelled == 2  # the cancelled and the timed-out waiter
    assert "cancelled" not in served_ids(emu) and "timed-out" not in served_ids(emu)
    # Never two answers generated at once. (The emulator's ``in_flight`` also counts a
    # closed stream's handler until its next tick notices the disconnect, so the request
    # after an early close can wait one tick inside the backend: on_close="release".)
    assert emu.stats()["max_generating"] == 1
    await until(lambda: emu.stats()["in_flight"] == 0)
    # usage reached the queue: non-stream answers and the final stream chunk report tokens
    assert rec.completed[0] is not None and rec.completed[0] > 0
    assert rec.completed[1] == chunks[-1].usage.completion_tokens


async def test_timeout_while_queued_is_retried_with_original_arrival(emulator_factory):
    emu = await emulator_factory(tokens_per_s=3000)
    rec = Recorder()
    sched = Scheduler(predictor=KeywordPredictor(), listeners=[rec], tau="off")
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0),
                             scheduler=sched)
    q = openai_sjf.queue_of(client)
    blocker = await _open_blocker(client)
    n0 = len(rec.enqueued)
    with pytest.raises(openai.APITimeoutError):
        await client.with_options(timeout=0.2, max_retries=1).chat.completions.create(
            model="m", messages=msg("short"), extra_headers=rid("retried"))
    attempts = rec.enqueued[n0:]
    assert len(attempts) == 2 and attempts[0][1] == attempts[1][1]
    assert q.stats.cancelled == 2 and q.waiting == 0
    # an explicit Idempotency-Key is honoured too, even across separate calls
    h = {"Idempotency-Key": "abc-123", **rid("idem")}
    with pytest.raises(openai.APITimeoutError):
        await client.with_options(timeout=0.1).chat.completions.create(model="m", messages=msg("x"), extra_headers=h)
    with pytest.raises(openai.APITimeoutError):
        await client.with_options(timeout=0.1).chat.completions.create(model="m", messages=msg("x"), extra_headers=h)
    assert rec.enqueued[-1][1] == rec.enqueued[-2][1]
    # an unrelated later request in the same task gets a fresh arrival
    await _finish(blocker)
    await client.chat.completions.create(model="m", messages=msg("short"))
    assert rec.enqueued[-1][1] > attempts[0][1]
    assert q.in_flight == 0 and "retried" not in served_ids(emu)


# ---- fail-open and overload --------------------------------------------------------------------
async def test_unreadable_bodies_pass_through_in_fcfs_order(emulator_factory):
    class Exploding:
        def predict(self, text):
            raise RuntimeError("predictor down")

    emu = await emulator_factory(tokens_per_s=4000)
    sched = Scheduler(predictor=Exploding(), policy="sjf")
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0),
                             scheduler=sched)
    q = openai_sjf.queue_of(client)
    blocker = await _open_blocker(client)
    names = [f"u{i}" for i in range(5)]
    tasks = []
    for n in names:  # unscored (predictor error): neutral key, so arrival order
        tasks.append(asyncio.ensure_future(client.chat.completions.create(
            model="m", messages=msg(("long " if n in ("u1", "u3") else "short ") + n), extra_headers=rid(n))))
        await until(lambda: q.waiting == len(tasks))
    await _finish(blocker)
    await asyncio.gather(*tasks)
    assert served_ids(emu)[1:] == names
    assert q.stats.fallback >= len(names)

    # a body that is not JSON is still sent (the backend answers it; the wrapper never fails it).
    # Behind a blocker it must wait, so the wrapper parses it (at zero contention it would not).
    t = openai_sjf.transport_of(client)
    blocker = await _open_blocker(client, "blocker2")
    # (sent with the wrapped client's own HTTP client: openai 1.x's ``post`` has no ``content=``)
    bad = asyncio.ensure_future(client._client.post(str(client.base_url).rstrip("/") + "/chat/completions",
                                                    content=b"this is not json"))
    await until(lambda: q.waiting == 1)
    assert t.stats.unparsable == 1
    await _finish(blocker)
    assert (await bad).status_code == 400
    assert emu.stats()["bad_requests"] == 1
    assert q.in_flight == 0 and q.waiting == 0


@pytest.mark.parametrize("retry_rejected, attempts", [(False, 1), (True, 3)])
async def test_overload_rejection_is_a_rate_limit_error(emulator_factory, retry_rejected, attempts):
    emu = await emulator_factory(tokens_per_s=4000)
    # the core's overload control: at most one waiter, Retry-After clamped to 50-100 ms
    sched = Scheduler(predictor=KeywordPredictor(), overload={
        "max_queue_depth": 1, "min_retry_after_s": 0.05, "max_retry_after_s": 0.1})
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=2),
                             scheduler=sched, retry_rejected=retry_rejected)
    q = openai_sjf.queue_of(client)
    blocker = await _open_blocker(client)
    waiter = asyncio.ensure_future(client.chat.completions.create(
        model="m", messages=msg("short waiter"), extra_headers=rid("waiter")))
    await until(lambda: q.waiting == 1)
    with pytest.raises(openai.RateLimitError) as err:
        await client.chat.completions.create(model="m", messages=msg("short"), extra_headers=rid("rejected"))
    assert err.value.status_code == 429
    assert err.value.response.headers["retry-after"] == "1"
    assert 50 <= int(err.value.response.headers["retry-after-ms"]) <= 100
    assert err.value.body["code"] == "sjf_admission_rejected"
    assert openai_sjf.transport_of(client).stats.rejected == attempts
    await _finish(blocker)
    r = await waiter
    assert r.choices[0].message.content
    assert "rejected" not in served_ids(emu)
    assert q.in_flight == 0 and q.waiting == 0


# ---- sharing one queue per base_url ---------------------------------------------------------------
async def test_clients_of_one_base_url_share_one_queue(emulator_factory, fresh_registry):
    emu = await emulator_factory(tokens_per_s=3000, slots=4)
    a = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="a"), slots=1, predictor=KeywordPredictor())
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        b = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url + "/", api_key="b"), slots=3)
    assert any("ignored" in str(x.message) for x in w)
    assert openai_sjf.queue_of(a) is openai_sjf.queue_of(b)
    assert openai_sjf.queue_of(a).slots == 1
    await asyncio.gather(*(c.chat.completions.create(model="m", messages=msg(f"short {i}"))
                           for i, c in enumerate([a, b] * 5)))
    assert emu.stats()["max_in_flight"] == 1 and emu.stats()["served"] == 10
    other = await emulator_factory(tokens_per_s=3000)
    c = openai_sjf.wrap(openai.AsyncOpenAI(base_url=other.base_url, api_key="c"), slots=2, predictor=KeywordPredictor())
    assert openai_sjf.queue_of(c) is not openai_sjf.queue_of(a) and openai_sjf.queue_of(c).slots == 2


async def test_stream_left_with_async_for_break_does_not_block_the_next_request(emulator_factory):
    """`async for chunk in stream: break` and drop it: the SDK's async generators keep the
    stream in reference cycles that only the cyclic GC frees. A request that then waits
    for the slot must not time out (the plain client would succeed): the waiting request
    has the collector run, and the abandoned stream's finalizers release the slot."""
    emu = await emulator_factory(tokens_per_s=50, trace_records=[{"prompt": "long essay to abandon",
                                                                  "answer_tokens": 100000}])
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0),
                             predictor=KeywordPredictor())
    q = openai_sjf.queue_of(client)

    async def first_words():
        s = await client.chat.completions.create(model="m", messages=msg("long essay to abandon"), stream=True)
        async for _ in s:
            break  # no close: the stream is simply dropped

    await first_words()
    await asyncio.sleep(0.6)  # nobody reads it any more (> IDLE_S); it usually still holds the slot
    r = await client.with_options(timeout=20).chat.completions.create(model="m", messages=msg("short next"))
    assert r.choices[0].message.content
    await until(lambda: q.in_flight == 0)


# ---- smaller contracts ---------------------------------------------------------------------------
@pytest.mark.parametrize("lib", USER_HTTP, ids=lambda m: m.__name__)
async def test_user_transport_returning_a_read_body_releases_at_once(lib):
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 7, "total_tokens": 9}}

    class CannedTransport(lib.AsyncBaseTransport):  # e.g. a caching transport: body already in memory
        async def handle_async_request(self, request):
            return lib.Response(200, json=body)

    rec = Recorder()
    sched = Scheduler(predictor=KeywordPredictor(), listeners=[rec])
    http = lib.AsyncClient(transport=CannedTransport())
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", http_client=http),
                             scheduler=sched)
    for _ in range(3):
        r = await client.chat.completions.create(model="m", messages=msg("short"))
        assert r.usage.completion_tokens == 7
    assert sched.queue(client.base_url).in_flight == 0 and rec.completed == [7, 7, 7]
    azure = openai_sjf.wrap(openai.AsyncAzureOpenAI(azure_endpoint="http://127.0.0.1:9", api_key="x",
                                                    api_version="2024-06-01", http_client=http), scheduler=sched)
    assert type(azure) is openai.AsyncAzureOpenAI and isinstance(azure._client._transport, openai_sjf.SJFTransport)
    await http.aclose()


async def test_priority_header_and_responses_stream_usage(emulator_factory):
    emu = await emulator_factory(tokens_per_s=4000)
    rec = Recorder()
    sched = Scheduler(predictor=KeywordPredictor(), listeners=[rec], tau="off")
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x"), scheduler=sched)
    q = openai_sjf.queue_of(client)
    blocker = await _open_blocker(client)
    tasks = [asyncio.ensure_future(client.chat.completions.create(
        model="m", messages=msg(p), extra_headers={**rid(p), **h})) for p, h in
        (("short a", {}), ("long vip", {"x-sjf-priority": "5"}), ("short b", {}))]
    await until(lambda: q.waiting == 3)
    await _finish(blocker)
    await asyncio.gather(*tasks)
    assert served_ids(emu)[1:] == ["long vip", "short a", "short b"]  # priority first, then SJF

    stream = await client.responses.create(model="m", input="short responses stream", stream=True)
    events = [e async for e in stream]
    assert events[-1].type == "response.completed"
    assert rec.completed[-1] == events[-1].response.usage.output_tokens > 0
    assert q.in_flight == 0


def test_usage_tokens_reads_only_real_usage_keys():
    from openai_sjf._tail import usage_tokens

    assert usage_tokens(b"", b'{"usage":{"prompt_tokens":3,"completion_tokens": 75,"total_tokens":78}}') == 75
    assert usage_tokens(b'..."usage":{"completion_to', b'kens":12}}') == 12  # split across chunks
    assert usage_tokens(b"", b'"usage":{"input_tokens":1,"output_tokens":9,"output_tokens_details":{}}') == 9
    assert usage_tokens(b"", b'{"content":"say \\"completion_tokens\\": 5"}') is None  # inside answer text
    assert usage_tokens(b"", b"data: [DONE]\n\n") is None


@pytest.mark.parametrize("on_close, backend_max", [("probe", 1), ("release", 2), ("drain", 1)])
async def test_on_close_keeps_the_bound_on_a_backend_that_keeps_generating(
        emulator_factory, on_close, backend_max):
    # like llama-cpp-python: a disconnected request is generated to its end anyway
    emu = await emulator_factory(tokens_per_s=3000, on_disconnect="continue", trace_records=[
        {"prompt": "blocker long", "answer_tokens": 600}, {"prompt": "short next", "answer_tokens": 5}])
    sched = Scheduler(predictor=KeywordPredictor())
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0),
                             scheduler=sched, on_close=on_close)
    q = openai_sjf.queue_of(client)
    if on_close == "release":  # the documented override: the slot is freed at the disconnect
        may_exceed_slots(emu, "on_close='release' lets the next request in beside the orphan")
    for round_ in range(2):
        blocker = await _open_blocker(client, name=f"blocker-{round_}")
        if round_ == 0:
            await blocker.close()  # explicit early close
        else:
            async with blocker:  # early exit from the context manager
                pass
        held = q.in_flight
        r = await client.chat.completions.create(model="m", messages=msg("short next"))
        assert r.usage.completion_tokens == 5
        assert held == (0 if on_close == "release" else 1)
    await until(lambda: q.in_flight == 0 and emu.stats()["in_flight"] == 0)
    # the backend's own records (our idle probes left out): "release" lets the next request
    # in beside the orphan, "probe" and "drain" never
    assert backend_overlap(emu) == backend_max
    probes = [r for r in emu.stats()["order"] if r.get("probe")]
    assert len(probes) == (2 if on_close == "probe" else 0)
    # an abandoned stream is released in every mode
    abandoned = await _open_blocker(client, name="abandoned")
    del abandoned
    gc.collect()
    await until(lambda: q.in_flight == 0)
    assert q.stats.dispatched == q.stats.released and q.waiting == 0


# ---- exact release after an orphaned call (issue 12) -------------------------------------------
def backend_overlap(emu) -> int:
    """Most of our requests the backend held at once (arrival ``t_in`` to handler end ``t_out``,
    from the emulator's records; our own idle probes left out)."""
    events = []
    for r in emu.stats()["order"]:
        if not r.get("probe"):
            events += [(r["t_in"], 1), (r["t_out"], -1)]
    cur = best = 0
    for _, d in sorted(events, key=lambda e: (e[0], e[1])):  # an end before a start at the same instant
        cur += d
        best = max(best, cur)
    return best


def record(emu, name):
    (r,) = [r for r in emu.stats()["order"] if r["id"] == name and not r.get("probe")]
    return r


ORPHANS = {  # (prompt, real answer tokens): the KeywordPredictor calls "long" prompts Long
    "under-predicted": ("Hi!", 300),  # predicted Short, runs 300 tokens
    "over-predicted": ("write a long and complete chess engine", 60),  # predicted Long, answers 60
}


@pytest.mark.parametrize("how", ["cancel", "timeout"])
@pytest.mark.parametrize("backend", ["continue", "stop"])
@pytest.mark.parametrize("case", list(ORPHANS))
async def test_orphaned_non_streamed_call_holds_the_slot_until_the_backend_is_idle(
        emulator_factory, case, backend, how):
    """A non-streamed call cancelled or timed out while the backend answers: the next request
    is sent exactly when the backend is free, whether it goes on generating the orphan
    ("continue", like llama-cpp-python) or stops at its next tick ("stop"): never two of our
    requests at the backend, and the backend idle at most 1 s between the orphan and the next."""
    prompt, tokens = ORPHANS[case]
    # tick_s 0.5: a stopping backend notices the disconnect up to 0.5 s late (as Ollama does at
    # its next token), so releasing at once would put the next request beside the orphan
    emu = await emulator_factory(tokens_per_s=200, tick_s=0.5, on_disconnect=backend, trace_records=[
        {"prompt": prompt, "answer_tokens": tokens}, {"prompt": "short next", "answer_tokens": 3}])
    hooked: list[str] = []
    sent: list = []  # every request the user's transport carried (ours included)

    async def hook(request):
        hooked.append(request.url.path)

    class Recording(SDK_HTTP.AsyncHTTPTransport):
        async def handle_async_request(self, request):
            sent.append(request)
            return await super().handle_async_request(request)

    http = SDK_HTTP.AsyncClient(transport=Recording(), event_hooks={"request": [hook]})
    client = openai_sjf.wrap(
        openai.AsyncOpenAI(base_url=emu.base_url, api_key="sk-secret", max_retries=0, http_client=http),
        scheduler=Scheduler(predictor=KeywordPredictor()))
    q = openai_sjf.queue_of(client)
    t = openai_sjf.transport_of(client)

    if how == "cancel":
        orphan = asyncio.ensure_future(client.chat.completions.create(
            model="m", messages=msg(prompt), extra_headers=rid("orphan")))
        await until(lambda: emu.stats()["generating"] == 1)  # the backend is answering it
        orphan.cancel()
        with pytest.raises(asyncio.CancelledError):
            await orphan
    else:  # the SDK's read timeout (0.2 s) expires while the backend answers (>= 0.5 s: two ticks)
        with pytest.raises(openai.APITimeoutError):
            await client.with_options(timeout=0.2).chat.completions.create(
                model="m", messages=msg(prompt), extra_headers=rid("orphan"))
    held = q.in_flight
    r = await client.chat.completions.create(model="m", messages=msg("short next"), extra_headers=rid("next"))
    assert r.choices[0].message.content and r.usage.completion_tokens == 3
    await until(lambda: q.in_flight == 0 and emu.stats()["in_flight"] == 0)

    assert backend_overlap(emu) == 1  # == slots
    gap = record(emu, "next")["t_in"] - record(emu, "orphan")["t_out"]
    assert 0 <= gap <= 1.0
    assert held == 1  # the orphan kept its slot while the backend answered it
    # one probe of our own: 1 token, the fixed prompt, the client's credentials; not the user's prompt
    (probe,) = [r for r in emu.stats()["order"] if r.get("probe")]
    assert probe["tokens"] == 1 and probe["hash"] == short_hash(PROBE_PROMPT) != short_hash(prompt)
    assert (t.stats.orphans, t.stats.probes_ok, t.stats.probes_failed) == (1, 1, 0)
    assert hooked == ["/v1/chat/completions"] * 2  # the user's hooks saw their two calls, not the probe
    (p,) = [x for x in sent if PROBE_HEADER in x.headers]  # it went through the user's transport
    assert str(p.url) == emu.base_url + "/chat/completions"
    assert p.headers["authorization"] == "Bearer sk-secret"
    body = json.loads(p.content)
    assert body["max_tokens"] == 1 and body["model"] == "m" and prompt not in p.content.decode()
    await http.aclose()


@pytest.mark.parametrize("backend", ["continue", "stop"])
async def test_stream_closed_early_holds_the_slot_until_the_backend_is_idle(emulator_factory, backend):
    """Default on_close="probe": a stream closed early, on a backend that stops and on one that
    goes on: never two of our requests at the backend, idle gap <= 1 s."""
    emu = await emulator_factory(tokens_per_s=200, tick_s=0.5, on_disconnect=backend, trace_records=[
        {"prompt": "blocker long", "answer_tokens": 150}, {"prompt": "short next", "answer_tokens": 3}])
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0),
                             scheduler=Scheduler(predictor=KeywordPredictor()))
    q = openai_sjf.queue_of(client)
    stream = await _open_blocker(client, name="orphan")
    await stream.close()
    held = q.in_flight
    await client.chat.completions.create(model="m", messages=msg("short next"), extra_headers=rid("next"))
    await until(lambda: q.in_flight == 0 and emu.stats()["in_flight"] == 0)
    assert backend_overlap(emu) == 1
    assert 0 <= record(emu, "next")["t_in"] - record(emu, "orphan")["t_out"] <= 1.0
    assert held == 1
    assert openai_sjf.transport_of(client).stats.probes_ok == 1


@pytest.mark.parametrize("lease_ttl_s", [None, 900])
async def test_failed_probe_falls_back_to_the_estimate_never_the_lease(emulator_factory, lease_ttl_s):
    """A probe that cannot succeed (the backend answers it 500) never leaks the slot nor leaves
    it to the lease: it is released at the orphan's estimated end (its expected answer at the
    measured speed; the default speed here, nothing was measured yet), and the next request
    is served within a few seconds of the orphan's end, never beside it."""
    emu = await emulator_factory(tokens_per_s=100, on_disconnect="continue", trace_records=[
        {"prompt": "Hi!", "answer_tokens": 30}, {"prompt": "short next", "answer_tokens": 3},
        {"prompt": PROBE_PROMPT, "answer_tokens": 1, "fault": "500"}])
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0),
                             scheduler=Scheduler(predictor=KeywordPredictor(), lease_ttl_s=lease_ttl_s))
    q = openai_sjf.queue_of(client)
    t = openai_sjf.transport_of(client)
    orphan = asyncio.ensure_future(client.chat.completions.create(model="m", messages=msg("Hi!"),
                                                                  extra_headers=rid("orphan")))
    await until(lambda: emu.stats()["generating"] == 1)
    orphan.cancel()
    with pytest.raises(asyncio.CancelledError):
        await orphan
    r = await client.chat.completions.create(model="m", messages=msg("short next"), extra_headers=rid("next"))
    assert r.usage.completion_tokens == 3
    await until(lambda: q.in_flight == 0)
    assert (t.stats.orphans, t.stats.probes_ok, t.stats.probes_failed) == (1, 0, 1)
    assert q.stats.expired == 0 and q.stats.dispatched == q.stats.released  # the estimate released it
    assert backend_overlap(emu) == 1
    assert 0 <= record(emu, "next")["t_in"] - record(emu, "orphan")["t_out"] <= 5.0


async def test_internal_scheduler_fault_sends_the_request_anyway(emulator_factory):
    """An internal fault (the scheduler's queue() raises) fails no request, streamed or
    not, and the requests it lets through still meet the slot bound: six at once, never
    more than one (slots=1) at the backend."""
    class BrokenScheduler(Scheduler):
        def queue(self, backend="default"):
            raise RuntimeError("scheduler bug")

    n = 6
    # 20 tokens at 400 tokens/s: each holds the backend ~50 ms, so six at once overlap there
    emu = await emulator_factory(tokens_per_s=400, slots=1,
                                 trace_records=[{"prompt": f"short {i}", "answer_tokens": 20} for i in range(n)])
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url=emu.base_url, api_key="x", max_retries=0),
                             scheduler=BrokenScheduler(predictor=KeywordPredictor()))

    async def one(i):
        if i % 2:
            s = await client.chat.completions.create(model="m", messages=msg(f"short {i}"), stream=True)
            return "".join([c.choices[0].delta.content or "" async for c in s if c.choices])
        r = await client.chat.completions.create(model="m", messages=msg(f"short {i}"))
        return r.choices[0].message.content

    answers = await asyncio.gather(*(one(i) for i in range(n)))
    assert all(answers)
    assert openai_sjf.transport_of(client).stats.internal_errors == n
    st = emu.stats()
    assert st["served"] == n
    assert st["max_in_flight"] <= st["slots"], f"{st['max_in_flight']} at once at the backend, slots={st['slots']}"
