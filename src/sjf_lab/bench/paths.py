"""The two client paths a contender is measured through.

* :class:`WrapperPath`: the real ``openai`` SDK in this process; plugin contenders
  wrap it with ``openai_sjf.wrap(client, scheduler=...)``; ``fcfs`` is the plain client.
* :class:`ProxyPath`: a real LiteLLM proxy subprocess in front of the backend;
  plugin contenders load ``litellm_sjf`` with their policy; ``fcfs`` and
  ``litellm-priority`` use a proxy without the plugin.

A path's :meth:`open` returns a sender (see :mod:`sjf_lab.bench.client`) for one
contender; :meth:`close` frees what the path started.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Sequence

from sjf_lab.emulator import prompt_hash
from sjf_lab.bench.client import HttpSender, OpenAISender
from sjf_lab.bench.oracle import ENV_TRACE, OraclePredictor
from sjf_lab.bench.policies import PolicySpec
from sjf_lab.bench.workload import Job


def write_hashed_trace(jobs: Sequence[Job], directory: str) -> str:
    """Write ``{sha256, answer_tokens}`` lines (no prompt text) for the oracle; returns the path."""
    path = os.path.join(directory, "oracle_trace.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for j in jobs:
            f.write(json.dumps({"sha256": prompt_hash(j.prompt), "answer_tokens": int(j.tokens)}) + "\n")
    return path


def _hashed_oracle(jobs: Sequence[Job]) -> OraclePredictor:
    return OraclePredictor({prompt_hash(j.prompt): int(j.tokens) for j in jobs})


class WrapperPath:
    """Requests through ``openai.AsyncOpenAI``, wrapped by ``openai_sjf`` for plugin contenders.

    Args:
        backend: the backend (``base_url``, ``model``).
        jobs: all jobs of the run (the oracle's knowledge).
        predictor: the loaded default predictor (shared by every contender).
    """

    name = "openai_sjf wrapper"
    supports_litellm_priority = False

    def __init__(self, backend, jobs: Sequence[Job], predictor=None):
        self.backend = backend
        self.jobs = jobs
        self.predictor = predictor

    def _client(self):
        import httpx
        import openai

        http = httpx.AsyncClient(timeout=httpx.Timeout(900.0, connect=60.0),
                                 limits=httpx.Limits(max_connections=2000, max_keepalive_connections=2000))
        return openai.AsyncOpenAI(base_url=self.backend.base_url, api_key=getattr(self.backend, "api_key", None) or "bench",
                                  max_retries=0, timeout=900.0, http_client=http)

    async def open(self, spec: PolicySpec):
        """A sender for ``spec`` (the plain client for no-plugin contenders)."""
        if spec.litellm_priority:
            raise ValueError("litellm-priority needs the LiteLLM proxy path")
        client = self._client()
        if spec.plugin:
            import openai_sjf

            from sjf_core._scheduler import Scheduler

            pred = _hashed_oracle(self.jobs) if spec.predictor == "oracle" else (self.predictor or "default")
            sched = Scheduler(predictor=pred, plugins=False, **spec.scheduler_kwargs())
            client = openai_sjf.wrap(client, scheduler=sched)
        return OpenAISender(client, self.backend.model)

    async def restart(self, spec: PolicySpec):
        """A sender with a fresh scheduler (every :meth:`open` makes one)."""
        return await self.open(spec)

    async def close(self) -> None:
        pass


class ProxyPath:
    """Requests through a real LiteLLM proxy subprocess (one proxy per distinct configuration).

    Args:
        backend: the backend (``base_url``, ``model``).
        jobs: all jobs of the run (the oracle's knowledge, written as hashes only).
        predictor: the loaded default predictor, for ``litellm-priority``'s client-side class.
        startup_timeout_s: how long a proxy may take to become ready.
    """

    name = "LiteLLM proxy"
    supports_litellm_priority = True

    def __init__(self, backend, jobs: Sequence[Job], predictor=None, startup_timeout_s: float = 180.0):
        self.backend = backend
        self.jobs = jobs
        self.predictor = predictor
        self.startup_timeout_s = startup_timeout_s
        self._tmp = tempfile.TemporaryDirectory(prefix="sjf-bench-")
        self._oracle_trace = None
        self._proxies: dict = {}
        self._classes = None

    @staticmethod
    def _key(spec: PolicySpec) -> tuple:
        return (spec.policy, str(spec.tau), json.dumps(spec.options, sort_keys=True), spec.predictor)

    def _predicted_classes(self) -> dict[str, int]:
        if self._classes is None:
            pred = self.predictor
            if pred is None:
                from sjf_core.predict._predictor import load_predictor

                pred = load_predictor()
            self._classes = {j.prompt: int(pred.predict(j.prompt).klass) for j in self.jobs}
        return self._classes

    async def open(self, spec: PolicySpec):
        """A sender for ``spec``. Proxies are started on first use and kept (one per distinct
        configuration) until :meth:`close`, so repeats do not pay the start-up again."""
        from sjf_lab.bench.proxy import start_proxy

        key = self._key(spec)
        proxy = self._proxies.get(key)
        if proxy is None:
            env = {}
            if spec.predictor == "oracle":
                if self._oracle_trace is None:
                    self._oracle_trace = write_hashed_trace(self.jobs, self._tmp.name)
                env[ENV_TRACE] = self._oracle_trace
            proxy = await start_proxy(self.backend, spec, self._tmp.name, env=env, timeout_s=self.startup_timeout_s)
            self._proxies[key] = proxy
        extra = None
        if spec.litellm_priority:
            classes = self._predicted_classes()

            def extra(job):
                return {"priority": classes.get(job.prompt, 1)}
        return HttpSender(proxy.base_url, proxy.model, api_key=proxy.api_key, extra_body=extra)

    async def restart(self, spec: PolicySpec):
        """A sender for ``spec`` through a freshly started proxy (the old one is stopped)."""
        key = self._key(spec)
        old = self._proxies.pop(key, None)
        if old is not None:
            try:
                await old.stop()
            except Exception:
                pass
        return await self.open(spec)

    async def _stop_proxies(self) -> None:
        proxies, self._proxies = list(self._proxies.values()), {}
        for p in proxies:
            try:
                await p.stop()
            except Exception:
                pass

    async def close(self) -> None:
        await self._stop_proxies()
        self._tmp.cleanup()
