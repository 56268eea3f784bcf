"""pyproject.toml builds without setuptools' deprecation of ``project.license`` as a TOML table
(warned at every install): the license is an SPDX expression, which needs setuptools >= 77, and
the installed metadata carries it (``make install`` reinstalls whenever pyproject.toml changes)."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_license_is_an_spdx_expression_with_a_setuptools_that_reads_it():
    doc = tomllib.loads(PYPROJECT.read_text())
    assert doc["project"]["license"] == "MIT"
    setuptools = next(Requirement(r) for r in doc["build-system"]["requires"] if Requirement(r).name == "setuptools")
    assert not setuptools.specifier.contains(Version("76.9")) and setuptools.specifier.contains(Version("77.0"))
    assert not any(c.startswith("License ::") for c in doc["project"].get("classifiers", []))  # refused with SPDX


def test_the_installed_metadata_carries_the_expression():
    assert metadata.metadata("clairvoyant-sjf")["License-Expression"] == "MIT"
