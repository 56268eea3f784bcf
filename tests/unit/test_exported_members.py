"""The public surface of ``sjf_core``, ``litellm_sjf`` and ``openai_sjf`` (in the manner of
httpx's ``tests/test_exported_members.py``).

For each package: every name in ``__all__`` resolves and is documented (a class or
function by its own docstring, a data name by a ``#:`` comment at its assignment or a
mention in the package docstring), and the public names ``dir()`` lists are exactly
``__all__``. Sub-packages and modules of the package itself (``sjf_core.policy``,
``litellm_sjf.settings``) are rooms, not exported names: they are left out of the
comparison but must carry a docstring. ``from __future__`` directives are not names.
"""

from __future__ import annotations

import __future__
import importlib
import inspect
import re
import types
from pathlib import Path

import pytest

PACKAGES = ["sjf_core", "litellm_sjf", "openai_sjf"]


def _own_doc(obj) -> str:
    """The object's own docstring ('' when absent or generated: dataclass signatures, enums)."""
    doc = obj.__doc__ if isinstance(obj.__doc__, str) else ""
    name = getattr(obj, "__name__", "")
    if inspect.isclass(obj) and (doc.startswith(f"{name}(") or doc in ("An enumeration.",)):
        return ""  # dataclass / Enum defaults, not documentation
    return doc.strip()


def _documented_data(pkg: types.ModuleType, name: str) -> bool:
    """A data name is documented by ``#:`` right above ``name = ...`` / ``name: T = ...`` in
    one of the package's modules, or by a mention in the package docstring."""
    if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", pkg.__doc__ or ""):
        return True
    assign = re.compile(rf"^\s*#:.*\n(?:\s*#:.*\n)*\s*{re.escape(name)}\s*[:=]", re.M)
    root = Path(pkg.__file__).parent
    return any(assign.search(p.read_text(encoding="utf-8")) for p in root.rglob("*.py"))


def _is_room(pkg: types.ModuleType, obj) -> bool:
    return isinstance(obj, types.ModuleType) and obj.__name__.startswith(pkg.__name__ + ".")


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_exists_and_is_documented(name):
    pkg = importlib.import_module(name)
    assert isinstance(pkg.__all__, list) and pkg.__all__, f"{name} has no __all__"
    assert len(set(pkg.__all__)) == len(pkg.__all__), f"{name}.__all__ lists a name twice"
    undocumented = []
    for member in pkg.__all__:
        obj = getattr(pkg, member)  # AttributeError: __all__ names a missing member
        if inspect.isclass(obj) or inspect.isroutine(obj) or isinstance(obj, types.ModuleType):
            if not _own_doc(obj):
                undocumented.append(member)
        elif not _documented_data(pkg, member):
            undocumented.append(member)
    assert not undocumented, f"{name}: exported but undocumented: {undocumented}"


@pytest.mark.parametrize("name", PACKAGES)
def test_public_names_are_exactly_all(name):
    pkg = importlib.import_module(name)
    public = set()
    for member in dir(pkg):
        if member.startswith("_"):
            continue
        obj = getattr(pkg, member)
        if isinstance(obj, __future__._Feature):
            continue  # `from __future__ import annotations` binds a name; it is no API
        if _is_room(pkg, obj):
            assert _own_doc(obj), f"{obj.__name__} has no docstring"
            continue
        public.add(member)
    assert sorted(public) == sorted(pkg.__all__), (
        f"{name}: public but not in __all__: {sorted(public - set(pkg.__all__))}; "
        f"in __all__ but not listed by dir(): {sorted(set(pkg.__all__) - public)}")


@pytest.mark.parametrize("name", PACKAGES)
def test_importing_every_module_changes_no_exported_name(name):
    """Importing a submodule binds its name on the package: a module named like an exported
    function (a ``status.py`` beside ``status()``) would replace that function once anything imports it."""
    import pkgutil

    pkg = importlib.import_module(name)
    before = {member: getattr(pkg, member) for member in pkg.__all__}
    for info in pkgutil.walk_packages(pkg.__path__, name + "."):
        importlib.import_module(info.name)
    changed = [member for member in pkg.__all__ if getattr(pkg, member) is not before[member]]
    assert not changed, f"{name}: importing its modules rebinds the exported {changed}"
