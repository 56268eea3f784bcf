"""A Redis store configured but unreachable when the proxy starts (the README trial's item 9).

A real LiteLLM proxy with the plugin and ``SJF_REDIS_URL`` naming a port where nothing
listens, the emulator as backend, a real client. Before: nothing was said until the first
request, then one bare line (no level, time or logger: Python's last-resort handler), and the
status's counters stayed 0 (only the backend's ``stats.failopen`` moved). Now: one WARNING at
start-up naming ``SJF_REDIS_URL`` (a PING off the start-up path), the Redis store's own
warning carries level, time and logger, and the status says the store is down and counts
its fail-open requests (``counters.store_fail_open``). The request itself still succeeds
(fail-open, the slot bound kept: the emulator's own record)."""

from __future__ import annotations

import re

import httpx
import pytest

from sjf_lab.emulator import EmulatorThread
from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config
from waits import wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


async def test_unreachable_redis_is_said_at_start_up_and_its_fail_open_is_counted():
    emu = EmulatorThread(tokens_per_s=2000, slots=1, trace_records=[{"prompt": "hello there", "answer_tokens": 7}])
    dead = f"redis://:s3cret@127.0.0.1:{free_port()}/0"  # nothing listens there
    proxy = None
    try:
        proxy = LiteLLMProxy(proxy_config({"emu": emu.base_url}, plugin=True),
                             env={"SJF_REDIS_URL": dead, "SJF_PLUGINS": "none"})
        await proxy.astart()

        def warned() -> list[str]:
            return [x for x in proxy.log_lines() if "Redis store cannot be reached at start-up" in x]

        await wait_until(lambda: len(warned()) >= 1, timeout=30, step=0.1)  # before any request
        line = warned()[0]
        assert re.match(r"WARNING \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ litellm_sjf: ", line), line
        assert "SJF_REDIS_URL redis://127.0.0.1:" in line and "fail_mode open" in line and "s3cret" not in line
        auth = {"Authorization": f"Bearer {proxy.master_key}"}
        async with httpx.AsyncClient(timeout=120) as c:
            r = await c.post(proxy.openai_base_url + "/chat/completions", headers=auth,
                             json={"model": "emu", "messages": [{"role": "user", "content": "hello there"}]})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 7, r.text
        doc = httpx.get(proxy.base_url + "/sjf/status", headers=auth, timeout=10).json()
        assert doc["counters"]["store_fail_open"] == 1, doc["counters"]
        (b,) = doc["backends"].values()
        assert b["store"] == "redis unreachable (fail-open)" and b["stats"]["failopen"] == 1, b
        log = proxy.log_lines()
        assert len(warned()) == 1, warned()  # once
        store = [x for x in log if "Redis admission store unreachable for backend" in x]
        assert store and all(x.startswith("WARNING ") and " sjf_core.admission._redis: " in x for x in store), store
        assert not any("s3cret" in x for x in log)
        assert emu.stats()["max_in_flight"] == 1
    finally:
        if proxy is not None:
            await proxy.astop()
        emu.stop()


def test_the_start_up_ping_is_quiet_when_redis_answers_and_says_what_fail_closed_does():
    from litellm_sjf._startup import ping_redis
    from sjf_core.config import SchedulerConfig
    from sjf_lab.redis_server import RedisServer

    dead = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    msg = ping_redis(SchedulerConfig.from_env({"SJF_REDIS_URL": dead, "SJF_REDIS_FAIL_MODE": "closed"}), 1.0)
    assert msg is not None and "SJF_REDIS_URL" in msg and "refused with HTTP 429 (fail_mode closed)" in msg
    assert "s3cret" not in msg
    server = RedisServer()
    server.start()
    try:
        assert ping_redis(SchedulerConfig.from_env({"SJF_REDIS_URL": server.url}), 1.0) is None
    finally:
        server.stop()
