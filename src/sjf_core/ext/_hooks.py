"""Extension points (pluggy): custom predictors, ordering keys and queue-event observers.

A plugin is any object (a module, a class instance) whose functions are marked with
:data:`hookimpl` and named after the specs of :class:`SJFHookSpec`::

    from sjf_core.ext._hooks import hookimpl

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

:class:`~sjf_core._scheduler.Scheduler` loads them when it is built. The environment
variable ``SJF_PLUGINS`` chooses which: unset, empty or ``auto`` loads every entry point,
``none`` (or ``off``, ``0``) loads none, and ``name1,name2`` loads only those. Pass
``Scheduler(plugins=[obj, ...])`` to register plugin objects directly (no discovery),
``plugins=False`` for none, or a ready :class:`pluggy.PluginManager`.

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
import math
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

import pluggy

from sjf_core.admission._local import QueueEvents
from sjf_core.policy._entry import CLASS_NAMES, Entry, class_of_tokens
from sjf_core.policy._policies import Policy, RequestMeta, make_policy
from sjf_core.predict._prediction import Prediction

log = logging.getLogger("sjf_core.ext._hooks")

#: pluggy project name of the hook markers.
PROJECT = "clairvoyant_sjf"
#: Entry-point group scanned for installed plugins.
ENTRY_POINT_GROUP = "clairvoyant_sjf.plugins"
#: Environment variable selecting which entry points load ("auto", "none", "a,b").
PLUGINS_ENV = "SJF_PLUGINS"

hookspec = pluggy.HookspecMarker(PROJECT)
#: Decorator marking a plugin's hook implementations.
hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = [
    "hookimpl", "hookspec", "SJFHookSpec", "ENTRY_POINT_GROUP", "PLUGINS_ENV", "PROJECT",
    "make_plugin_manager", "discover_plugins", "install_plugins", "to_prediction",
    "PluginPredictor", "PluginPolicy", "PluginEvents",
]


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
    """Entry-point names to load: () for all, None for none."""
    if spec is None:
        spec = os.environ.get(PLUGINS_ENV, "")
    s = str(spec).strip().lower()
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
        entry_points: False to skip discovery; None to follow ``$SJF_PLUGINS``;
            "auto" for all entry points; or a comma-separated / list of names.

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


def _has_impls(pm: pluggy.PluginManager, hook: str) -> bool:
    return bool(getattr(pm.hook, hook).get_hookimpls())


# ---- predictor --------------------------------------------------------------------------

def _prob_prediction(probs: Sequence[Any], expected_tokens: Any = None) -> Prediction:
    ps = [float(p) for p in probs]
    if len(ps) != 3 or not all(math.isfinite(p) and p >= 0 for p in ps) or sum(ps) <= 0:
        raise ValueError("class probabilities must be 3 finite non-negative numbers with a positive sum")
    total = sum(ps)
    ps = [p / total for p in ps]
    if expected_tokens is not None:
        expected_tokens = float(expected_tokens)
        if not math.isfinite(expected_tokens) or expected_tokens < 0:
            raise ValueError("expected_tokens must be finite and >= 0")
    return Prediction.from_probs(ps, expected_tokens)


def _token_prediction(tokens: Any) -> Prediction:
    t = float(tokens)
    if not math.isfinite(t) or t < 0:
        raise ValueError("expected tokens must be finite and >= 0")
    probs = [0.0, 0.0, 0.0]
    probs[class_of_tokens(t)] = 1.0
    return Prediction(probs[0], probs[1], probs[2], CLASS_NAMES[class_of_tokens(t)], t)


def to_prediction(result: Any) -> Prediction | None:
    """Turn an ``sjf_predict`` result into a :class:`Prediction` (None stays None).

    Raises:
        ValueError, TypeError: the result has no usable shape (the message names the
            type only, never values).
    """
    if result is None:
        return None
    if isinstance(result, Prediction):
        return _prob_prediction((result.p_short, result.p_medium, result.p_long), result.expected_tokens)
    if isinstance(result, bool):
        raise TypeError("plugin predictor returned a bool")
    if isinstance(result, (int, float)):
        return _token_prediction(result)
    if isinstance(result, Mapping):
        probs = [result.get(k) for k in ("p_short", "p_medium", "p_long")]
        if all(p is not None for p in probs):
            return _prob_prediction(probs, result.get("expected_tokens"))
        if result.get("expected_tokens") is not None:
            return _token_prediction(result["expected_tokens"])
        raise ValueError("plugin predictor mapping lacks p_short/p_medium/p_long or expected_tokens")
    if isinstance(result, (str, bytes)):
        raise TypeError("plugin predictor returned a string")
    try:
        seq = list(result)
    except TypeError:
        raise TypeError(f"plugin predictor returned an unusable {type(result).__name__}") from None
    return _prob_prediction(seq)


class PluginPredictor:
    """Asks the ``sjf_predict`` plugins first, then the built-in predictor.

    Args:
        pm: the plugin manager.
        base: the built-in predictor spec as given to :class:`Scheduler` ("default",
            a model path, a predictor object, or None for none), loaded lazily.

    :meth:`predict` raises when a plugin raises or returns an unusable result; the
    scheduler then counts a predictor error and serves the request in FCFS order.
    """

    def __init__(self, pm: pluggy.PluginManager, base: Any = "default"):
        self.pm = pm
        self._base_spec = base
        self._base = None
        self._base_failed = False
        self._lock = threading.Lock()

    @property
    def base(self):
        """The built-in predictor, or None when disabled or unloadable."""
        if self._base is None and not self._base_failed and self._base_spec is not None:
            with self._lock:
                if self._base is None and not self._base_failed:
                    spec = self._base_spec
                    try:
                        if isinstance(spec, str):
                            from sjf_core.predict._predictor import load_predictor

                            self._base = load_predictor(None if spec == "default" else spec)
                        else:
                            self._base = spec
                    except Exception as exc:
                        self._base_failed = True
                        log.error("built-in predictor could not be loaded (%s); plugin predictions only",
                                  type(exc).__name__)
        return self._base

    def predict(self, text: str) -> Prediction | None:
        """Prediction for ``text``: the first plugin answer, else the built-in predictor's."""
        pred = to_prediction(self.pm.hook.sjf_predict(text=text))
        if pred is not None:
            return pred
        base = self.base
        return None if base is None else base.predict(text)


