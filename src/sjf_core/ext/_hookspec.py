"""Hook specifications, markers and plugin discovery of clairvoyant-sjf (pluggy).

Contract: :data:`hookimpl` marks a plugin's functions; :class:`SJFHookSpec` names the
hooks; :func:`make_plugin_manager` registers plugin objects and/or the entry points of
:data:`ENTRY_POINT_GROUP` and never raises for a broken plugin (logged, skipped). See
:mod:`sjf_core.ext._hooks` for the safety and privacy rules.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Sequence
from importlib import metadata
from typing import Any

import pluggy

from sjf_core.policy._entry import Entry
from sjf_core.policy._policies import RequestMeta
from sjf_core.predict._prediction import Prediction

log = logging.getLogger("sjf_core.ext._hooks")

__all__ = ["hookimpl", "hookspec", "SJFHookSpec", "ENTRY_POINT_GROUP", "PLUGINS_ENV", "PROJECT",
           "make_plugin_manager", "discover_plugins", "has_impls"]

#: pluggy project name of the hook markers.
PROJECT = "clairvoyant_sjf"
#: Entry-point group scanned for installed plugins.
ENTRY_POINT_GROUP = "clairvoyant_sjf.plugins"
#: The setting selecting which entry points load ("auto", "none", "a,b"), read by :mod:`sjf_core.config`.
PLUGINS_ENV = "SJF_PLUGINS"

hookspec = pluggy.HookspecMarker(PROJECT)
#: Decorator marking a plugin's hook implementations.
hookimpl = pluggy.HookimplMarker(PROJECT)


class SJFHookSpec:
    """Hook specifications of clairvoyant-sjf (implement any subset)."""

    @hookspec(firstresult=True)
    def sjf_predict(self, text: str) -> Any:
        """Predict the answer length of a prompt (a custom predictor).

        Args:
            text: the scored prompt text (str, non-empty, UTF-8 encodable; see
                :func:`sjf_core.predict._text.scored_text`). Keep it in-process.

        Returns:
            One of: a :class:`~sjf_core.predict._prediction.Prediction`; a sequence of three
            class probabilities ``[P(Short), P(Medium), P(Long)]`` (non-negative,
            normalised here); a mapping with ``p_short``/``p_medium``/``p_long`` and/or
            ``expected_tokens``; a number of expected answer tokens (>= 0); or None to
            defer to the next plugin and finally to the built-in predictor. The first
            non-None result wins (plugins registered last are asked first).
        """

    @hookspec(firstresult=True)
    def sjf_ordering_key(self, prediction: Prediction, meta: RequestMeta, default_key: float, policy: str) -> Any:
        """Override the ordering key of a scored request (lower is served sooner).

        Args:
            prediction: the request's prediction.
            meta: its scheduling metadata (max_tokens, priority, deadline_s).
            default_key: the key the policy computed (float).
            policy: the policy name ("sjf", "sjf-tokens", "fcfs", ...).

        Returns:
            A finite float key, or None to keep ``default_key``. Priority still
            sorts first and arrival order breaks ties; the τ guard still applies.
        """

    @hookspec
    def sjf_on_enqueue(self, backend: str, entry: Entry) -> None:
        """A request entered the queue of ``backend`` (``entry``: numbers only; read-only)."""

    @hookspec
    def sjf_on_dispatch(self, backend: str, entry: Entry, wait_s: float) -> None:
        """A request was granted a slot after waiting ``wait_s`` seconds."""

    @hookspec
    def sjf_on_complete(self, backend: str, entry: Entry, service_s: float, answer_tokens: int | None) -> None:
        """A granted request released its slot after ``service_s`` seconds;
        ``answer_tokens`` is its true answer length when known."""

    @hookspec
    def sjf_on_cancel(self, backend: str, entry: Entry) -> None:
        """A caller left while queued (disconnect, timeout); its request never ran."""

    @hookspec
    def sjf_on_reject(self, backend: str, reason: str) -> None:
        """Overload control refused a request before admission (``reason``: e.g. "queue_depth")."""


# ---- plugin manager and discovery --------------------------------------------------------

_discovered: dict[tuple, list[tuple[str, Any]]] = {}
_discover_lock = threading.Lock()


def _selection(spec: Any) -> tuple[str, ...] | None:
    """Entry-point names to load (``spec``: "auto", "none", "a,b"; None is "auto"): () for all, None for none."""
    s = str(spec if spec is not None else "auto").strip().lower()
    if s in ("", "auto", "all", "1", "on", "true"):  # unset or empty: every entry point
        return ()
    if s in ("none", "off", "0", "false", "no"):
        return None
    return tuple(sorted(n.strip() for n in str(spec).split(",") if n.strip()))


def discover_plugins(names: Sequence[str] = (), refresh: bool = False) -> list[tuple[str, Any]]:
    """Load the plugins of the ``clairvoyant_sjf.plugins`` entry-point group.

    Args:
        names: entry-point names to load; empty for all.
        refresh: ignore the per-process cache (it is keyed on ``sys.path``).

    Returns:
        ``[(name, plugin_object), ...]``. An entry point that fails to import is
        logged (name and exception type only) and skipped; never raises.
    """
    key = (tuple(names), tuple(sys.path))
    with _discover_lock:
        if not refresh and key in _discovered:
            return list(_discovered[key])
        found: list[tuple[str, Any]] = []
        try:
            eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
        except Exception as exc:  # pragma: no cover - broken metadata on sys.path
            log.error("entry points of %s could not be read (%s)", ENTRY_POINT_GROUP, type(exc).__name__)
            eps = []
        seen = set()
        for ep in eps:
            if (names and ep.name not in names) or ep.name in seen:
                continue
            seen.add(ep.name)
            try:
                found.append((ep.name, ep.load()))
            except Exception as exc:
                log.error("sjf plugin %r (%s) failed to load (%s: %s); skipped",
                          ep.name, ep.value, type(exc).__name__, exc)
        missing = set(names) - seen
        if missing:
            log.warning("sjf plugins not installed: %s", ", ".join(sorted(missing)))
        _discovered[key] = found
        return list(found)


def make_plugin_manager(plugins: Sequence[Any] = (), entry_points: Any = False) -> pluggy.PluginManager:
    """A plugin manager with the SJF hook specs.

    Args:
        plugins: plugin objects to register (modules, instances).
        entry_points: False to skip discovery; None or "auto" for all entry points;
            "none" for none; or a comma-separated string / list of names
            (``SchedulerConfig.plugins``, i.e. ``SJF_PLUGINS``).

    Returns:
        The manager. A plugin that fails validation (a misspelt hook argument, say)
        is logged and skipped.
    """
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(SJFHookSpec)
    todo: list[tuple[str | None, Any]] = [(None, p) for p in plugins]
    if entry_points is not False:
        if isinstance(entry_points, (list, tuple)):
            entry_points = ",".join(entry_points)
        sel = _selection(entry_points)
        if sel is not None:
            todo.extend(discover_plugins(sel))
    for name, plugin in todo:
        try:
            if not pm.is_registered(plugin):
                pm.register(plugin, name=name)
        except Exception as exc:
            log.error("sjf plugin %r rejected (%s: %s); skipped", name or type(plugin).__name__, type(exc).__name__, exc)
    return pm


def has_impls(pm: pluggy.PluginManager, hook: str) -> bool:
    return bool(getattr(pm.hook, hook).get_hookimpls())
