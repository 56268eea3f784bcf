"""Oracle SJF: a predictor that knows every answer length (DESIGN.md "Oracle SJF").

The oracle is the ceiling for non-preemptive admission: with the ``sjf-tokens``
policy and τ off, requests are ordered by their true answer length. It is built
from the benchmark's own trace (prompt → recorded answer tokens), which the
scheduler under test never sees; only the oracle baseline is given it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Mapping

from sjf_lab.data_rows import TRACE_TOKEN_FIELDS, answer_tokens_of
from sjf_lab.emulator import prompt_hash
from sjf_core.policy._entry import class_of_tokens
from sjf_core.predict._prediction import Prediction

#: Environment variable naming a trace file for :func:`from_env` (used by a proxy subprocess).
ENV_TRACE = "SJF_BENCH_ORACLE_TRACE"


class OraclePredictor:
    """Returns the true answer length of known prompts.

    ``predict(text)`` gives a one-hot :class:`Prediction` of the true class with
    ``expected_tokens`` = the true answer tokens. An unknown prompt gets the
    ``unknown_tokens`` length (default 400, a Medium answer).

    Args:
        lengths: prompt SHA-256 hex → answer tokens (int >= 0).
        unknown_tokens: length given to prompts not in ``lengths``.
    """

    def __init__(self, lengths: Mapping[str, int], unknown_tokens: int = 400):
        self.lengths = dict(lengths)
        self.unknown_tokens = int(unknown_tokens)

    @classmethod
    def from_records(cls, records: Iterable[Mapping]) -> "OraclePredictor":
        """From ``{prompt|sha256, answer_tokens|response_tokens}`` dicts (the emulator's trace
        format; ``sha256`` is the hex digest of the prompt). Records without both are skipped."""
        lengths = {}
        for r in records:
            tok = answer_tokens_of(r, TRACE_TOKEN_FIELDS)
            key = r.get("sha256")
            if key is None and isinstance(r.get("prompt"), str):
                key = prompt_hash(r["prompt"])
            if isinstance(key, str) and isinstance(tok, (int, float)) and not isinstance(tok, bool):
                lengths[key] = int(tok)
        return cls(lengths)

    @classmethod
    def from_trace(cls, path: str | os.PathLike) -> "OraclePredictor":
        """From a JSONL trace file of ``{prompt|sha256, answer_tokens}`` lines.

        Raises:
            FileNotFoundError: no such file.
        """
        with open(Path(path), encoding="utf-8") as f:
            return cls.from_records(json.loads(line) for line in f if line.strip())

    def tokens(self, text: str) -> int:
        return self.lengths.get(prompt_hash(text), self.unknown_tokens)

    def predict(self, text: str) -> Prediction:
        n = self.tokens(text)
        probs = [0.0, 0.0, 0.0]
        probs[class_of_tokens(n)] = 1.0
        return Prediction.from_probs(probs, expected_tokens=float(n))

    def predict_many(self, texts):
        import numpy as np

        out = np.zeros((len(texts), 3), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, class_of_tokens(self.tokens(t))] = 1.0
        return out

    def score_many(self, texts):
        import numpy as np

        return np.asarray([self.tokens(t) for t in texts], dtype=np.float32)


def from_env() -> OraclePredictor:
    """The oracle of the trace file named by ``$SJF_BENCH_ORACLE_TRACE``.

    Raises:
        RuntimeError: the variable is not set.
    """
    path = os.environ.get(ENV_TRACE)
    if not path:
        raise RuntimeError(f"{ENV_TRACE} is not set")
    return OraclePredictor.from_trace(path)


def oracle_scheduler():
    """A :class:`~sjf_core._scheduler.Scheduler` ordering by true length: ``sjf-tokens`` with
    τ off, fed by :func:`from_env`. For ``SJF_SCHEDULER_FACTORY`` in the LiteLLM plugin
    (``sjf_lab.bench.oracle:oracle_scheduler``); slots from ``$SJF_SLOTS`` (default 1)."""
    from sjf_core._scheduler import Scheduler

    return Scheduler(predictor=from_env(), policy="sjf-tokens", tau="off", slots=int(os.environ.get("SJF_SLOTS", "1")),
                     lease_ttl_s=900.0, plugins=False, memory=False)
