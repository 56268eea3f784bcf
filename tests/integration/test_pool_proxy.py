"""A pool of serial backends behind one model group, through a real LiteLLM proxy (issue 22):
the plugin chooses the deployment (``async_filter_deployments``) so that one shortest-first
queue feeds whichever backend frees a slot. Emulators count what each backend really held."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest

from sjf_lab.emulator import EmulatorThread, short_hash
from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config
from waits import wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# our own words; the shipped predictor ranks them (the order is read from it below)
BURST = [
    "What is the boiling point of water at sea level?",
    "Who wrote the novel Pride and Prejudice?",
    "Define photosynthesis in one sentence.",
    "Summarize the main causes of the First World War in a few paragraphs.",
    "Write a detailed step-by-step tutorial on building a web scraper in Python, with complete code and "
    "explanations for each part.",
    "Write a long short story of at least 2000 words about a lighthouse keeper who discovers a message in a bottle.",
]
HOLD = {"a": "Hold backend A for a moment, please.", "b": "Hold backend B for a moment, please."}
TRACE = ([{"prompt": p, "answer_tokens": 12} for p in BURST]
         + [{"prompt": h, "answer_tokens": 2, "fault": "hold"} for h in HOLD.values()]
         + [{"prompt": f"mixed {i}", "answer_tokens": 20} for i in range(16)])


def _keys(prompts) -> dict:
    from sjf_core.policy._policies import make_policy
    from sjf_core.predict._meta import request_meta
    from sjf_core.predict._predictor import load_predictor

    p, pol = load_predictor(), make_policy("sjf-tokens")
    return {t: pol.key(p.predict(t), request_meta({"messages": [{"role": "user", "content": t}]})) for t in prompts}


class Pool:
    def __init__(self, proxy: LiteLLMProxy, status_port: int, emus: dict):
        self.proxy, self.status_port, self.emus = proxy, status_port, emus
        self.open: set = set()  # the tasks of this harness's requests not yet answered

    def status(self) -> dict:
        return httpx.get(f"http://127.0.0.1:{self.status_port}/sjf/status", timeout=10).json()

    def pool_waiting(self) -> int:
        return sum(p["waiting"] for p in self.status()["pools"])

    async def chat(self, model: str, prompt: str, stream: bool = False) -> int:
        me = asyncio.current_task()
        self.open.add(me)
        try:
            async with httpx.AsyncClient(timeout=180) as c:
                r = await c.post(self.proxy.openai_base_url + "/chat/completions",
                                 headers={"Authorization": f"Bearer {self.proxy.master_key}"},
                                 json={"model": model, "messages": [{"role": "user", "content": prompt}],
                                       "stream": stream})
                return r.status_code
        finally:
            self.open.discard(me)

    def idle(self) -> bool:
        """No request of ours open at the proxy's pool queue or at a backend."""
        return (all(e.stats()["in_flight"] == 0 for e in self.emus.values())
                and all(p["waiting"] == 0 and p["in_flight"] == 0 for p in self.status()["pools"]))

    async def settle(self) -> None:
        """End what a test left open (a failed one leaves held answers and queued requests): its
        requests still open leave (clients that go away), every hold is released, and the proxy
        and the backends are waited on until idle, so the next test is judged on its own
        requests alone. Raises (``wait_until``) when they never get idle: a leaked slot."""
        left = [t for t in self.open if not t.done()]
        for t in left:
            t.cancel()
        await asyncio.gather(*left, return_exceptions=True)

        def released_and_idle() -> bool:
            for e in self.emus.values():  # a request that reached a backend after the first release
                e.release_holds()
            return self.idle()

        await wait_until(released_and_idle, timeout=60, step=0.05)

    async def hold(self, name: str) -> asyncio.Task:
        """Occupy backend ``name`` with a request pinned to its deployment (model = its id)."""
        task = asyncio.create_task(self.chat(f"pool-{name}", HOLD[name]))
        await wait_until(lambda: self.emus[name].stats()["held"] == 1, timeout=60)
        return task


