"""Which of aiohttp, tqdm, matplotlib, sjf_lab, onnxruntime an import statement pulls in, and who first imports each.

Usage: ``python scripts/import_check.py "import litellm_sjf"`` (run it with the interpreter of the
venv under test, e.g. one with only ``clairvoyant-sjf[litellm]`` installed).

For each watched module imported by the statement it prints the file and line that first imported
it and the last frame of our own code (``src/``) on that stack (None: not reached through our
code), then whether each watched module ended up in ``sys.modules``. Exit status 0.
"""

from __future__ import annotations

import sys
import traceback

WATCH = ("aiohttp", "tqdm", "matplotlib", "sjf_lab", "onnxruntime")


class _FirstImport:
    def __init__(self) -> None:
        self.pending = set(WATCH)

    def find_spec(self, name, path=None, target=None):
        if name in self.pending:
            self.pending.discard(name)
            frames = [f for f in traceback.extract_stack()[:-1] if "importlib" not in f.filename]
            ours = [f for f in frames if "/src/" in f.filename]
            by = f"{frames[-1].filename.split('site-packages/')[-1]}:{frames[-1].lineno}" if frames else "?"
            our = f"{ours[-1].filename.split('/src/')[-1]}:{ours[-1].lineno}" if ours else None
            print(f"first import of {name}: by {by}; our last frame: {our}")
        return None  # never finds anything itself


def main(argv: list[str]) -> int:
    stmt = argv[1] if len(argv) > 1 else "import litellm_sjf"
    finder = _FirstImport()
    sys.meta_path.insert(0, finder)
    try:
        exec(compile(stmt, "<import_check>", "exec"), {})
    finally:
        sys.meta_path.remove(finder)
    print(stmt, "->", {m: m in sys.modules for m in WATCH})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
