"""``sjf predict``: print the class probabilities and expected answer tokens of prompts."""

from __future__ import annotations

import json
import sys

HELP = "predict the answer length of a prompt: P(Short), P(Medium), P(Long), expected tokens"


def add_arguments(p) -> None:
    p.add_argument("text", nargs="*", help="prompt text (several arguments are scored separately); "
                   "'-' or none reads one prompt from stdin")
    p.add_argument("--model", default=None, help="ONNX model file (default: the shipped model)")
    p.add_argument("--json", action="store_true", help="print one JSON object per prompt")


def run(args) -> int:
    from sjf_core.predict._predictor import PredictorError, load_predictor

    texts = list(args.text) if args.text and args.text != ["-"] else [sys.stdin.read()]
    try:
        pred = load_predictor(args.model)
    except PredictorError as exc:
        print(f"sjf predict: {exc}", file=sys.stderr)
        return 1
    for t in texts:
        if not t.strip():
            print("sjf predict: empty prompt, nothing to score", file=sys.stderr)
            return 2
        p = pred.predict(t)
        if args.json:
            print(json.dumps({"p_short": p.p_short, "p_medium": p.p_medium, "p_long": p.p_long,
                              "label": p.label, "expected_tokens": p.expected_tokens}))
        else:
            print(f"P(Short)={p.p_short:.3f}  P(Medium)={p.p_medium:.3f}  P(Long)={p.p_long:.3f}  "
                  f"label={p.label}  expected_tokens={p.expected_tokens:.0f}")
    return 0