def _config(emus: dict, dead_url: str | None = None, retries: int = 0) -> dict:
    urls = [e.base_url for e in emus.values()] + ([dead_url] if dead_url else [])
    cfg = proxy_config({"pool": urls, "pool2": urls}, plugin=True, router_settings={
        "model_group_alias": {"pool-alias": "pool"}, "num_retries": retries})
    names = list(emus) + (["dead"] if dead_url else [])
    for i, d in enumerate(cfg["model_list"]):
        if d["model_name"] == "pool":
            d["model_info"] = {"id": f"pool-{names[i]}"}
    return cfg


@pytest.fixture(scope="module")
def pool_proxy():
    emus = {n: EmulatorThread(tokens_per_s=400, slots=1, on_disconnect="stop", trace_records=TRACE) for n in "ab"}
    port = free_port()
    proxy = LiteLLMProxy(_config(emus), env={"SJF_STATUS_PORT": str(port), "SJF_TAU": "off"})
    try:
        proxy.start()
        yield Pool(proxy, port, emus)
    finally:
        proxy.stop()
        for e in emus.values():
            e.stop()


@pytest.fixture
async def pool(pool_proxy):
    """The module's proxy and two backends, each test judged alone: it starts idle with fresh
    emulator counters, and whatever it leaves open (pass or fail) is settled after it."""
    await wait_until(pool_proxy.idle, timeout=60, step=0.05)
    for e in pool_proxy.emus.values():
        e.reset()
    try:
        yield pool_proxy
    finally:
        await pool_proxy.settle()


@pytest.mark.parametrize("freed, kept", [("b", "a"), ("a", "b")])
async def test_a_freed_backend_serves_the_whole_queue_shortest_first_while_the_other_is_held(pool, freed, kept):
    """With per-backend queues, half the burst would sit in the held backend's queue while the
    other idles. Both orders: a rule that favours one member (say, the first key) fails one."""
    for e in pool.emus.values():
        e.reset()
    keys = _keys(BURST)
    ordered = sorted(BURST, key=keys.get)
    hold_a, hold_b = await pool.hold("a"), await pool.hold("b")
    tasks = []
    for p in reversed(ordered):  # FCFS would serve them longest first
        tasks.append(asyncio.create_task(pool.chat("pool", p)))
        await asyncio.sleep(0.05)
    await wait_until(lambda: pool.pool_waiting() == len(BURST), timeout=60)
    pool.emus[freed].release_holds()
    await wait_until(lambda: all(t.done() for t in tasks), timeout=120)
    assert [t.result() for t in tasks] == [200] * len(BURST)
    served = [o["hash"] for o in pool.emus[freed].stats()["order"]]
    assert served == [short_hash(HOLD[freed])] + [short_hash(p) for p in ordered]
    assert pool.emus[kept].stats()["served"] == 0  # it stayed held; nothing was queued behind it
    pool.emus[kept].release_holds()
    assert await hold_a == 200 and await hold_b == 200
    for e in pool.emus.values():
        assert e.stats()["max_in_flight"] == 1
    st = pool.status()
    assert st["counters"]["pooled"] >= len(BURST) and st["settings"]["pool"] is True


async def test_groups_aliases_and_pinned_requests_on_the_same_backends_share_one_slot_each(pool):
    for e in pool.emus.values():
        e.reset()
    models = ["pool", "pool2", "pool-alias", "pool-a", "pool-b"]
    tasks = [asyncio.create_task(pool.chat(models[i % len(models)], f"mixed {i}", stream=bool(i % 2)))
             for i in range(16)]
    codes = await asyncio.gather(*tasks)
    assert codes == [200] * 16
    stats = [e.stats() for e in pool.emus.values()]
    assert [s["max_in_flight"] for s in stats] == [1, 1]
    assert sum(s["served"] for s in stats) == 16
    pools = pool.status()["pools"]
    assert len(pools) == 1  # "pool", "pool2" and the alias: one set of backends, one queue


