"""Backend truth across every test: no emulator sees more than its ``slots`` user requests
at once (DESIGN.md invariant 1), whoever started it; a box of several models, no more than
each model runner's ``slots`` for that model.

Contract: after :func:`install`, every :class:`sjf_lab.emulator.Emulator` started in this
process (by the ``emulator_factory`` fixture, an ``EmulatorThread`` of a module's harness,
a helper) is registered here, and :func:`breaches` names each one whose ``peak_in_flight``
(user requests only: our idle probe, the one documented exception, is counted apart) rose
above its slots since the last call. ``tests/conftest.py`` calls it after every test's call
and again at its teardown. A test that sends an emulator more than its slots on purpose (a
control burst without the plugin) calls :func:`may_exceed_slots` first; the emulator's own
tests carry ``@pytest.mark.backend_may_exceed_slots(reason=...)``.
"""

from __future__ import annotations

import functools
import weakref

_LIVE: "weakref.WeakSet" = weakref.WeakSet()  # every started emulator still alive
_STARTED: list = []  # started since the last end of a test: kept alive until it is checked
_PEAK_SEEN: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # emulator -> {bound: peak at the last check}
_EXEMPT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # emulator -> why it may exceed


def install() -> None:
    """Make every later ``Emulator.start()`` register its emulator (idempotent; nothing
    without the ``lab`` extra, where no emulator can start either)."""
    try:
        from sjf_lab.emulator import Emulator
    except ImportError:
        return
    if getattr(Emulator.start, "_backend_truth", False):
        return
    start = Emulator.start

    @functools.wraps(start)
    async def registered_start(self, *args, **kwargs):
        port = await start(self, *args, **kwargs)
        _LIVE.add(self)
        _STARTED.append(self)
        return port

    registered_start._backend_truth = True
    Emulator.start = registered_start


def _peak(emu) -> int:
    for _ in range(5):  # an emulator on another thread may change its counters while we copy them
        try:
            return int(emu.stats()["peak_in_flight"])
        except RuntimeError:
            continue
    return int(emu.stats()["peak_in_flight"])


def _bounds(emu) -> list[tuple[str, int, int]]:
    """``(what, peak, slots)`` of each bound of ``emu``: the one serial queue, or (a box of
    several models) each model runner's."""
    if getattr(emu, "box", None) is None:
        return [("", _peak(emu), int(emu.config.slots))]
    for _ in range(5):
        try:
            models = emu.stats()["box"]["models"]
            break
        except RuntimeError:
            continue
    return [(f" model {name}", int(m["peak_in_flight"]), int(m["slots"])) for name, m in models.items()]


def breaches() -> list[str]:
    """One line per registered emulator (per model runner of a box) whose peak rose since the
    last call and is above its slots (so a breach is reported once, in the test in which it
    happened; a module's harness outlives a test). Emulators of :func:`may_exceed_slots` are
    skipped."""
    out = []
    for emu in {id(e): e for e in [*_LIVE, *_STARTED]}.values():
        seen = _PEAK_SEEN.setdefault(emu, {})
        for what, peak, slots in _bounds(emu):
            rose = peak > seen.get(what, 0)
            seen[what] = peak
            if rose and peak > slots and emu not in _EXEMPT:
                out.append(f"emulator {emu.base_url}{what} saw {peak} user requests at once, slots={slots}")
    return out


def may_exceed_slots(emu, reason: str) -> None:
    """From now on ``emu`` (an ``Emulator`` or ``EmulatorThread``) may see more than its
    slots (``reason``: why, e.g. a control burst without the plugin). What it saw until now
    is checked first: AssertionError if any registered emulator already broke the bound."""
    found = breaches()
    assert not found, "never above slots: " + "; ".join(found)
    _EXEMPT[getattr(emu, "emulator", emu)] = reason


def end_of_test() -> list[str]:
    """:func:`breaches`, then forget the emulators started during the test (the live ones
    stay registered while something holds them)."""
    out = breaches()
    _STARTED.clear()
    return out
