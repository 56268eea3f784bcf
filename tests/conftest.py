"""Shared pytest fixtures. Each helper keeps their fixtures in their own section."""

from __future__ import annotations

# ==== emulator + LiteLLM proxy fixtures (owner: emulator/litellm_sjf) =======================
import os

import pytest_asyncio

# litellm imported in-process (litellm_sjf tests) must not try to fetch its cost map
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest_asyncio.fixture
async def emulator_factory():
    """Start in-process :class:`sjf_lab.emulator.Emulator` servers on free ports.

    Usage: ``emu = await emulator_factory(tokens_per_s=1000, trace_records=[...])``; each
    is stopped at teardown. ``emu.base_url`` is ``http://127.0.0.1:PORT/v1``.
    """
    from sjf_lab.emulator import Emulator, EmulatorConfig

    started = []

    async def make(**kw):
        emu = Emulator(EmulatorConfig(**kw))
        await emu.start()
        started.append(emu)
        return emu

    yield make
    for emu in started:
        await emu.stop()
# ==== end emulator + LiteLLM proxy fixtures =================================================


# ==== Redis fixtures (owner: Redis admission store) =========================================
import pytest


@pytest.fixture(scope="session")
def redis_server():
    """A real redis-server from PATH on a free 127.0.0.1 port, without persistence, for the
    whole session. Fails loudly (never skips) if it cannot be started. Tests that restart or
    kill Redis start their own :class:`tests.redis_server.RedisServer` instead."""
    from redis_server import RedisServer

    srv = RedisServer().start()
    yield srv
    srv.close()


@pytest.fixture
def redis_url(redis_server):
    """The URL of the session redis-server (each test uses its own backend names)."""
    if not redis_server.ping():
        redis_server.start()
    return redis_server.url
# ==== end Redis fixtures ====================================================================


# ==== backend truth across a whole test (owner: tests) ======================================
# "The backend never sees more than `slots` user requests from us", checked after EVERY test
# that started an emulator, however it was started (tests/backend_truth.py). The check runs
# in the test's call phase, so that ``xfail`` covers a known breach, and again at teardown
# for what fixtures did after the call.
import backend_truth


def pytest_configure(config):
    config.addinivalue_line("markers", "backend_may_exceed_slots(reason): this test sends its emulators more "
                                       "than their slots on purpose; the never-above-slots check skips it")
    backend_truth.install()


def _exempt(item) -> bool:
    return item.get_closest_marker("backend_may_exceed_slots") is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        result = yield
    except BaseException as exc:
        found = backend_truth.breaches()
        if found and not _exempt(item) and hasattr(exc, "add_note"):
            exc.add_note("never above slots: " + "; ".join(found))
        raise
    found = backend_truth.breaches()
    assert not found or _exempt(item), "never above slots: " + "; ".join(found)
    return result


@pytest.fixture(autouse=True)
def _emulators_never_above_slots(request):
    """Teardown backstop of the call-phase check (``pytest_runtest_call`` above): what a
    test's fixtures sent an emulator after its call."""
    yield
    found = backend_truth.end_of_test()
    if request.node.get_closest_marker("xfail") is None and not _exempt(request.node):
        assert not found, "never above slots (after the test's call): " + "; ".join(found)
# ==== end backend truth =====================================================================
