"""Fail-open (DESIGN.md invariant 5): a plugin fault never fails a request.

``with fail_open(stats, what):`` runs its body; an :class:`Exception` raised inside is
swallowed, counted in ``stats.fail_open`` and logged at ERROR on the ``litellm_sjf``
logger as ``what`` plus the exception's type and the file:line it was raised at — never
its message, arguments or locals, which could carry prompt text (invariant 6).

Not swallowed, re-raised unchanged:

* the deliberate refusals :data:`REFUSALS` (overload control's
  :class:`~sjf_core._errors.AdmissionRejected` → HTTP 429, a supersede's
  :class:`~sjf_core._errors.Superseded` → HTTP 409); the hook turns them into HTTP errors;
* :class:`BaseException`\\ s that are not exceptions (``asyncio.CancelledError``: a client
  that left while queued must cancel its wait).
"""

from __future__ import annotations

import logging
import sys
import traceback
from contextlib import contextmanager
from typing import Any, Iterator

from sjf_core import AdmissionRejected, Superseded

log = logging.getLogger("litellm_sjf")

#: exceptions that are answers, not faults: they pass through :func:`fail_open`
REFUSALS: tuple[type[BaseException], ...] = (AdmissionRejected, Superseded)


def log_fault(what: str, exc: BaseException | None = None) -> None:
    """Log ``what`` at ERROR with the type of ``exc`` (default: the exception being
    handled) and where it was raised; no message text."""
    exc = exc if exc is not None else sys.exc_info()[1]
    where = ""
    if exc is not None and exc.__traceback__ is not None:
        fr = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" at {fr.filename.rsplit('/', 1)[-1]}:{fr.lineno}"
    log.error("%s (%s%s)", what, type(exc).__name__ if exc is not None else "?", where)


@contextmanager
def fail_open(stats: Any, what: str) -> Iterator[None]:
    """Swallow, count (``stats.fail_open += 1``) and log an internal fault of the body
    (module docstring); let :data:`REFUSALS` and ``CancelledError`` through."""
    try:
        yield
    except REFUSALS:
        raise
    except Exception as exc:
        stats.fail_open += 1
        log_fault(what, exc)
