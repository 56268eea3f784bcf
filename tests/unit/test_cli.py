"""The ``sjf`` CLI on a runtime-only install: a missing tooling dependency names its extra."""

import sys

import pytest

from sjf_lab.cli import main


def _without(monkeypatch, *modules):
    # A None entry in sys.modules makes `import X` raise ModuleNotFoundError(name=X), which is
    # what a venv without the `lab` extra does; drop our modules that already imported them.
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)
    for name in [m for m in sys.modules if m.startswith(("sjf_lab.commands.emulate", "sjf_lab.emulator"))]:
        monkeypatch.delitem(sys.modules, name)


def test_command_needing_a_missing_extra_says_which(monkeypatch, capsys):
    _without(monkeypatch, "aiohttp")
    assert main(["emulate", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "needs aiohttp" in err and "clairvoyant-sjf[lab]" in err


def test_help_works_without_the_tooling_extras(monkeypatch, capsys):
    _without(monkeypatch, "aiohttp", "tqdm", "matplotlib", "xgboost")
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("predict", "emulate", "bench", "train"))


def test_unknown_missing_module_is_not_hidden(monkeypatch):
    _without(monkeypatch, "aiohttp")
    monkeypatch.setattr("sjf_lab.cli.EXTRA_OF", {})
    with pytest.raises(ModuleNotFoundError):
        main(["emulate", "--port", "0"])
