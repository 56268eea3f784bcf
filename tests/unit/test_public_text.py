"""No team-internal paths in what users read (issue 29): the README, docs, examples, the
sources' docstrings and help texts, and the benchmark scripts name no ``../shared`` folder and
no absolute path of the project's own machines; the tools' data and cache have public,
configurable places (docs/data.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INTERNAL = re.compile(r"\.\./shared|/work/|/root/|/home/\w")
TEXT = (".md", ".py", ".yaml", ".yml", ".json", ".html", ".toml", ".txt", ".jsonl")


def test_user_facing_text_names_no_internal_path():
    files = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for top in ("docs", "examples", "src", "benchmarks"):
        files += [p for p in (ROOT / top).rglob("*") if p.suffix in TEXT and ".egg-info" not in str(p)]
    hits = []
    for p in files:
        for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if INTERNAL.search(line):
                hits.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert len(files) > 100 and hits == [], "\n".join(hits)


def test_the_feature_cache_is_the_users_cache_directory_unless_set(monkeypatch, tmp_path):
    from sjf_lab.loso_run import default_cache_dir

    monkeypatch.delenv("SJF_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "clairvoyant-sjf"
    monkeypatch.setenv("SJF_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
