"""Unit-test guard: no sockets.

Contract: every test under ``tests/unit/`` runs with ``socket.socket.connect``,
``connect_ex``, ``bind`` and ``sendto`` replaced by a function that records the call
and raises :class:`SocketInUnitTest`. The test then fails at teardown even if the code
under test swallowed the exception (fail-open paths catch broad errors). The
``socket.socketpair()`` an asyncio event loop makes for its self-pipe needs none of
these calls on Linux (a native AF_UNIX pair), so event loops keep working.
A test that needs a real socket belongs in ``tests/integration/``.
"""

from __future__ import annotations

import socket

import pytest

try:  # urllib3 probes for IPv6 by binding ::1 once, at import: let it, before the guard is on
    import urllib3.util.connection  # noqa: F401
except ImportError:
    pass


class SocketInUnitTest(RuntimeError):
    """A unit test tried to open a network endpoint; move it to tests/integration/."""


_GUARDED = ("connect", "connect_ex", "bind", "sendto")


@pytest.fixture(autouse=True)
def _no_sockets(monkeypatch):
    attempts: list[str] = []

    def blocker(name):
        def refuse(self, *args, **kwargs):
            where = args[0] if args else kwargs
            attempts.append(f"socket.{name}({where!r}) family={self.family!r}")
            raise SocketInUnitTest(
                f"unit test called socket.{name}({where!r}); "
                "tests that use sockets belong in tests/integration/")

        return refuse

    for name in _GUARDED:
        monkeypatch.setattr(socket.socket, name, blocker(name))
    yield attempts
    if attempts:
        pytest.fail("socket use in a unit test (move it to tests/integration/): "
                    + "; ".join(attempts[:5]), pytrace=False)
