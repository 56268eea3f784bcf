"""Shared pytest fixtures. Each helper keeps their fixtures in their own section."""

from __future__ import annotations

# ==== emulator + LiteLLM proxy fixtures (owner: emulator/litellm_sjf) =======================
import pytest_asyncio


@pytest_asyncio.fixture
async def emulator_factory():
    """Start in-process :class:`sjf_core.emulator.Emulator` servers on free ports.

    Usage: ``emu = await emulator_factory(tokens_per_s=1000, trace_records=[...])``; each
    is stopped at teardown. ``emu.base_url`` is ``http://127.0.0.1:PORT/v1``.
    """
    from sjf_core.emulator import Emulator, EmulatorConfig

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
