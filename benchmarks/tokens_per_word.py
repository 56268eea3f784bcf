"""Tokens per word by language, measured with a real multilingual LLM tokenizer (issue 23).

The stated-size reader (``sjf_core.predict._sizes``) turns "N words" into answer tokens with a
tokens-per-word figure per language. This script measures it on the prompts of
the conversation data (docs/data.md) (the answers' text is not stored, only their lengths), grouped by
language (script for Chinese/Russian, stop words for English/German/French/Spanish):

* Tekken (Mistral NeMo's 131k tokenizer, shipped in the ``mistral-common`` wheel) tokens per
  whitespace word (Chinese: per Han character, the unit of "500字");
* the data's own unit, ``len(text) / 4`` (``response_tokens = response_chars // 4``), per word.

Prints one line per language. Run with a Python that has ``mistral-common`` installed
(``pip install mistral-common``; not a project dependency)::

    python benchmarks/tokens_per_word.py --data conversations/
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections import defaultdict
from pathlib import Path

_STOP = {
    "en": set("the and is are of to in that with for this you what how".split()),
    "de": set("der die das und ist nicht ich sie mit für ein eine auf dem den zu".split()),
    "fr": set("le la les et est une des du pour dans que qui avec pas je vous".split()),
    "es": set("el la los las y es una del para con que por como se su".split()),
}
_HAN = re.compile(r"[\u4e00-\u9fff]")
_CYR = re.compile(r"[\u0400-\u04ff]")


def language(text: str) -> str | None:
    """zh / ru by script share, en / de / fr / es by stop-word votes (None when unclear)."""
    n = len(text) or 1
    if len(_HAN.findall(text)) / n > 0.3:
        return "zh"
    if len(_CYR.findall(text)) / n > 0.4:
        return "ru"
    words = re.findall(r"[a-zäöüßéèêàâçñáíóúù]+", text.lower())
    if len(words) < 20:
        return None
    votes = {lang: sum(w in s for w in words) / len(words) for lang, s in _STOP.items()}
    best = max(votes, key=votes.get)
    second = sorted(votes.values())[-2]
    return best if votes[best] > 0.12 and votes[best] > 2 * second else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.environ.get("SJF_DATA_DIR", "conversations"), help="folder of the conversation data (docs/data.md; default $SJF_DATA_DIR or ./conversations)")
    ap.add_argument("--per-language", type=int, default=400, help="at most this many prompts per language")
    args = ap.parse_args()
    import mistral_common
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    tok = Tekkenizer.from_file(os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240911.json"))
    texts: dict[str, list[str]] = defaultdict(list)
    seen = set()
    for f in sorted(Path(args.data).glob("*.jsonl")):
        for line in open(f, encoding="utf-8"):
            p = json.loads(line)["prompt"]
            if p in seen or len(p) > 6000 or "```" in p:
                continue
            seen.add(p)
            lang = language(p)
            if lang and len(texts[lang]) < args.per_language:
                texts[lang].append(p)
    out = {}
    for lang, ts in sorted(texts.items()):
        n_tok = sum(len(tok.encode(t, bos=False, eos=False)) for t in ts)
        n_chars = sum(len(t) for t in ts)
        units = sum(len(_HAN.findall(t)) if lang == "zh" else len(t.split()) for t in ts)
        out[lang] = {"prompts": len(ts), "units": units, "tekken_per_unit": n_tok / units,
                     "chars4_per_unit": n_chars / 4 / units}
        print(f"{lang}: {len(ts)} prompts, {units} {'Han characters' if lang == 'zh' else 'words'}: "
              f"Tekken {n_tok / units:.2f} tokens per unit, len/4 {n_chars / 4 / units:.2f}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
