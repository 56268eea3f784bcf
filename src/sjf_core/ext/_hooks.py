"""Extension points (pluggy): custom predictors, ordering keys and queue-event observers.

A plugin is any object (a module, a class instance) whose functions are marked with
:data:`hookimpl` and named after the specs of :class:`SJFHookSpec`::

    from sjf_core import hookimpl

    @hookimpl
    def sjf_predict(text):
        return [0.7, 0.2, 0.1]            # P(Short), P(Medium), P(Long)

    @hookimpl
    def sjf_on_complete(backend, entry, service_s, answer_tokens):
        ...

**Discovery.** Installed plugins are found through the entry-point group
``clairvoyant_sjf.plugins`` (:data:`ENTRY_POINT_GROUP`); declare one in the plugin's
``pyproject.toml``::

    [project.entry-points."clairvoyant_sjf.plugins"]
    my_plugin = "my_package.sjf_plugin"

:class:`~sjf_core._scheduler.Scheduler` installs them when it is built, through
:func:`install_plugins`. ``SchedulerConfig.plugins`` (``SJF_PLUGINS``) chooses which:
unset, empty or ``auto`` loads every entry point, ``none`` (or ``off``, ``0``) loads none,
and ``name1,name2`` loads only those. Pass ``Scheduler(plugins=[obj, ...])`` to register
plugin objects directly (no discovery), ``plugins=False`` for none, or a ready
:class:`pluggy.PluginManager`.

**Installing and undoing.** ``handle = install_plugins(scheduler, plugins)`` wires the
plugins in through the scheduler's public :meth:`~sjf_core._scheduler.Scheduler.extend`
(a predictor wrapper, a policy wrapper for queues made from then on, an event listener on
every queue) and returns a :class:`PluginHandle`; ``handle.undo()`` takes them out again.

**Safety.** A plugin never turns a request that would have succeeded into a failure:

* a plugin that fails to import or to validate is logged and skipped;
* a predictor hook that raises or returns garbage makes that request unscored
  (FCFS order, counted as a predictor error, DESIGN.md invariant 5);
* an ordering-key hook that raises or returns a non-finite value gives the policy's
  own key;
* an event hook that raises is logged; the other plugins and the queue go on.

**Privacy.** Only ``sjf_predict`` receives prompt text, so that a custom predictor (an
embedding model, say) can score it in-process. A plugin must not log, store or send it
anywhere (DESIGN.md invariant 6). Every other hook gets numbers and class names only.

Event hooks run synchronously on the event loop that owns the queue: keep them fast
and never block.
"""


from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import pluggy

from sjf_core.ext._hookspec import (ENTRY_POINT_GROUP, PLUGINS_ENV, PROJECT, SJFHookSpec, discover_plugins,
                                    has_impls, hookimpl, hookspec, make_plugin_manager)
from sjf_core.ext._plugin_parts import PluginEvents, PluginPolicy, PluginPredictor, to_prediction

log = logging.getLogger("sjf_core.ext._hooks")

__all__ = [
    "hookimpl", "hookspec", "SJFHookSpec", "ENTRY_POINT_GROUP", "PLUGINS_ENV", "PROJECT",
    "make_plugin_manager", "discover_plugins", "install_plugins", "to_prediction",
    "PluginPredictor", "PluginPolicy", "PluginEvents", "PluginHandle",
]

_EVENT_HOOKS = ("sjf_on_enqueue", "sjf_on_dispatch", "sjf_on_complete", "sjf_on_cancel", "sjf_on_reject")


@dataclass
class PluginHandle:
    """What :func:`install_plugins` put into a scheduler, and how to take it out.

    Attributes:
        manager: the :class:`pluggy.PluginManager`, or None when no plugin was registered
            (then nothing was installed and :meth:`undo` does nothing). A handle is true
            when a manager is installed.
    """

    manager: pluggy.PluginManager | None = None
    _undo: Callable[[], None] | None = field(default=None, repr=False)

    def __bool__(self) -> bool:
        return self.manager is not None

    @property
    def installed(self) -> bool:
        """True until :meth:`undo` (and only when a plugin was registered)."""
        return self._undo is not None

    def undo(self) -> None:
        """Take the plugins out: the predictor and the policy of new queues are the
        scheduler's own again, and no queue calls the event hooks. Idempotent."""
        fn, self._undo = self._undo, None
        if fn is not None:
            fn()


def _manager(plugins: Any) -> pluggy.PluginManager | None:
    if plugins is False:
        return None
    if isinstance(plugins, pluggy.PluginManager):
        return plugins
    if plugins is None or isinstance(plugins, str):
        return make_plugin_manager((), entry_points=plugins)
    if isinstance(plugins, (list, tuple)):
        return make_plugin_manager(plugins, entry_points=False)
    raise TypeError(f"plugins must be None, False, a string, a list or a PluginManager, not {type(plugins).__name__}")


def install_plugins(scheduler: Any, plugins: Any = "auto") -> PluginHandle:
    """Wire plugins into a :class:`~sjf_core._scheduler.Scheduler` through its
    :meth:`~sjf_core._scheduler.Scheduler.extend` (never its private attributes).

    Args:
        scheduler: the scheduler; the policy wrapper applies to queues it makes from now on
            (install before the first request to cover every queue).
        plugins: "auto"/None (every entry point), "none", "a,b" (those entry points),
            False (none), a list of plugin objects, or a :class:`pluggy.PluginManager`.

    Returns:
        A :class:`PluginHandle`; ``handle.undo()`` removes what was installed.

    Raises:
        TypeError: ``plugins`` is of an unsupported type.
    """
    pm = _manager(plugins)
    if pm is None or not pm.get_plugins():
        return PluginHandle(None)
    parts: dict[str, Any] = {}
    if has_impls(pm, "sjf_predict"):
        parts["predictor"] = lambda base: PluginPredictor(base, pm)
    if has_impls(pm, "sjf_ordering_key"):
        parts["policy"] = lambda base: PluginPolicy(base, pm)
    if any(has_impls(pm, h) for h in _EVENT_HOOKS):
        parts["listener"] = PluginEvents(pm)
    undo = scheduler.extend(**parts)
    names = [pm.get_name(p) for p in pm.get_plugins()]
    log.info("sjf plugins active: %s", ", ".join(sorted(str(n) for n in names)))
    return PluginHandle(pm, undo)
