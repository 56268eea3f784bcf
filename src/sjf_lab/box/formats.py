"""Answer fields the real servers add, computed from a request's record: Ollama's durations,
LM Studio's ``stats``, and the three embedding answers.

Contract: pure functions of a request's record (``t_in``, ``t_sched``, ``t_start``: monotonic
seconds, see :meth:`sjf_lab.emulator.Emulator.stats`) and the time now; no I/O.

* :func:`ollama_durations`: ``total_duration``, ``load_duration``, ``prompt_eval_duration``,
  ``eval_duration`` in nanoseconds, as Ollama computes them: ``load_duration`` is the time
  from the request's arrival until a loaded runner took it (``checkpointLoaded -
  checkpointStart`` in Ollama's handlers: the box's pending queue and any load), the wait for
  one of the runner's slots is in ``total_duration`` only.
* :func:`lmstudio_stats`: the ``stats`` / ``model_info`` / ``runtime`` of LM Studio's
  ``/api/v0`` answers.
* :func:`embed_inputs`, :func:`vector`, :func:`embedding_answer`: ``/v1/embeddings``,
  Ollama's ``/api/embed`` (``embeddings``) and legacy ``/api/embeddings`` (``embedding``).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any, Mapping

EMBED_APIS = ("embeddings", "ollama-embed", "ollama-embeddings")
_NS = 1_000_000_000


def _ns(seconds: float) -> int:
    return max(1, int(round(seconds * _NS)))


def ollama_durations(rec: Mapping | None, first_token_s: float, now: float | None = None) -> dict:
    """Ollama's ``*_duration`` fields (ns) of an answer ending ``now`` (module docstring)."""
    now = time.monotonic() if now is None else now
    if not rec:
        return {"total_duration": 1, "load_duration": 0, "prompt_eval_duration": 1, "eval_duration": 1}
    t_in = float(rec["t_in"])
    t_sched = rec.get("t_sched")
    t_start = float(rec.get("t_start", t_in))
    total = _ns(now - t_in)
    load = max(0, int(round((float(t_sched) - t_in) * _NS))) if t_sched is not None else 0
    prompt = _ns(first_token_s)
    # the parts never add up to more than the whole (records are rounded to 0.1 ms)
    evals = max(1, min(_ns(now - t_start - first_token_s), total - load - prompt))
    return {"total_duration": total, "load_duration": min(load, total), "prompt_eval_duration": prompt,
            "eval_duration": evals}


def lmstudio_stats(rec: Mapping | None, n_tokens: int, finish: str, first_token_s: float,
                   now: float | None = None) -> dict:
    """``stats``, ``model_info`` and ``runtime`` of an LM Studio ``/api/v0`` answer."""
    now = time.monotonic() if now is None else now
    t_start = float(rec["t_start"]) if rec else now
    gen = max(1e-6, now - t_start - first_token_s)
    return {"stats": {"tokens_per_second": n_tokens / gen, "time_to_first_token": round(first_token_s, 3),
                      "generation_time": round(gen, 3),
                      "stop_reason": "maxPredictedTokensReached" if finish == "length" else "eosFound"},
            "model_info": {"arch": "emulator", "quant": "Q4_0", "format": "gguf", "context_length": 4096},
            "runtime": {"name": "sjf-emulator", "version": "0", "supported_formats": ["gguf"]}}


def embed_inputs(body: Mapping) -> list[str]:
    """The texts of an embedding call: ``input`` (a string or a list) or the legacy ``prompt``."""
    x = body.get("input", body.get("prompt"))
    items = x if isinstance(x, list) else [x]
    return [i if isinstance(i, str) else json.dumps(i) for i in items if i is not None]


def vector(x: Any) -> list[float]:
    """8 deterministic floats for one input."""
    d = hashlib.sha256(json.dumps(x).encode()).digest()
    return [b / 255.0 for b in d[:8]]


def embedding_answer(api: str, body: Mapping, model: str, rec: Mapping | None = None) -> dict:
    """The JSON answer of an embedding call on ``api`` (one of :data:`EMBED_APIS`)."""
    inputs = embed_inputs(body)
    tokens = sum(max(1, len(t) // 4) for t in inputs)
    if api == "ollama-embeddings":
        return {"embedding": vector(inputs[0] if inputs else "")}
    if api == "ollama-embed":
        d = ollama_durations(rec, 0.0)
        return {"model": model, "embeddings": [vector(t) for t in inputs], "total_duration": d["total_duration"],
                "load_duration": d["load_duration"], "prompt_eval_count": tokens}
    return {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": vector(t)}
                                       for i, t in enumerate(inputs)],
            "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


__all__ = ["EMBED_APIS", "ollama_durations", "lmstudio_stats", "embed_inputs", "vector", "embedding_answer"]
