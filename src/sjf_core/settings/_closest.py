"""The "did you mean" of every settings message: :func:`closest`, the known word nearest a
misspelt one (difflib's ratio, cutoff 0.6). Pure; the standard library only."""

from __future__ import annotations

import difflib
from typing import Iterable

__all__ = ["closest", "did_you_mean"]


def closest(name: str, known: Iterable[str], prefix: str = "") -> str | None:
    """The known name closest to ``name`` (compared without the common ``prefix``), or None."""
    tails = {k[len(prefix):]: k for k in known if k.startswith(prefix)}
    best = difflib.get_close_matches(str(name)[len(prefix):], sorted(tails), n=1, cutoff=0.6)
    return tails[best[0]] if best else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the known word closest to ``name``, else ``""``."""
    best = closest(name, known)
    return f"; did you mean {best!r}?" if best is not None else ""
