"""How answers running side by side on one box share its speed.

Contract: :meth:`SharedSpeed.start` opens a :class:`Pace` for one answer (its model's own
speed, its runner); while ``n`` paces are open each advances at
``own speed / (1 + share * (n - 1))`` tokens per second, where ``n`` counts the open answers
(``share_by="answers"``) or the runners with an open answer (``"runners"``).
:meth:`Pace.tokens` is the tokens generated so far (exact under changing ``n``: every open
pace is settled at each start and close), :meth:`Pace.close` ends it. One event loop; no locks.

``share`` 0: answers do not slow each other (each has the box to itself); 1: the box's
throughput is split evenly between them (two answers at half their own speed each: a GPU
whose decoding is bound by memory bandwidth, running two models). Between: partial.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Hashable


class Pace:
    """One answer's progress under :class:`SharedSpeed` (tokens are floats)."""

    def __init__(self, owner: "SharedSpeed", tokens_per_s: float, runner: Hashable, now: float):
        self._owner = owner
        self.own_speed = float(tokens_per_s)
        self.runner = runner
        self._done = 0.0  # tokens generated up to _t
        self._t = now
        self.rate = self.own_speed
        self.closed = False

    def _settle(self, now: float) -> None:
        if now > self._t:
            self._done += (now - self._t) * self.rate
            self._t = now

    def tokens(self, now: float | None = None) -> float:
        """Tokens generated so far."""
        now = self._owner.clock() if now is None else now
        return self._done + max(0.0, now - self._t) * self.rate

    def due(self, now: float | None = None) -> int:
        """Tokens that may be emitted by now (the first at once, as the emulator does)."""
        return int(math.floor(self.tokens(now))) + 1

    def close(self) -> None:
        """The answer ended (or stopped): the others speed up. Idempotent."""
        if not self.closed:
            self.closed = True
            self._owner._close(self)


class SharedSpeed:
    """The box's speed, shared by the answers it runs (module docstring)."""

    def __init__(self, share: float = 1.0, share_by: str = "answers", clock: Callable[[], float] = time.monotonic):
        self.share = float(share)
        self.share_by = share_by
        self.clock = clock
        self._open: list[Pace] = []

    def running(self) -> int:
        """``n``: open answers, or runners with an open answer (``share_by``)."""
        if self.share_by == "runners":
            return len({p.runner for p in self._open})
        return len(self._open)

    def factor(self) -> float:
        """The share of its own speed each open answer gets now."""
        n = max(1, self.running())
        return 1.0 / (1.0 + self.share * (n - 1))

    def start(self, tokens_per_s: float, runner: Hashable = None) -> Pace:
        """Open a pace for one answer of a model of speed ``tokens_per_s``."""
        now = self.clock()
        self._settle(now)
        pace = Pace(self, tokens_per_s, runner, now)
        self._open.append(pace)
        self._rerate()
        return pace

    def _close(self, pace: Pace) -> None:
        now = self.clock()
        self._settle(now)
        try:
            self._open.remove(pace)
        except ValueError:
            pass
        self._rerate()

    def _settle(self, now: float) -> None:
        for p in self._open:
            p._settle(now)

    def _rerate(self) -> None:
        f = self.factor()
        for p in self._open:
            p.rate = p.own_speed * f


class ConstantPace:
    """The one-model emulator's pace: ``floor((now - t0) * rate) + 1`` tokens due."""

    def __init__(self, tokens_per_s: float, t0: float):
        self.rate = float(tokens_per_s)
        self.t0 = t0

    def due(self, now: float) -> int:
        return int(math.floor((now - self.t0) * self.rate)) + 1

    def close(self) -> None:
        pass


__all__ = ["SharedSpeed", "Pace", "ConstantPace"]