# ---- ordering key -----------------------------------------------------------------------

class PluginPolicy(Policy):
    """A policy whose key may be overridden by ``sjf_ordering_key`` plugins.

    Delegates everything else (τ, pending structure, fallback key) to ``base``.
    """

    def __init__(self, base: Policy, pm: pluggy.PluginManager):
        self.base = base
        self.pm = pm
        self.name = base.name
        self.tau_config = base.tau_config
        self.promotion = getattr(base, "promotion", "strict")
        self.k = getattr(base, "k", 1)

    def __getattr__(self, name: str) -> Any:
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def fallback_key(self) -> float:
        return self.base.fallback_key()

    def new_pending(self):
        return self.base.new_pending()

    def key(self, prediction: Prediction, meta: RequestMeta) -> float:
        default = float(self.base.key(prediction, meta))
        try:
            k = self.pm.hook.sjf_ordering_key(prediction=prediction, meta=meta, default_key=default,
                                              policy=str(self.base.name))
            if k is None or isinstance(k, bool):
                return default
            k = float(k)
            return k if math.isfinite(k) else default
        except Exception as exc:
            log.warning("sjf_ordering_key plugin failed (%s); policy key used", type(exc).__name__)
            return default

    def __repr__(self) -> str:
        return f"PluginPolicy({self.base!r})"


# ---- events -----------------------------------------------------------------------------

class PluginEvents(QueueEvents):
    """Forwards queue events to the ``sjf_on_*`` hooks, each plugin isolated from the others."""

    def __init__(self, pm: pluggy.PluginManager):
        self.pm = pm

    def _call(self, hook: str, **kwargs: Any) -> None:
        for impl in getattr(self.pm.hook, hook).get_hookimpls():
            try:
                impl.function(*[kwargs[a] for a in impl.argnames])
            except Exception as exc:
                log.warning("sjf plugin %s.%s failed (%s)", impl.plugin_name, hook, type(exc).__name__)

    def on_enqueue(self, queue, entry):
        self._call("sjf_on_enqueue", backend=_backend(queue), entry=entry)

    def on_dispatch(self, queue, entry, wait_s):
        self._call("sjf_on_dispatch", backend=_backend(queue), entry=entry, wait_s=wait_s)

    def on_complete(self, queue, entry, service_s, answer_tokens):
        self._call("sjf_on_complete", backend=_backend(queue), entry=entry, service_s=service_s,
                   answer_tokens=answer_tokens)

    def on_cancel(self, queue, entry):
        self._call("sjf_on_cancel", backend=_backend(queue), entry=entry)

    def on_reject(self, queue, entry=None, reason="unknown", *args, **kw):
        self._call("sjf_on_reject", backend=_backend(queue), reason=str(kw.get("reason", reason)))


def _backend(queue: Any) -> str:
    from sjf_core.ext._metrics import backend_label

    return backend_label(getattr(queue, "name", queue))


# ---- wiring into the Scheduler ----------------------------------------------------------

def install_plugins(scheduler: Any, plugins: Any = None) -> pluggy.PluginManager | None:
    """Wire plugins into a :class:`~sjf_core._scheduler.Scheduler` (called by its constructor).

    Also adds the default Prometheus metrics listener
    (:func:`sjf_core.ext._metrics.install_default_metrics`; ``SJF_METRICS=off`` to skip).

    Args:
        scheduler: the scheduler, before any queue is created.
        plugins: None (follow ``$SJF_PLUGINS``), False (none), "auto", a list of plugin
            objects, or a :class:`pluggy.PluginManager`.

    Returns:
        The plugin manager, or None when no plugin is registered (then the scheduler
        runs exactly as without this module).

    Raises:
        TypeError: ``plugins`` is of an unsupported type.
    """
    from sjf_core.ext._metrics import install_default_metrics

    install_default_metrics(scheduler.listeners)
    if plugins is False:
        return None
    if isinstance(plugins, pluggy.PluginManager):
        pm = plugins
    elif plugins is None or isinstance(plugins, str):
        pm = make_plugin_manager((), entry_points=plugins)
    elif isinstance(plugins, (list, tuple)):
        pm = make_plugin_manager(plugins, entry_points=False)
    else:
        raise TypeError(f"plugins must be None, False, a string, a list or a PluginManager, not {type(plugins).__name__}")
    if not pm.get_plugins():
        return None
    if _has_impls(pm, "sjf_predict"):
        scheduler._predictor_spec = PluginPredictor(pm, scheduler._predictor_spec)
    if _has_impls(pm, "sjf_ordering_key"):
        base = make_policy(scheduler.policy_spec, **scheduler.policy_options)
        scheduler.policy_spec = PluginPolicy(base, pm)
    if any(_has_impls(pm, h) for h in ("sjf_on_enqueue", "sjf_on_dispatch", "sjf_on_complete",
                                       "sjf_on_cancel", "sjf_on_reject")):
        scheduler.listeners.append(PluginEvents(pm))
    names = [pm.get_name(p) for p in pm.get_plugins()]
    log.info("sjf plugins active: %s", ", ".join(sorted(str(n) for n in names)))
    return pm
