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
import weakref


@pytest.fixture(autouse=True)
def _emulators_never_above_slots(request):
    """After every test whose fixtures include a harness with an ``emus`` dict (the proxy
    harnesses of tests/integration), each emulator's ``peak_in_flight`` (the high-water
    mark since it started, which ``reset()`` keeps) is at most its slots: "the backend
    never sees more than slots" spans the whole test, the parts before a ``reset()`` too."""
    yield
    for name in request.fixturenames:
        emus = getattr(request.node.funcargs.get(name), "emus", None)
        if not isinstance(emus, dict):
            continue
        for key, emu in emus.items():
            st = emu.stats()
            # reported by the test in which the mark rose (a module's harness outlives a test)
            rose = st["peak_in_flight"] > _PEAK_SEEN.get(emu, 0)
            _PEAK_SEEN[emu] = st["peak_in_flight"]
            assert not (rose and st["peak_in_flight"] > st["slots"]), \
                f"{name}.emus[{key!r}] saw {st['peak_in_flight']} user requests at once, slots={st['slots']}"


_PEAK_SEEN: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # emulator -> peak at the last check
# ==== end backend truth =====================================================================
