"""What the ``sjf`` tools read and what their help promises (after a fresh user's day):

* every reader of (prompt, answer length) rows takes the same documented field names
  (docs/data.md: ``response_tokens``, ``answer_tokens``, ``completion_tokens``); before, ``sjf
  eval`` / ``sjf train`` said "no usable rows" to a file ``sjf demo`` and ``sjf bench`` read;
* a file without any says which field is missing and which fields its lines have;
* ``--help`` names a file of the repository (docs/, benchmarks/, models/reference/) only with
  "in a clone of the repository", names the prompt set the package really ships, and lists
  the LOSO families by name.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re

import pytest

from sjf_lab.cli import SUBCOMMANDS, main
from sjf_lab.data_rows import ANSWER_TOKEN_FIELDS

ROWS = [("What is the capital of Peru?", 20), ("Name a prime number.", 12),
        ("Write a long essay on the history of the printing press.", 1200),
        ("Write a detailed guide to sourdough baking.", 950), ("Explain TCP in a paragraph.", 300)]


def _file(tmp_path, field: str):
    f = tmp_path / f"rows_{field}.jsonl"
    f.write_text("".join(json.dumps({"prompt": p, field: n, "model": "m"}) + "\n" for p, n in ROWS))
    return f


@pytest.mark.parametrize("field", ANSWER_TOKEN_FIELDS)
def test_every_reader_takes_every_documented_name_of_the_answer_length(tmp_path, field):
    from sjf_lab.bench import workload
    from sjf_lab.bench.oracle import OraclePredictor
    from sjf_lab.commands.demo import pick_from_data
    from sjf_lab.emulator import Trace, prompt_hash
    from sjf_lab.sim.appmix import load_prompts
    from sjf_lab.train_data import load_rows, split_of, prompt_key

    f = _file(tmp_path, field)
    want = sorted(n for _, n in ROWS)
    assert sorted(r.tokens for r in load_rows([f])) == want  # sjf train, sjf eval
    assert sorted(r.tokens for r in workload.load_rows(f)) == want  # sjf bench --data
    assert sorted(p.answer_tokens for p in pick_from_data(f, 2, 2)) == [12, 20, 950, 1200]  # sjf demo --data
    split = split_of(prompt_key(ROWS[0][0]))
    assert (ROWS[0][0], 20) in load_prompts([str(f)], split)  # sjf bench --scenario app-burst
    records = [json.loads(line) for line in f.read_text().splitlines()]
    trace = Trace.from_records(records)  # sjf emulate --trace
    assert trace.items[prompt_hash(ROWS[2][0])].tokens == 1200
    assert OraclePredictor.from_records(records).lengths[prompt_hash(ROWS[2][0])] == 1200


def test_sjf_eval_scores_a_file_with_answer_tokens_as_it_scores_response_tokens(tmp_path, capsys):
    out = {}
    for field in ("response_tokens", "answer_tokens"):
        assert main(["eval", "--data", str(_file(tmp_path, field)), "--split", "all", "--json"]) == 0
        out[field] = json.loads(capsys.readouterr().out)["overall"]
    assert out["answer_tokens"] == out["response_tokens"] and out["answer_tokens"]


def test_no_usable_rows_says_which_field_is_missing(tmp_path, capsys):
    f = tmp_path / "mine.jsonl"
    f.write_text(json.dumps({"prompt": "OKAPI row text", "tokens": 3}) + "\n"
                 + json.dumps({"text": "x", "response_tokens": 2}) + "\n")
    for cmd in (["eval", "--data", str(f)], ["train", "--data", str(f), "--name", "x", "--out-dir", str(tmp_path)]):
        assert main(cmd) == 1
        err = " ".join(capsys.readouterr().err.split())
        assert "'response_tokens' or 'answer_tokens' or 'completion_tokens'" in err, err
        assert "1 line(s): no answer length" in err and "1 line(s): no 'prompt'" in err, err
        assert "the first such line has the fields ['prompt', 'tokens']" in err, err
        assert "OKAPI" not in err  # field names, never a row's text


def _helps() -> dict[str, list[tuple[list[str], str]]]:
    out = {}
    for name, modname in SUBCOMMANDS.items():
        p = argparse.ArgumentParser(prog=f"sjf {name}")
        importlib.import_module(modname).add_arguments(p)
        out[name] = [(a.option_strings, " ".join(a.help.split())) for a in p._actions if a.help]
    return out


def test_help_names_a_repository_file_only_as_in_a_clone():
    repo_file = re.compile(r"\b(?:docs|benchmarks)/[\w./-]+|models/reference")
    for name, actions in _helps().items():
        for opts, text in actions:
            if repo_file.search(text):
                assert "a clone of the repository" in text, (name, opts, text)


def test_bench_names_the_shipped_prompts_and_eval_the_families_and_model_a():
    from importlib import resources

    from sjf_lab.loso import FAMILIES

    helps = {name: dict((tuple(o), t) for o, t in actions) for name, actions in _helps().items()}
    data = helps["bench"][("--data",)]
    assert "sjf_lab/data/demo_prompts.jsonl" in data and "sjf_core" not in data, data
    assert resources.files("sjf_lab").joinpath("data/demo_prompts.jsonl").is_file()
    loso = helps["eval"][("--loso",)]
    assert all(fam in loso for fam in FAMILIES) and "sjf_lab.loso.FAMILIES" not in loso, loso
    assert "Model A" in helps["eval"][("--model",)] and "clone" in helps["eval"][("--model",)]


def test_the_data_doc_names_every_family_and_sends_no_one_into_source_code():
    from pathlib import Path

    from sjf_lab.loso import FAMILIES

    text = (Path(__file__).resolve().parents[2] / "docs" / "data.md").read_text()
    assert "sjf_lab.loso.FAMILIES" not in text
    for fam, stems in FAMILIES.items():
        assert f"`{fam}`" in text and all(f"`{s}`" in text for s in stems), fam
