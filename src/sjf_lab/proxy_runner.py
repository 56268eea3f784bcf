"""Start and stop a real LiteLLM proxy subprocess (for the demo, benchmarks and tests).

:class:`LiteLLMProxy` writes a generated ``config.yaml`` into a private temporary
directory, starts ``python -m litellm.proxy.proxy_cli --config ... --port ...`` on a
free 127.0.0.1 port, waits until ``/health/liveliness`` answers, and stops the
process it started by PID (SIGTERM, then SIGKILL). :func:`proxy_config` builds the
config for a set of OpenAI-compatible backends, with or without the ``litellm_sjf``
callback.

Example::

    cfg = proxy_config({"emu": [emulator.base_url]}, plugin=True)
    with LiteLLMProxy(cfg, env={"SJF_TAU": "off"}) as proxy:
        client = openai.OpenAI(base_url=proxy.openai_base_url, api_key=proxy.master_key)

The environment always gets ``LITELLM_LOCAL_MODEL_COST_MAP=True``,
``LITELLM_OFFLINE_MODE=true`` and ``LITELLM_MASTER_KEY`` (no network is needed).
The proxy needs the ``litellm`` extra (``litellm[proxy]==1.106.12``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Mapping, Sequence

DEFAULT_MASTER_KEY = "sk-sjf-local"
PLUGIN_CALLBACK = "litellm_sjf.proxy_handler_instance"


class ProxyStartError(RuntimeError):
    """The proxy exited or did not become healthy in time. The message ends with the log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (bind to port 0, read, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def proxy_config(
    models: Mapping[str, Sequence[str] | str],
    plugin: bool = True,
    *,
    cancel_on_disconnect: bool = True,
    litellm_settings: Mapping[str, Any] | None = None,
    general_settings: Mapping[str, Any] | None = None,
    router_settings: Mapping[str, Any] | None = None,
    api_key: str = "none",
) -> dict:
    """Build a LiteLLM proxy config (a dict; :class:`LiteLLMProxy` writes it as YAML).

    Args:
        models: model group name → backend base URL(s) (OpenAI-compatible, ending in
            ``/v1``). Each URL becomes one deployment ``openai/<group>``.
        plugin: add ``litellm_sjf.proxy_handler_instance`` to ``litellm_settings.callbacks``.
        cancel_on_disconnect: set ``general_settings.cancel_on_disconnect`` (a client
            that leaves while queued is cancelled, see DESIGN.md "LiteLLM facts").
        litellm_settings, general_settings, router_settings: merged over the defaults.
        api_key: the key sent to the backends.
    """
    model_list = []
    for name, urls in models.items():
        for url in [urls] if isinstance(urls, str) else list(urls):
            model_list.append({"model_name": name,
                               "litellm_params": {"model": f"openai/{name}", "api_base": url, "api_key": api_key}})
    ls: dict[str, Any] = {"drop_params": True, "num_retries": 0, "request_timeout": 600}
    if plugin:
        ls["callbacks"] = [PLUGIN_CALLBACK]
    ls.update(litellm_settings or {})
    gs: dict[str, Any] = {"cancel_on_disconnect": bool(cancel_on_disconnect)}
    gs.update(general_settings or {})
    cfg: dict[str, Any] = {"model_list": model_list, "litellm_settings": ls, "general_settings": gs}
    rs: dict[str, Any] = {"num_retries": 0, "disable_cooldowns": True}
    rs.update(router_settings or {})
    cfg["router_settings"] = rs
    return cfg


def _dump_yaml(cfg: Mapping) -> str:
    try:
        import yaml

        return yaml.safe_dump(dict(cfg), sort_keys=False)
    except ImportError:  # JSON is valid YAML
        return json.dumps(cfg, indent=2)


class LiteLLMProxy:
    """One LiteLLM proxy subprocess.

    Args:
        config: a config dict (see :func:`proxy_config`), YAML text, or a path to a YAML file.
        port: the port to bind (None: a free one).
        env: extra environment variables (e.g. ``SJF_*`` settings of the plugin).
        master_key: ``LITELLM_MASTER_KEY`` (clients use it as their API key).
        startup_timeout_s: seconds to wait for ``/health/liveliness``.
        host: bind address.
        num_workers: ``--num_workers`` (uvicorn worker processes; each loads the config
            and its callbacks, so the plugin runs once per worker: use Redis mode,
            ``SJF_REDIS_URL``, to share one queue).

    Attributes:
        pid: the process id (after :meth:`start`).
        base_url: ``http://host:port``; ``openai_base_url`` adds ``/v1``.
        workdir: the private directory with ``config.yaml`` and ``proxy.log``.
    """

    def __init__(
        self,
        config: Mapping | str | os.PathLike,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        master_key: str = DEFAULT_MASTER_KEY,
        startup_timeout_s: float = 180.0,
        host: str = "127.0.0.1",
        num_workers: int = 1,
    ):
        self.config = config
        self.num_workers = int(num_workers)
        self.host = host
        self.port = port
        self.env = dict(env or {})
        self.master_key = master_key
        self.startup_timeout_s = startup_timeout_s
        self._proc: subprocess.Popen | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._log = None
        self._last_log = ""
        self.workdir: Path | None = None

    # ---- properties ------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    @property
    def log_path(self) -> Path | None:
        return self.workdir / "proxy.log" if self.workdir else None

    def log_text(self, tail_chars: int | None = None) -> str:
        """The proxy's combined stdout/stderr so far (the last ``tail_chars`` characters)."""
        p = self.log_path
        if p is None or not p.exists():
            text = self._last_log
            return text[-tail_chars:] if tail_chars else text
        text = p.read_text(errors="replace")
        return text[-tail_chars:] if tail_chars else text

    def log_lines(self) -> list[str]:
        """The log's lines, one record each: LiteLLM's coloured prints write their newline
        apart from their text, so another stream's record can land on the same line after
        the colour reset; such a line is split at the reset."""
        return [part for line in self.log_text().splitlines()
                for part in re.split(r"(?<=\x1b\[0m)(?=\S)", line)]

    def running(self) -> bool:
        """True while the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    # ---- lifecycle -------------------------------------------------------------------------
    def _write_config(self) -> Path:
        assert self.workdir is not None
        cfg = self.config
        if isinstance(cfg, Mapping):
            text = _dump_yaml(cfg)
        elif isinstance(cfg, os.PathLike) or (isinstance(cfg, str) and "\n" not in cfg and Path(cfg).is_file()):
            text = Path(cfg).read_text()
        else:
            text = str(cfg)
        path = self.workdir / "config.yaml"
        path.write_text(text)
        return path

    def start(self) -> "LiteLLMProxy":
        """Start the proxy and wait until it is healthy.

        Raises:
            ProxyStartError: the process exited, or was not healthy within ``startup_timeout_s``
                (the process is then stopped).
        """
        if self.running():
            return self
        self._tmp = tempfile.TemporaryDirectory(prefix="sjf-proxy-")
        self.workdir = Path(self._tmp.name)
        cfg_path = self._write_config()
        if self.port is None:
            self.port = free_port(self.host)
        env = dict(os.environ)
        env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true",
                    "LITELLM_MASTER_KEY": self.master_key, "PYTHONUNBUFFERED": "1",
                    "LITELLM_LOG": env.get("LITELLM_LOG", "ERROR")})
        if self.num_workers > 1:
            # uvicorn (0.54) kills a worker that does not answer its health check within
            # 5 s, and importing litellm takes longer on a busy machine: workers would be
            # restarted forever. LiteLLM passes this through (uvicorn timeout_worker_healthcheck).
            env.setdefault("TIMEOUT_WORKER_HEALTHCHECK", "300")
        env.update(self.env)
        cmd = [sys.executable, "-m", "litellm.proxy.proxy_cli", "--config", str(cfg_path),
               "--host", self.host, "--port", str(self.port), "--num_workers", str(self.num_workers)]
        self._log = open(self.workdir / "proxy.log", "wb")
        # its own session, so that a terminal's Ctrl-C does not race our stop()
        self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                      cwd=str(self.workdir), start_new_session=True)
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        url = self.base_url + "/health/liveliness"
        while True:
            if self._proc.poll() is not None:
                raise ProxyStartError(f"LiteLLM proxy exited with code {self._proc.returncode}; log tail:\n"
                                      + self.log_text(3000))
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise ProxyStartError(f"LiteLLM proxy not healthy after {self.startup_timeout_s:.0f} s; log tail:\n"
                                      + self.log_text(3000))
            time.sleep(0.25)

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """Stop the process started by :meth:`start` (SIGTERM, then SIGKILL after
        ``timeout_s``), close the log and remove the work directory. Idempotent.

        Returns the exit code, or None if it was never started.
        """
        proc, self._proc = self._proc, None
        code = None
        if proc is not None:
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    try:
                        os.kill(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait(timeout_s)
            code = proc.returncode
        if self._log is not None:
            self._log.close()
            self._log = None
        self._last_log = self.log_text() if self.workdir else ""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
            self.workdir = None
        return code

    async def astart(self) -> "LiteLLMProxy":
        """:meth:`start` without blocking the event loop."""
        return await asyncio.to_thread(self.start)

    async def astop(self) -> int | None:
        """:meth:`stop` without blocking the event loop."""
        return await asyncio.to_thread(self.stop)

    def __enter__(self) -> "LiteLLMProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    async def __aenter__(self) -> "LiteLLMProxy":
        return await self.astart()

    async def __aexit__(self, *exc) -> None:
        await self.astop()


__all__ = ["LiteLLMProxy", "ProxyStartError", "proxy_config", "free_port", "PLUGIN_CALLBACK", "DEFAULT_MASTER_KEY"]
