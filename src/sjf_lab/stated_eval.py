"""Evaluation of stated answer sizes (issue 23): our labelled set and the prompts of the data that
state a size.

Contract:

* :func:`load_labelled` reads ``tests/data/stated_sizes.jsonl`` (rows documented in
  ``tests/data/make_stated_sizes.py``); :func:`request_body` builds the chat request of a row (its
  system prompt, if any, then the user prompt).
* :func:`evaluate_labelled` (predictor, rows) -> per language and overall: rows, share of rows
  whose expected tokens lie within a factor of 2 of the stated tokens, Kendall τ-b between
  expected and stated tokens, and how many rows the reader read at all (no text in the result).
* :func:`found_in_data` (rows of the conversation data, docs/data.md) -> the prompts that state a size: prompt key
  hash (SHA-256 prefix of :func:`sjf_lab.train_data.prompt_key`), family, what the reader read,
  answer tokens. Never the text: the data may not be committed, only this finder.

``python -m sjf_lab.stated_eval [--split test] [--found conversations/]`` prints both.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

__all__ = ["LABELLED", "load_labelled", "request_body", "evaluate_labelled", "found_in_data", "main"]

LABELLED = Path(__file__).resolve().parents[2] / "tests" / "data" / "stated_sizes.jsonl"


def load_labelled(path=LABELLED, split: str | None = None) -> list[dict]:
    """Rows of the labelled set (``split`` "test" / "tune" / None = all)."""
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    return [r for r in rows if split is None or r["split"] == split]


def request_body(row: dict) -> dict:
    msgs = [{"role": "system", "content": row["system"]}] if row.get("system") else []
    return {"model": "m", "messages": msgs + [{"role": "user", "content": row["prompt"]}]}


def _scores(pred, rows) -> tuple[np.ndarray, list]:
    from sjf_core.predict._stated import read_size
    from sjf_core.predict._text import scored_text

    texts = [scored_text(request_body(r)) for r in rows]
    return np.array([pred.predict(t).expected_tokens for t in texts]), [read_size(t) for t in texts]


def _metrics(expected: np.ndarray, stated: np.ndarray, read: list) -> dict:
    from sjf_lab.rank_metrics import kendall_tau_b

    ratio = expected / stated
    within = (ratio >= 0.5) & (ratio <= 2.0)
    tau = kendall_tau_b(expected, stated) if len(stated) > 2 else float("nan")
    return {"rows": int(len(stated)), "within_2x": float(within.mean()), "tau_b": float(tau),
            "read": int(sum(s is not None and s.kind != "vague" for s in read)),
            "median_ratio": float(np.median(ratio))}


def evaluate_labelled(pred, rows: list[dict]) -> dict:
    """Per language ("all" too): rows, within_2x, tau_b, read, median_ratio (module docstring)."""
    expected, read = _scores(pred, rows)
    stated = np.array([r["stated_tokens"] for r in rows], dtype=np.float64)
    langs = defaultdict(list)
    for i, r in enumerate(rows):
        langs[r["lang"]].append(i)
        if r.get("app"):
            langs["apps over pasted text"].append(i)
        if r.get("trap"):
            langs["with a size that is not the answer's"].append(i)
    out = {lang: _metrics(expected[idx], stated[idx], [read[i] for i in idx]) for lang, idx in sorted(langs.items())}
    out["all"] = _metrics(expected, stated, read)
    return out


def found_in_data(data_rows) -> list[dict]:
    """Prompts of the data that state a size (one per distinct prompt): key hash, family, label,
    kind, stated tokens, median answer tokens, answers."""
    from sjf_core.predict._stated import read_size
    from sjf_lab.loso import family_of

    by = defaultdict(list)
    first = {}
    for r in data_rows:
        by[r.key].append(r.tokens)
        first.setdefault(r.key, r)
    out = []
    for key, toks in by.items():
        s = read_size(first[key].prompt)
        if s is None:
            continue
        out.append({"key_sha256": hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:16],
                    "family": family_of(first[key].source), "kind": s.kind, "label": s.label,
                    "stated_tokens": round(s.tokens, 1), "answer_tokens_median": float(np.median(toks)),
                    "answers": len(toks)})
    return out


def _print_table(title: str, res: dict) -> None:
    print(title)
    print(f"{'language / group':<40}{'rows':>6}{'read':>6}{'within 2x':>11}{'tau-b':>8}{'median exp/stated':>19}")
    for k, m in res.items():
        print(f"{k:<40}{m['rows']:>6}{m['read']:>6}{100 * m['within_2x']:>10.1f}%{m['tau_b']:>8.3f}"
              f"{m['median_ratio']:>19.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sjf_lab.stated_eval", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="ONNX model (default: the shipped one)")
    ap.add_argument("--split", choices=("test", "tune", "all"), default="test")
    ap.add_argument("--no-sizes", action="store_true", help="the model alone (stated sizes not read)")
    ap.add_argument("--found", default=None, metavar="DATA", help="also list what the reader finds in DATA")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from sjf_core.predict._predictor import load_predictor

    pred = load_predictor(args.model)
    pred.read_sizes = not args.no_sizes
    rows = load_labelled(split=None if args.split == "all" else args.split)
    res = {"labelled": evaluate_labelled(pred, rows)}
    if args.found:
        from sjf_lab.train_data import load_rows

        found = found_in_data(load_rows([args.found]))
        kinds = defaultdict(int)
        for f in found:
            kinds[f"{f['family']}/{f['kind']}"] += 1
        res["found"] = {"prompts": len(found), "by_family_kind": dict(sorted(kinds.items()))}
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    _print_table(f"labelled set, split {args.split}, sizes {'off' if args.no_sizes else 'on'}", res["labelled"])
    if "found" in res:
        print(f"\nsize-stating prompts found in {args.found}: {res['found']['prompts']}")
        for k, v in res["found"]["by_family_kind"].items():
            print(f"  {k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
