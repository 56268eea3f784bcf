"""Internal faults the runtime absorbs: logged without prompt text, and counted.

Contract: :func:`note_fault` is what a broad ``except`` in the runtime calls when it goes
on (fail-open, DESIGN.md invariant 5) instead of re-raising. It logs ``what`` with the
exception's type and the ``file:line`` it was raised at — never its message, arguments or
locals, which could carry prompt text (invariant 6) — at ``level`` (default WARNING) the
first time a (``what``, type) pair occurs in this process and at DEBUG after that, so a
fault on every request does not flood the log; and it counts every occurrence
(:func:`fault_counts`). Never raises. ``scripts/broad_excepts.py`` (and its unit test)
checks that no broad ``except`` of the runtime is silent; every fail-open case is listed
in one place, docs/architecture.md ("Fail-open cases").
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from collections import Counter

__all__ = ["note_fault", "fault_counts", "describe"]

_counts: Counter = Counter()
_lock = threading.Lock()


def describe(exc: BaseException | None) -> str:
    """``"TypeName at file.py:line"`` of ``exc`` (where it was raised), without its message."""
    if exc is None:
        return "?"
    where = ""
    if exc.__traceback__ is not None:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"
    return f"{type(exc).__name__}{where}"


def note_fault(log: logging.Logger, what: str, exc: BaseException | None = None, level: int = logging.WARNING) -> None:
    """Log and count an absorbed fault (module docstring); ``exc`` defaults to the exception
    being handled. ``what`` says what failed and what happens instead (no request text)."""
    try:
        exc = exc if exc is not None else sys.exc_info()[1]
        key = (what, type(exc).__name__ if exc is not None else "?")
        with _lock:
            _counts[key] += 1
            first = _counts[key] == 1
        log.log(level if first else logging.DEBUG, "%s (%s)", what, describe(exc))
    except Exception:  # the fault path itself must never raise; the count above is best effort
        logging.getLogger("sjf_core").debug("note_fault failed", exc_info=True)


def fault_counts() -> dict[str, int]:
    """Absorbed faults so far in this process: ``"what (TypeName)"`` -> count."""
    with _lock:
        return {f"{what} ({kind})": n for (what, kind), n in _counts.items()}