async def test_a_client_that_leaves_while_pooled_never_reaches_a_backend(pool):
    for e in pool.emus.values():
        e.reset()
    hold_a, hold_b = await pool.hold("a"), await pool.hold("b")
    gone = asyncio.create_task(pool.chat("pool", "mixed 15"))
    await wait_until(lambda: pool.pool_waiting() == 1, timeout=60)
    gone.cancel()
    await wait_until(lambda: pool.pool_waiting() == 0, timeout=60)
    for e in pool.emus.values():
        e.release_holds()
    assert await hold_a == 200 and await hold_b == 200
    served = [o["hash"] for e in pool.emus.values() for o in e.stats()["order"]]
    assert short_hash("mixed 15") not in served


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_dead_backend_leaves_the_rotation_and_nothing_is_lost():
    """A group of one live emulator and one closed port, LiteLLM's cooldowns off: without the
    pool taking the dead member out, each attempt picks it half the time and requests whose
    three attempts all hit it are lost."""
    emu = EmulatorThread(tokens_per_s=400, slots=1, trace_records=TRACE)
    port = free_port()
    proxy = LiteLLMProxy(_config({"a": emu}, dead_url=f"http://127.0.0.1:{_closed_port()}/v1", retries=2),
                         env={"SJF_STATUS_PORT": str(port)})
    try:
        await proxy.astart()
        h = Pool(proxy, port, {"a": emu})
        codes = await asyncio.gather(*[h.chat("pool", f"mixed {i}") for i in range(12)])
        assert codes == [200] * 12, json.dumps(h.status()["pools"])
        assert emu.stats()["served"] == 12 and emu.stats()["max_in_flight"] == 1
        members = {m["backend"]: m for p in h.status()["pools"] for m in p["members"]}
        assert [m["healthy"] for k, m in members.items() if k != emu.base_url] == [False]
    finally:
        await proxy.astop()
        emu.stop()


async def test_three_workers_in_redis_mode_share_one_pool_and_one_slot_per_backend(redis_url):
    """Both backends held; a burst spread over 3 workers; only B is freed: every request must
    be served by B, one at a time. Per-backend queues (or a pool per worker) would leave
    about half of them waiting for A."""
    import uuid

    from sjf_core._scheduler import backend_key
    from sjf_core.admission._redis import RedisAdmissionQueue
    from sjf_core.config import RedisSettings

    prefix = "poolproxy-" + uuid.uuid4().hex[:8]
    emus = {n: EmulatorThread(tokens_per_s=400, slots=1, on_disconnect="stop", trace_records=TRACE) for n in "ab"}
    proxy = LiteLLMProxy(_config(emus), num_workers=3, startup_timeout_s=600,
                         env={"SJF_REDIS_URL": redis_url, "SJF_REDIS_PREFIX": prefix, "SJF_TAU": "off"})
    shared = RedisAdmissionQueue(redis_url, options=RedisSettings(prefix=prefix),
                                 name="pool:" + "+".join(sorted(backend_key(e.base_url) for e in emus.values())))
    try:
        await proxy.astart()
        h = Pool(proxy, 0, emus)
        hold_a, hold_b = await h.hold("a"), await h.hold("b")
        tasks = [asyncio.create_task(h.chat("pool", f"mixed {i}", stream=bool(i % 2))) for i in range(8)]

        async def all_queued():  # every request entered the shared pool queue
            return (await shared.snapshot())["enqueued"] == 8

        await wait_until(all_queued, timeout=120)
        emus["b"].release_holds()
        await wait_until(lambda: all(t.done() for t in tasks), timeout=120)
        assert [t.result() for t in tasks] == [200] * 8
        assert emus["b"].stats()["served"] == 9 and emus["a"].stats()["served"] == 0
        emus["a"].release_holds()
        assert await hold_a == 200 and await hold_b == 200
        assert [e.stats()["max_in_flight"] for e in emus.values()] == [1, 1]
    finally:
        await shared.aclose()
        await proxy.astop()
        for e in emus.values():
            e.stop()
