"""Print the LiteLLM proxy's dependencies, one requirement a line, for `pip install` by name.

Contract: reads the installed `litellm` distribution's metadata (or a wheel given with
`--wheel FILE`), keeps the requirements of its `proxy` extra whose markers hold here, and
prints them, minus the `litellm-proxy` meta-package (from 1.108 on the `[proxy]` extra needs it,
and a package index without it makes pip backtrack to an older LiteLLM). Exact `==` pins
(LiteLLM's own companion packages, e.g. `litellm-enterprise`, `litellm-proxy-extras`) are printed
as the bare name: an index that lacks that one build then still serves the newest it has. Every
other range is kept as LiteLLM declares it. Exit status 1 when litellm is not installed.

Used by `make test-litellm-newest`:
    python scripts/litellm_proxy_deps.py > reqs.txt && python -m pip install -r reqs.txt
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from email.parser import Parser
from importlib import metadata

from packaging.requirements import Requirement

#: the meta-package the `[proxy]` extra needs from LiteLLM 1.108 on; not on every index
SKIP = {"litellm-proxy"}


def _requires(wheel: str | None) -> list[str]:
    if wheel is None:
        return metadata.requires("litellm") or []
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        msg = Parser().parsestr(z.read(name).decode("utf-8"))
    return msg.get_all("Requires-Dist") or []


def proxy_requirements(requires: list[str]) -> list[str]:
    """The `proxy` extra's requirements of ``requires`` (Requires-Dist lines) that apply to
    this interpreter, minus :data:`SKIP`, exact pins relaxed to the bare name."""
    out: dict[str, str] = {}
    for line in requires:
        req = Requirement(line)
        if req.marker is None or not req.marker.evaluate({"extra": "proxy"}):
            continue
        if req.marker.evaluate({"extra": ""}):  # a core dependency: pip installs it with litellm
            continue
        name = req.name.lower().replace("_", "-")
        if name in SKIP:
            continue
        pinned = any(s.operator in ("==", "===") for s in req.specifier)
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        spec = "" if pinned else str(req.specifier)
        # one line per package: a later marker variant of the same name replaces nothing that applies
        out.setdefault(name, f"{req.name}{extras}{spec}")
    return list(out.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", help="read this litellm wheel's metadata instead of the installed litellm")
    args = ap.parse_args(argv)
    try:
        reqs = proxy_requirements(_requires(args.wheel))
    except metadata.PackageNotFoundError:
        print("litellm is not installed", file=sys.stderr)
        return 1
    print("\n".join(reqs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
