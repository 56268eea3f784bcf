"""Print, on one line, the versions a test leg runs on (CI logs say what was tested).

Usage: ``python scripts/versions.py LEG`` — Python, the packages the plugins meet (litellm,
openai, httpx / httpx2, onnxruntime, numpy, redis-py, pytest, playwright) as installed in this
interpreter's environment ("-" when absent), and the external programs the tests start
(redis-server, Debian's chromium). Never fails: an unreadable version prints as "?".
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version

PACKAGES = ("litellm", "openai", "httpx", "httpx2", "onnxruntime", "numpy", "redis", "pytest", "playwright")
PROGRAMS = (("redis-server", ["redis-server", "--version"]), ("chromium", ["chromium", "--version"]))


def package(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "-"


def program(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return "-"
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    words = [w.removeprefix("v=") for w in out.split() if any(c.isdigit() for c in w) and "." in w]
    return words[0] if words else "?"


def main() -> None:
    leg = sys.argv[1] if len(sys.argv) > 1 else "tests"
    parts = [f"python {platform.python_version()}"] + [f"{p} {package(p)}" for p in PACKAGES]
    parts += [f"{name} {program(argv)}" for name, argv in PROGRAMS]
    print(f"make {leg}: versions: " + ", ".join(parts), flush=True)


if __name__ == "__main__":
    main()
