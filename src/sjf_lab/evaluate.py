"""Evaluate length predictors on held-out rows: ranking accuracy (Eq. 2), class accuracy, τ-b.

Peers are scored on the same rows in the same run: any ONNX model whose layout is known
(our models, the paper's published Model A) and the prompt-length rule (score = prompt
characters, the paper's Table 8 baseline without a threshold: a threshold cannot change
pairwise order except to add ties).

Evaluation is at **row level**: every test row (every model's answer to a test prompt)
is one example; rows of one prompt share its score. Split parts come from
:mod:`sjf_lab.train_data` (fixed, by prompt hash).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from sjf_lab.rank_metrics import class_accuracy, kendall_tau_b, ranking_accuracy
from sjf_lab.train_data import Row

__all__ = ["Peer", "model_peer", "length_peer", "score_rows", "evaluate", "format_table", "MIN_PER_CLASS"]

#: A source enters the headline table only with at least this many Short and Long rows.
MIN_PER_CLASS = 30


@dataclass
class Peer:
    """A scorer in the comparison.

    Attributes:
        name: display name.
        score_texts: texts -> (scores float64 [N], probs float32 [N, 3] or None).
        score_features: (features [N, F], layout) -> same, for prompt-less rows; or None.
        layout: feature layout of ``score_features`` or None.
    """

    name: str
    score_texts: Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray | None]]
    score_features: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | None]] | None = None
    layout: str | None = None


def model_peer(path: str | Path, name: str | None = None) -> Peer:
    """A peer from an ONNX model file (loaded with :func:`sjf_core.predict._predictor.load_predictor`)."""
    from sjf_core.predict._predictor import load_predictor

    pred = load_predictor(path)

    def from_features(x):
        probs, expected = pred.predict_features(x)
        scores = expected if pred.info.kind == "regressor" else probs[:, 2].astype(np.float64)
        return scores, probs

    def from_texts(texts):
        return from_features(pred.features_many(texts))

    return Peer(name or Path(path).stem, from_texts, from_features, pred.info.layout)


def length_peer() -> Peer:
    """The prompt-length rule: longer prompts are predicted to get longer answers."""

    def from_texts(texts):
        return np.array([len(t) for t in texts], dtype=np.float64), None

    def from_features(x):  # v1 and v2 both start with prompt_token_len
        return np.asarray(x[:, 0], dtype=np.float64), None

    return Peer("prompt-length rule", from_texts, from_features, "any")


def score_rows(peer: Peer, rows: Sequence[Row]) -> tuple[np.ndarray, np.ndarray | None]:
    """Scores [N] (NaN where the peer cannot score the row) and probs [N, 3] or None."""
    n = len(rows)
    scores = np.full(n, np.nan)
    probs = None
    by_prompt: dict[str, list[int]] = defaultdict(list)
    by_feat: list[int] = []
    for i, r in enumerate(rows):
        if r.prompt is not None:
            by_prompt[r.key].append(i)
        else:
            by_feat.append(i)
    keys = list(by_prompt)
    if keys:
        texts = [rows[by_prompt[k][0]].prompt for k in keys]
        s, p = peer.score_texts(texts)
        if p is not None:
            probs = np.full((n, 3), np.nan, dtype=np.float32)
        for j, k in enumerate(keys):
            idx = by_prompt[k]
            scores[idx] = s[j]
            if p is not None:
                probs[idx] = p[j]
    if by_feat and peer.score_features is not None:
        ok = [i for i in by_feat if peer.layout == "any" or rows[i].layout == peer.layout]
        if ok:
            s, p = peer.score_features(np.stack([rows[i].features for i in ok]))
            scores[ok] = s
            if p is not None:
                if probs is None:
                    probs = np.full((n, 3), np.nan, dtype=np.float32)
                probs[ok] = p
    return scores, probs


def _metrics(scores, probs, tokens) -> dict:
    ok = ~np.isnan(scores)
    s, t = scores[ok], tokens[ok]
    acc, n_s, n_l = ranking_accuracy(s, t)
    out = {"rows": int(ok.sum()), "short": n_s, "long": n_l, "ranking_accuracy": acc,
           "kendall_tau_b": kendall_tau_b(s, t) if len(s) > 1 else float("nan")}
    if probs is not None:
        out["class_accuracy"] = class_accuracy(probs[ok], t)
    return out


def evaluate(rows: Sequence[Row], peers: Sequence[Peer], by_source: bool = True) -> dict:
    """Metrics of every peer on ``rows``: overall and per source.

    Returns:
        ``{"peers": [names], "overall": {peer: metrics}, "sources": {source: {peer: metrics}},
        "macro": {peer: mean ranking accuracy over sources with >= MIN_PER_CLASS Short and Long}}``;
        metrics = rows, short, long, ranking_accuracy, kendall_tau_b, class_accuracy (classifiers).
    """
    tokens = np.array([r.tokens for r in rows], dtype=np.float64)
    sources = np.array([r.source for r in rows])
    result = {"peers": [p.name for p in peers], "overall": {}, "sources": {}, "macro": {}}
    all_scores = {}
    for peer in peers:
        s, p = score_rows(peer, rows)
        all_scores[peer.name] = (s, p)
        result["overall"][peer.name] = _metrics(s, p, tokens)
    if by_source:
        for src in sorted(set(sources.tolist())):
            m = sources == src
            result["sources"][src] = {
                name: _metrics(s[m], None if p is None else p[m], tokens[m]) for name, (s, p) in all_scores.items()
            }
    for name in result["peers"]:
        accs = [v[name]["ranking_accuracy"] for v in result["sources"].values()
                if v[name]["short"] >= MIN_PER_CLASS and v[name]["long"] >= MIN_PER_CLASS]
        result["macro"][name] = float(np.mean(accs)) if accs else float("nan")
    return result


def _pct(x) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def format_table(result: dict, metric: str = "ranking_accuracy", min_per_class: int = MIN_PER_CLASS,
                 show_all: bool = False) -> str:
    """A plain-text table: one line per source (with >= ``min_per_class`` Short and Long rows
    unless ``show_all``), one column per peer, values in %, then overall and macro lines."""
    peers = result["peers"]
    w = max(12, *(len(p) for p in peers))
    head = f"{'source':<34} {'rows':>7} {'S':>6} {'L':>6}  " + "  ".join(f"{p[:w]:>{w}}" for p in peers)
    lines = [f"{metric.replace('_', ' ')} (%), row level", head, "-" * len(head)]
    for src, per in result["sources"].items():
        m0 = per[peers[0]]
        if not show_all and (m0["short"] < min_per_class or m0["long"] < min_per_class):
            continue
        vals = "  ".join(f"{_pct(per[p].get(metric)):>{w}}" for p in peers)
        lines.append(f"{src:<34} {m0['rows']:>7} {m0['short']:>6} {m0['long']:>6}  {vals}")
    lines.append("-" * len(head))
    m0 = result["overall"][peers[0]]
    vals = "  ".join(f"{_pct(result['overall'][p].get(metric)):>{w}}" for p in peers)
    lines.append(f"{'all rows pooled':<34} {m0['rows']:>7} {m0['short']:>6} {m0['long']:>6}  {vals}")
    if metric == "ranking_accuracy":
        vals = "  ".join(f"{_pct(result['macro'][p]):>{w}}" for p in peers)
        lines.append(f"{'macro (sources shown)':<34} {'':>7} {'':>6} {'':>6}  {vals}")
    return "\n".join(lines)
