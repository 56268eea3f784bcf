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
# "The backend never sees more than `slots` user requests from us" (DESIGN.md invariant 1)
# is checked after EVERY test that started an emulator, however it was started (the
# emulator_factory fixture, an EmulatorThread of a module's harness, a helper): each
# Emulator.start() registers the emulator here. Its ``peak_in_flight`` (user requests only:
# our idle probe, the one documented exception, is counted apart) must stay <= its slots.
# The check runs in the test's call phase, so that ``xfail`` covers a known breach, and
# again at teardown for what fixtures did after the call.
# A test that sends more than slots on purpose (the emulator's own tests, baselines without
# the plugin) says so: ``@pytest.mark.backend_may_exceed_slots(reason=...)``.
import functools
import weakref

_LIVE_EMULATORS: "weakref.WeakSet" = weakref.WeakSet()  # every started emulator still alive
_STARTED_IN_TEST: list = []  # started since the last check: kept alive until it ran
_PEAK_SEEN: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # emulator -> peak at the last check


def _register_started_emulators() -> None:
    try:
        from sjf_lab.emulator import Emulator
    except ImportError:  # the lab extra is missing: no emulator can start either
        return
    if getattr(Emulator.start, "_sjf_registered", False):
        return
    start = Emulator.start

    @functools.wraps(start)
    async def registered_start(self, *args, **kwargs):
        port = await start(self, *args, **kwargs)
        _LIVE_EMULATORS.add(self)
        _STARTED_IN_TEST.append(self)
        return port

    registered_start._sjf_registered = True
    Emulator.start = registered_start


def pytest_configure(config):
    config.addinivalue_line("markers", "backend_may_exceed_slots(reason): this test sends an emulator more "
                                       "than its slots on purpose; the never-above-slots check skips it")
    _register_started_emulators()


def _peak(emu) -> int:
    for _ in range(5):  # an emulator on another thread may change its counters while we copy them
        try:
            return int(emu.stats()["peak_in_flight"])
        except RuntimeError:
            continue
    return int(emu.stats()["peak_in_flight"])


def _slot_breaches() -> list[str]:
    """Emulators whose peak rose since the last check and is above their slots (each
    breach is reported once, by the test in which the mark rose; a module's harness
    outlives a test)."""
    out = []
    for emu in {id(e): e for e in [*_LIVE_EMULATORS, *_STARTED_IN_TEST]}.values():
        peak, slots = _peak(emu), int(emu.config.slots)
        rose = peak > _PEAK_SEEN.get(emu, 0)
        _PEAK_SEEN[emu] = peak
        if rose and peak > slots:
            out.append(f"emulator {emu.base_url} saw {peak} user requests at once, slots={slots}")
    return out


def _exempt(item) -> bool:
    return item.get_closest_marker("backend_may_exceed_slots") is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        result = yield
    except BaseException as exc:
        breaches = _slot_breaches()
        if breaches and not _exempt(item) and hasattr(exc, "add_note"):
            exc.add_note("never above slots: " + "; ".join(breaches))
        raise
    breaches = _slot_breaches()
    assert not breaches or _exempt(item), "never above slots: " + "; ".join(breaches)
    return result


@pytest.fixture(autouse=True)
def _emulators_never_above_slots(request):
    """Teardown backstop of the call-phase check above: what fixtures sent after the call."""
    yield
    breaches = _slot_breaches()
    _STARTED_IN_TEST.clear()
    if request.node.get_closest_marker("xfail") is None and not _exempt(request.node):
        assert not breaches, "never above slots (after the test's call): " + "; ".join(breaches)
# ==== end backend truth =====================================================================
