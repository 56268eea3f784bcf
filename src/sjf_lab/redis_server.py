"""A throw-away real ``redis-server`` for tests, benchmarks and ``sjf bench --scenario faults``
(no persistence, 127.0.0.1).

Starts the ``redis-server`` found on PATH (or ``$SJF_REDIS_SERVER``) on a free port with
``--save "" --appendonly no`` in a temporary directory; stops it by PID. Raises
:class:`RuntimeError` (never skips) when it cannot be started, so that tests needing Redis
fail loudly. ``restart()`` keeps the port, which is how tests model a Redis restart.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server subprocess.

    Attributes:
        port: its TCP port on 127.0.0.1.
        url: ``redis://127.0.0.1:<port>/0``.
    """

    def __init__(self, port: int | None = None, executable: str | None = None):
        self.executable = executable or os.environ.get("SJF_REDIS_SERVER") or shutil.which("redis-server") or "/usr/bin/redis-server"
        if not os.path.exists(self.executable):
            raise RuntimeError("redis-server not found (install the Debian package redis-server, or set SJF_REDIS_SERVER)")
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dir = tempfile.mkdtemp(prefix="sjf-redis-")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 10.0) -> "RedisServer":
        """Start the server and wait until it answers PING.

        Raises:
            RuntimeError: it exited or did not answer within ``timeout_s`` seconds.
        """
        log = open(os.path.join(self.dir, "redis.log"), "ab")
        self.proc = subprocess.Popen(
            [self.executable, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--daemonize", "no", "--protected-mode", "no"],
            stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: {self.log_tail()}")
            if self.ping():
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port}: {self.log_tail()}")

    def ping(self) -> bool:
        """True if the server answers PING (raw RESP over a socket)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the server (SIGTERM, or ``signal.SIGKILL`` for a crash) and wait for it."""
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.send_signal(sig)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)

    def restart(self, down_s: float = 0.0) -> None:
        """Kill the server (SIGKILL: no persistence, so all its data is lost), stay down
        ``down_s`` seconds, and start it again on the same port."""
        self.stop(signal.SIGKILL)
        if down_s > 0:
            time.sleep(down_s)
        self.start()

    def log_tail(self, n: int = 2000) -> str:
        try:
            with open(os.path.join(self.dir, "redis.log"), "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def close(self) -> None:
        """Stop the server and remove its directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
