"""Training data for the length predictor: load JSONL logs, de-duplicate, split by prompt.

Accepted rows (one JSON object per line; other fields are ignored):

* conversation logs: ``{"prompt": str, "response_tokens": int, "source"?: str, "model"?: str}``
  (docs/data.md: the format and its public sources). ``source`` defaults to the file name stem.
* production logs written by :class:`sjf_lab.training_log.TrainingLogWriter`:
  ``{"features": [float, ...] | "features_sparse": {...}, "layout": "v1"|"v2", "completion_tokens": int}``.
  They carry no prompt text; their group key is a hash of the feature vector.

**Split by prompt, fixed and reproducible.** Every distinct prompt (whitespace-normalised,
case kept) gets a position ``u ∈ [0, 1)`` from SHA-256 of ``SPLIT_SEED + prompt``:
``u < 0.2`` test, ``0.2 ≤ u < 0.3`` validation, else train (:func:`split_of`). The same
prompt lands in the same split in every file, so a prompt shared by several files is
never in train for one and test for another (cross-file de-duplication).

**One label per prompt (documented choice).** Files where many models answer each prompt
(AlpacaEval: 221 models per prompt) would otherwise weigh a prompt by its number of answers
and give contradicting labels for one feature vector. Training therefore uses one example
per distinct prompt, across all files: its target is the **median of ln(1 + answer tokens)**
over all its answers (the typical model's length), and its class is the class of that median.
Evaluation stays at row level (paper Eq. 2 over every (Short, Long) row pair).
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from sjf_core.policy._entry import class_of_tokens
from sjf_lab.training_log import decode_features

__all__ = [
    "SPLIT_SEED", "TEST_FRACTION", "VAL_FRACTION", "Row", "Dataset", "load_rows", "split_of", "prompt_key",
    "build_dataset", "expand_paths", "model_key", "model_offsets", "target_of",
]

SPLIT_SEED = "clairvoyant-sjf/split/v1"
TEST_FRACTION = 0.2
VAL_FRACTION = 0.1

_WS = re.compile(r"\s+")


def normalise_prompt(prompt: str) -> str:
    """Whitespace-normalised prompt (the de-duplication identity)."""
    return _WS.sub(" ", prompt).strip()


def prompt_key(prompt: str) -> str:
    """Stable group key of a prompt: hex SHA-256 of :data:`SPLIT_SEED` + normalised prompt."""
    s = (SPLIT_SEED + "\x00" + normalise_prompt(prompt)).encode("utf-8", "replace")
    return hashlib.sha256(s).hexdigest()


def features_key(features: Sequence[float]) -> str:
    """Group key of a logged feature vector (production logs carry no prompt text)."""
    arr = np.asarray(features, dtype=np.float32).tobytes()
    return hashlib.sha256(SPLIT_SEED.encode() + b"\x01" + arr).hexdigest()


def split_of(key: str, test_fraction: float = TEST_FRACTION, val_fraction: float = VAL_FRACTION) -> str:
    """"train", "val" or "test" for a group key (see module docstring)."""
    u = int(key[:13], 16) / float(1 << 52)
    if u < test_fraction:
        return "test"
    if u < test_fraction + val_fraction:
        return "val"
    return "train"


@dataclass
class Row:
    """One (prompt, answer length) observation.

    Attributes:
        key: group key (prompt hash or feature hash).
        source: data source (file stem or the row's ``source``).
        tokens: answer tokens (int >= 0).
        prompt: prompt text, or None for a production-log row.
        features: logged features (float32 [F]) or None.
        layout: layout of ``features`` or None.
        model: answering model name or None.
    """

    key: str
    source: str
    tokens: int
    prompt: str | None = None
    features: np.ndarray | None = None
    layout: str | None = None
    model: str | None = None


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files from paths, directories (their ``*.jsonl``) and globs, sorted, de-duplicated."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out.extend(sorted(p.glob("*.jsonl")))
        elif any(c in str(p) for c in "*?["):
            out.extend(Path(g) for g in sorted(glob.glob(str(p))))
        else:
            out.append(p)
    seen, uniq = set(), []
    for p in out:
        r = p.resolve()
        if r not in seen:
            seen.add(r)
            uniq.append(p)
    return uniq


def _as_tokens(v) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(f) or f < 0:
        return None
    return int(f)


def load_rows(paths: Iterable[str | Path], stats: dict | None = None) -> list[Row]:
    """Read rows from JSONL files (see module docstring). Bad lines are skipped and counted.

    Args:
        paths: files, directories or globs.
        stats: optional dict, filled with per-file counts {"rows", "skipped"}.

    Raises:
        FileNotFoundError: a named file does not exist.
    """
    rows: list[Row] = []
    for path in expand_paths(paths):
        if not path.is_file():
            raise FileNotFoundError(f"training data file not found: {path}")
        n = skipped = 0
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    skipped += 1
                    continue
                if not isinstance(obj, dict):
                    skipped += 1
                    continue
                source = str(obj.get("source") or path.stem)
                if isinstance(obj.get("prompt"), str) and obj["prompt"].strip():
                    tok = _as_tokens(obj.get("response_tokens", obj.get("completion_tokens")))
                    if tok is None:
                        skipped += 1
                        continue
                    rows.append(Row(prompt_key(obj["prompt"]), source, tok, prompt=obj["prompt"],
                                    model=obj.get("model")))
                elif "features" in obj or "features_sparse" in obj:
                    tok = _as_tokens(obj.get("completion_tokens", obj.get("response_tokens")))
                    feats = decode_features(obj)
                    if tok is None or feats is None:
                        skipped += 1
                        continue
                    rows.append(Row(features_key(feats), source, tok, features=feats,
                                    layout=str(obj.get("layout") or "v1"), model=obj.get("model")))
                else:
                    skipped += 1
                    continue
                n += 1
        if stats is not None:
            stats[str(path)] = {"rows": n, "skipped": skipped}
    return rows


@dataclass
class Dataset:
    """Rows grouped by prompt, with the fixed split.

    Attributes:
        rows: all rows (row-level evaluation).
        groups: key -> indices into ``rows``.
        split: key -> "train" | "val" | "test".
    """

    rows: list[Row]
    groups: dict[str, list[int]] = field(default_factory=dict)
    split: dict[str, str] = field(default_factory=dict)

    def keys(self, part: str) -> list[str]:
        """Group keys of one split part, in a stable order."""
        return sorted(k for k, s in self.split.items() if s == part)

    def rows_of(self, part: str) -> list[Row]:
        """Rows whose prompt is in split ``part``."""
        return [r for r in self.rows if self.split[r.key] == part]

    def group_target(self, key: str) -> float:
        """Median ln(1 + tokens) over all answers of one prompt (the training target)."""
        return float(np.median([math.log1p(self.rows[i].tokens) for i in self.groups[key]]))

    def group_example(self, key: str) -> Row:
        """A representative row (the first) of a group, for its prompt or features."""
        return self.rows[self.groups[key][0]]

    def group_sources(self, key: str) -> list[str]:
        return sorted({self.rows[i].source for i in self.groups[key]})

    def counts(self) -> dict:
        """Per-source counts: rows, prompts, Short/Medium/Long rows, prompts per split part."""
        out: dict[str, dict] = {}
        seen: dict[str, set] = defaultdict(set)
        for r in self.rows:
            c = out.setdefault(r.source, {"rows": 0, "prompts": 0, "short": 0, "medium": 0, "long": 0,
                                          "train_prompts": 0, "val_prompts": 0, "test_prompts": 0})
            c["rows"] += 1
            c[("short", "medium", "long")[class_of_tokens(r.tokens)]] += 1
            if r.key not in seen[r.source]:
                seen[r.source].add(r.key)
                c["prompts"] += 1
                c[self.split[r.key] + "_prompts"] += 1
        return out


def build_dataset(rows: list[Row], test_fraction: float = TEST_FRACTION, val_fraction: float = VAL_FRACTION) -> Dataset:
    """Group rows by prompt (across files) and assign each prompt its split part."""
    ds = Dataset(rows)
    for i, r in enumerate(rows):
        ds.groups.setdefault(r.key, []).append(i)
    for k in ds.groups:
        ds.split[k] = split_of(k, test_fraction, val_fraction)
    return ds


# ---- training targets (shared by sjf_lab.train and the LOSO runner sjf_lab.loso_run) ------
def model_key(source: str, model) -> str:
    """The answering model of a row (its source's name when the row names none)."""
    return str(model) if model else f"source:{source}"


def model_offsets(ds: Dataset, keys: Sequence[str]) -> dict[str, float]:
    """Answering model -> its verbosity: the mean over its rows (of ``keys``' prompts) of
    ln(1 + tokens) minus the median of that prompt's answers. A model measured only on
    prompts nobody else answered gets 0 (its length is the prompt's), so single-model
    sources keep their level; in multi-model files the offset is a model's typical excess
    over the other models on the same prompts. Used by the ``demean`` target."""
    sums: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for k in keys:
        idx = ds.groups[k]
        if len(idx) < 2:
            continue
        vals = [math.log1p(ds.rows[i].tokens) for i in idx]
        med = float(np.median(vals))
        for i, v in zip(idx, vals):
            s = sums[model_key(ds.rows[i].source, ds.rows[i].model)]
            s[0] += v - med
            s[1] += 1
    return {m: s[0] / s[1] for m, s in sums.items() if s[1] >= 5}


def target_of(ds: Dataset, keys: Sequence[str], mode: str, offsets: dict | None = None) -> np.ndarray:
    """Per-prompt training target float64 [len(keys)] (see :attr:`sjf_lab.loso_run.Recipe.target`)."""
    if mode == "median":
        return np.array([ds.group_target(k) for k in keys])
    if mode != "demean":
        raise ValueError(f"unknown target {mode!r}")
    off = offsets if offsets is not None else model_offsets(ds, keys)
    out = np.empty(len(keys))
    for j, k in enumerate(keys):
        vals = [math.log1p(ds.rows[i].tokens) - off.get(model_key(ds.rows[i].source, ds.rows[i].model), 0.0)
                for i in ds.groups[k]]
        out[j] = float(np.median(vals))
    return out
