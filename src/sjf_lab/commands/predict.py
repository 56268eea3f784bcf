"""``sjf predict``: print the class probabilities and expected answer tokens of prompts, and the
answer size each prompt states (issue 23)."""

from __future__ import annotations

import json
import sys

HELP = "predict the answer length of a prompt: P(Short), P(Medium), P(Long), expected tokens, stated size"


def add_arguments(p) -> None:
    p.add_argument("text", nargs="*", help="prompt text (several arguments are scored separately); "
                   "'-' or none reads one prompt from stdin")
    p.add_argument("--model", default=None, help="ONNX model file (default: the shipped model)")
    p.add_argument("--system", default=None, metavar="TEXT",
                   help="a system prompt sent with each prompt (scored as the proxy scores a chat request: the "
                        "user message, then the system instructions); with no prompt text, the system prompt alone")
    p.add_argument("--json", action="store_true", help="print one JSON object per prompt")


def _scored(text: str, system: str | None):
    """The text the scheduler would score for a chat request of ``text`` (+ ``system``)."""
    from sjf_core.predict._text import scored_text

    msgs = [{"role": "system", "content": system}] if system else []
    if text.strip():
        msgs.append({"role": "user", "content": text})
    return scored_text({"model": "m", "messages": msgs})


def run(args) -> int:
    from sjf_core.predict._predictor import PredictorError, load_predictor
    from sjf_core.predict._stated import read_size

    if args.text and args.text != ["-"]:
        texts = list(args.text)
    elif args.system and sys.stdin.isatty():
        texts = [""]
    else:
        texts = [sys.stdin.read()]
    try:
        pred = load_predictor(args.model)
    except PredictorError as exc:
        print(f"sjf predict: {exc}", file=sys.stderr)
        return 1
    for t in texts:
        scored = _scored(t, args.system)
        if scored is None:
            print("sjf predict: empty prompt, nothing to score", file=sys.stderr)
            return 2
        p = pred.predict(scored)
        size = read_size(scored)
        stated = None if size is None else size.label
        if args.json:
            print(json.dumps({"p_short": p.p_short, "p_medium": p.p_medium, "p_long": p.p_long,
                              "label": p.label, "expected_tokens": p.expected_tokens, "stated": stated,
                              "stated_kind": None if size is None else size.kind}, ensure_ascii=False))
        else:
            print(f"P(Short)={p.p_short:.3f}  P(Medium)={p.p_medium:.3f}  P(Long)={p.p_long:.3f}  "
                  f"label={p.label}  expected_tokens={p.expected_tokens:.0f}  stated: {stated or '-'}")
    return 0
