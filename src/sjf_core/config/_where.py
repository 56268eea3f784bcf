"""Naming a setting in a message (:class:`Where`), and every problem of the settings in one
error (:class:`SettingsError`): the composition's bookkeeping, shared by its readers
(:mod:`._read`) and its building (:mod:`._build`, :mod:`._values`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

__all__ = ["Where", "SettingsError", "FAILED"]

#: What :meth:`Where.step` returns for a part of the settings that failed (the build goes on without it).
FAILED: Any = type("Failed", (), {"__repr__": lambda self: "FAILED"})()


class SettingsError(ValueError):
    """Every problem found while reading and building the settings, raised once, at the end.

    Attributes:
        problems: each problem's message, in the order found (one alone is this error's
            message, word for word; several are numbered in it).
        warnings: the non-fatal findings the config would have carried (unknown ``SJF_*``
            names with the closest known one, conflicting deployments of one backend).
        retired: retired settings that were set (accepted and ignored).
    """

    def __init__(self, problems, warnings=(), retired=()):
        self.problems, self.warnings, self.retired = tuple(problems), tuple(warnings), tuple(retired)
        p = self.problems
        super().__init__(p[0] if len(p) == 1 else f"{len(p)} problems: " + " ".join(
            f"({i}) {m}" for i, m in enumerate(p, 1)))


class Where:
    """Names settings in error messages, wraps their parsing, and collects the problems found
    (:meth:`step`), so that every one is reported in one go (:meth:`raise_problems`)."""

    def __init__(self, names: Mapping[str, str], problems: list[str] | None = None):
        self.names = names
        self.problems: list[str] = list(problems or ())

    def step(self, fn: Callable[[], Any]) -> Any:
        """``fn()``, or :data:`FAILED` when it raised ValueError: its message is kept as a
        problem, word for word, and the build goes on without that part (its base value)."""
        try:
            return fn()
        except ValueError as exc:
            self.problems.append(str(exc))
            return FAILED

    def raise_problems(self, warnings=(), retired=()) -> None:
        """Raise :class:`SettingsError` with every problem found, if any."""
        if self.problems:
            raise SettingsError(self.problems, warnings, retired)

    def __call__(self, key: str) -> str:
        return self.names.get(key, key)

    def among(self, *keys: str) -> str:
        """The names of those of ``keys`` that were set (for a check that spans several)."""
        named = [self.names[k] for k in keys if k in self.names]
        files = {n.split(": ", 1)[0] for n in named if n.startswith("SJF_CONFIG file ")}
        if len(files) == 1 and all(n.startswith("SJF_CONFIG file ") for n in named):  # one file: name it once
            return f"{files.pop()}: " + " / ".join(n.split(": ", 1)[1] for n in named)
        return " / ".join(dict.fromkeys(named)) or " / ".join(keys)

    def check(self, key: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except (ValueError, TypeError) as exc:
            raise ValueError(f"bad SJF setting {self(key)}: {exc}") from None

    def conv(self, key: str, value: Any, conv: Callable) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"bad SJF setting {self(key)}: {value!r} is not a {conv.__name__}")
        return self.check(key, lambda: conv(value))

    def positive(self, key: str, value: Any) -> float:
        v = self.conv(key, value, float)
        if not v > 0:
            raise ValueError(f"bad SJF setting {self(key)}: must be > 0, got {value!r}")
        return v

    def port(self, key: str, value: Any) -> int:
        n = self.conv(key, value, int)
        if not 0 <= n <= 65535:
            raise ValueError(f"bad SJF setting {self(key)}: a TCP port is 0..65535, got {value!r}")
        return n
