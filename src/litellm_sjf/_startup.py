"""Start-up checks: one clear warning for each setting that silently weakens a guarantee.

``config_warnings(settings, config) -> list[str]`` (pure: ``config`` is the proxy's
parsed config.yaml, a dict) finds:

* ``general_settings.cancel_on_disconnect`` missing or false: a client that leaves while
  queued is not cancelled, its request still reaches the backend when its turn comes;
* deployments that share one backend (one queue key) with different slot settings
  (the plugin's ``backends`` entries, ``SJF_BACKEND_SLOTS``, or LiteLLM's own
  ``max_parallel_requests`` of the deployments);
* a backend set to ``on_disconnect: drain`` behind a provider whose streams the plugin is
  not known to drain (measured on LiteLLM 1.106.12: ``openai/``, ``ollama/`` and
  ``ollama_chat/`` streams are read on after the client left; others may be closed by
  LiteLLM regardless, and are then released at once: use ``probe``);
* box settings that can take no effect (docs/boxes.md): keyed on a URL that is no
  deployment's ``api_base``, or naming a model that no deployment on that box serves
  (:meth:`sjf_core.config.SchedulerConfig.unused_box_settings`);
* conflicts found while reading the plugin settings, and retired settings that are
  ignored now.

``run_startup_checks(settings)`` reads the config file the running proxy was started
with (:func:`litellm_sjf._stream_pump.proxy_config_path`) and logs each warning once
on the ``litellm_sjf`` logger; returns the warnings (``[]`` outside a proxy). Never
raises. Warnings name backends by :func:`sjf_core.backend_label` (no credentials).

``shared_boxes(settings, config)`` says which models of the model list share one backend URL
(a many-model box) and how they are admitted; logged at INFO by ``run_startup_checks``.

``check_redis_in_background(settings)`` PINGs a configured Redis store once, off the start-up
path, and logs one WARNING naming ``SJF_REDIS_URL`` when it cannot be reached.

``startup_line(settings)`` is the one INFO line logged when the plugin is loaded: its
effective policy, guard, slots per backend, memory on/off, store and where its status is
served (:func:`status_location`, the one place that says where). ``fatal(exc)`` logs the
warnings the failed settings carried, then prints the configuration error as one line on
stderr naming every problem; ``end_failed_start()`` then ends the proxy's start-up there,
without LiteLLM's traceback (exit status 3).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from types import SimpleNamespace
from typing import Any, Mapping

from sjf_core import backend_label

from ._stream_pump import in_proxy_startup, proxy_config_path
from ._deployment import provider_and_model

log = logging.getLogger("litellm_sjf")

#: providers whose streams the plugin drains: measured (openai, ollama, ollama_chat) and
#: LiteLLM's OpenAI-compatible providers built on the same stream wrapper
DRAINABLE_PROVIDERS = ("openai", "ollama", "ollama_chat", "hosted_vllm", "lm_studio", "llamafile",
                       "text-completion-openai", "openai_like", "custom_openai", "litellm_proxy")


def _deployments(config: Mapping) -> list[dict]:
    out = []
    for d in config.get("model_list") or []:
        if isinstance(d, Mapping) and isinstance(d.get("litellm_params"), Mapping):
            out.append(dict(d["litellm_params"]))
    return out


def config_warnings(settings: Any, config: Mapping | None) -> list[str]:
    """The warnings for one proxy config (see the module docstring). Never raises."""
    warnings: list[str] = []
    try:
        warnings += list(getattr(settings, "warnings", []) or [])
        for key in getattr(settings, "retired", []) or []:
            warnings.append(f"SJF setting {key} is retired and ignored: an orphaned answer now holds its slot "
                            "until a 1-token probe of the backend returns (on_disconnect: probe)")
        if not isinstance(config, Mapping):
            return warnings
        gs = config.get("general_settings") or {}
        if not (isinstance(gs, Mapping) and gs.get("cancel_on_disconnect") is True):
            warnings.append("general_settings.cancel_on_disconnect is not true: a client that leaves while its "
                            "request waits for a slot is not cancelled, and the request still reaches the backend "
                            "when its turn comes. Set general_settings.cancel_on_disconnect: true")
        by_queue: dict[str, list[tuple[str, Any]]] = {}
        for p in _deployments(config):
            base = p.get("api_base")
            if not isinstance(base, str):
                continue
            key = settings.queue_key(base)
            mpr = p.get("max_parallel_requests")
            by_queue.setdefault(key, []).append((base, settings.slots_for(key), mpr))
            provider, _ = provider_and_model(p)
            if settings.on_disconnect_for(key) == "drain" and provider not in DRAINABLE_PROVIDERS:
                warnings.append(f"backend {backend_label(key)} is set to on_disconnect: drain, but streams of its "
                                f"provider {provider}/ are not known to be drainable: if LiteLLM closes them, an "
                                "orphaned stream is probed instead of drained. Use on_disconnect: probe")
        for key, deps in by_queue.items():
            urls = sorted({u for u, _, _ in deps})
            mprs = {m for _, _, m in deps if m is not None}
            if len(mprs) > 1:
                warnings.append(f"deployments of one backend ({backend_label(key)}: {len(urls)} api_base spelling(s)) "
                                f"set different max_parallel_requests {sorted(mprs)}; the plugin admits "
                                f"{settings.slots_for(key)} at a time to this backend")
            if len(urls) > 1:
                log.info("litellm_sjf: %d api_base spellings share the queue of %s", len(urls), backend_label(key))
        core = getattr(settings, "config", None)
        if core is not None and not (isinstance(gs, Mapping) and gs.get("store_model_in_db")):  # (else: from a DB)
            # box settings keyed on a URL, or naming a model, that no deployment has
            warnings += core.unused_box_settings((p.get("api_base"), provider_and_model(p)[1])
                                                 for p in _deployments(config))
    except Exception as exc:
        log.debug("start-up checks failed (%s)", type(exc).__name__)
    return warnings


def shared_boxes(settings: Any, config: Mapping | None) -> list[str]:
    """One line per backend URL that several models of the model list share: which models,
    and how the plugin admits them (docs/boxes.md). Pure; never raises."""
    try:
        by_url: dict[str, set] = {}
        said: dict[str, set] = {}  # the URLs as configured
        for p in _deployments(config or {}):
            base = p.get("api_base")
            if isinstance(base, str) and base.strip():
                model = provider_and_model(p)[1]
                by_url.setdefault(settings.queue_key(base), set()).add(model or "?")
                said.setdefault(settings.queue_key(base), set()).add(backend_label(base.strip().rstrip("/")))
        off = not getattr(settings, "boxes", True)
        how = ("one queue per URL (boxes: off)" if off else
               "a queue per model runner once the box says it runs them side by side (Ollama, LM Studio, "
               "llama-swap, llama.cpp router), else one queue for the URL (an INFO line says which when the box is "
               "first read)")

        def name(url: str) -> str:  # as configured; the status page's name when it differs
            key, urls = backend_label(url), sorted(said.get(url) or ())
            return " and ".join(urls) + ("" if urls == [key] else f" (on the status page: {key})")

        return [f"models {', '.join(sorted(ms))} share the box {name(url)}: {how}"
                for url, ms in sorted(by_url.items()) if len(ms) > 1]
    except Exception as exc:  # a start-up line must never stop the proxy
        log.debug("shared boxes unreadable (%s)", type(exc).__name__)
        return []


_done = False


def run_startup_checks(settings: Any) -> list[str]:
    """Check the running proxy's config file and log each warning once. Never raises."""
    global _done
    if _done:
        return []
    try:
        path = proxy_config_path()
        config = None
        if path:
            import yaml

            with open(path, encoding="utf-8") as f:
                config = yaml.safe_load(f)
        warnings = config_warnings(settings, config)
        _done = True
        for w in warnings:
            log.warning("litellm_sjf: %s", w)
        for line in shared_boxes(settings, config):
            log.info("litellm_sjf: %s", line)
        return warnings
    except Exception as exc:
        log.debug("start-up checks failed (%s)", type(exc).__name__)
        return []


# ---- the start-up line and the fatal line -------------------------------------------------
def status_location(settings: Any, on_proxy: bool = False) -> str:
    """Where the plugin's status is served (the start-up line's last part): the page and JSON
    on the proxy's own port when ``on_proxy`` (the routes were mounted), and/or the side port
    of ``SJF_STATUS_PORT``."""
    from ._routes import page_url

    port = getattr(settings, "status_port", None)
    where = [f"status page {page_url()} (JSON at /sjf/status; the master key)"] if on_proxy else []
    if port is not None:
        where.append(f"status on http://127.0.0.1:{port}/sjf/status")
    return ", ".join(where) or "status not served (set SJF_STATUS_PORT)"


def _slots(settings: Any) -> str:
    per = ", ".join(f"{backend_label(k)}: {v}" for k, v in sorted(settings.backend_slots.items()))
    return f"slots {settings.slots}" + (f" ({per})" if per else "") + " per backend"


def _store(config: Any) -> str:
    if not config.redis_url:
        return "store in-process"
    return f"store {backend_label(config.redis_url)} (fail_mode {config.redis.fail_mode})"


def startup_line(settings: Any, on_proxy: bool = False) -> str:
    """The plugin's one start-up line (module docstring); ``on_proxy``: the status routes are
    mounted on the proxy's port. Never raises."""
    try:
        c = settings.config
        if settings.disabled:
            return f"litellm_sjf loaded, DISABLED (SJF_DISABLED): every request passes untouched; {status_location(settings, on_proxy)}"
        if settings.scheduler_factory:
            return (f"litellm_sjf loaded: scheduler from SJF_SCHEDULER_FACTORY {settings.scheduler_factory}; "
                    f"{status_location(settings, on_proxy)}")
        policy = c.make_policy()
        rule = getattr(policy, "promotion", None)
        rule = rule if isinstance(rule, str) else getattr(rule, "name", None) or "?"
        return (f"litellm_sjf loaded: policy {c.policy}, guard {rule} (tau {c.tau}), {_slots(settings)}, "
                f"memory {'on' if c.memory else 'off'}, {_store(c)}, {status_location(settings, on_proxy)}")
    except Exception as exc:
        return f"litellm_sjf loaded ({type(exc).__name__} while describing the settings)"


def log_startup_line(settings: Any, on_proxy: bool = False) -> str:
    """Log :func:`startup_line` at INFO, where the proxy's log shows it: when logging is not
    configured (no handler anywhere, LiteLLM's default), the ``litellm_sjf`` logger (at INFO)
    and the ``sjf_core`` logger (its own level: warnings, e.g. the Redis store's) each get
    one on stderr, with level, time and logger name (else Python prints a bare line).
    Returns the line."""
    line = startup_line(settings, on_proxy)
    _show_logs()
    log.info("%s", line)
    return line


def _show_logs() -> None:
    """When logging is not configured, show the plugin's and the core's lines on stderr
    (:func:`log_startup_line`)."""
    core = logging.getLogger("sjf_core")
    if not log.handlers and not core.handlers and not logging.getLogger().handlers:
        # the plugin's own lines name it already ("litellm_sjf: ..."); the core's get the logger's name
        for logger, fmt in ((log, "%(levelname)s %(asctime)s %(message)s"),
                            (core, "%(levelname)s %(asctime)s %(name)s: %(message)s")):
            h = logging.StreamHandler(sys.stderr)
            h.setFormatter(logging.Formatter(fmt))
            logger.addHandler(h)
        for logger in (log, core):  # the core's one-time INFO lines too (a box's first reading: docs/boxes.md)
            if logger.level == logging.NOTSET or logger.level > logging.INFO:
                logger.setLevel(logging.INFO)


#: Seconds the start-up PING of the Redis store may take (connect and answer).
REDIS_PING_TIMEOUT_S = 2.0


def check_redis_in_background(settings: Any, timeout_s: float = REDIS_PING_TIMEOUT_S) -> threading.Thread | None:
    """With a Redis store configured, PING it once from a daemon thread (start-up is not
    delayed) and, when it cannot be reached, log one WARNING naming ``SJF_REDIS_URL`` and what
    the store does meanwhile (:func:`ping_redis`). Returns the thread, None without Redis."""
    config = getattr(settings, "config", None)
    if not getattr(config, "redis_url", None) or getattr(settings, "disabled", False):
        return None
    t = threading.Thread(target=ping_redis, args=(config, timeout_s), name="litellm-sjf-redis-check", daemon=True)
    t.start()
    return t


def ping_redis(config: Any, timeout_s: float = REDIS_PING_TIMEOUT_S) -> str | None:
    """PING ``config.redis_url`` (redis-py, ``timeout_s`` to connect and to answer); the
    WARNING it logged when Redis cannot be reached, else None. Never raises; no credentials
    in the message (:func:`sjf_core.backend_label`)."""
    try:
        import redis

        client = redis.Redis.from_url(config.redis_url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
        try:
            client.ping()
            return None
        finally:
            client.close()
    except Exception as exc:  # unreachable, refused, auth, no redis-py: all the same to the operator
        if getattr(config.redis, "fail_mode", "open") == "closed":
            meanwhile = "until it answers, requests are refused with HTTP 429 (fail_mode closed)"
        else:
            meanwhile = ("until it answers, each worker admits through its own per-process queue (fail_mode "
                         "open: SJF order and the slot bound per worker, not shared; counted in the status's "
                         "counters.store_fail_open)")
        msg = (f"litellm_sjf: the Redis store cannot be reached at start-up: SJF_REDIS_URL "
               f"{backend_label(config.redis_url)} ({type(exc).__name__}: {' '.join(str(exc).split())[:160]}); "
               f"{meanwhile}")
        log.warning("%s", msg)
        return msg


def fatal(exc: BaseException) -> str:
    """Report a fatal configuration error and return its line. The non-fatal findings it
    carries (``warnings``, ``retired``: an unknown ``SJF_*`` name...) are logged first, as the
    start-up checks log them (:func:`config_warnings`); then one line on stderr,
    ``litellm_sjf: FATAL configuration error, ...``, the last thing said: every problem, fatal
    and warned (a :class:`sjf_core.config.SettingsError` names them all in its message)."""
    found = SimpleNamespace(warnings=getattr(exc, "warnings", ()), retired=getattr(exc, "retired", ()))
    warnings = config_warnings(found, None)
    if warnings:
        _show_logs()
        for w in warnings:
            log.warning("litellm_sjf: %s", w)
    msg = " ".join(str(exc).split()) or type(exc).__name__
    line = f"litellm_sjf: FATAL configuration error, the proxy cannot start: {msg}"
    _flush_logs()
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # no usable stderr: the exception that follows still says it
        pass
    return line


#: The exit status of a proxy whose plugin settings are bad: uvicorn's own for a failed start-up.
STARTUP_FAILURE = 3


def end_failed_start(code: int = STARTUP_FAILURE) -> None:
    """End the process after :func:`fatal`, when it is the LiteLLM proxy starting up
    (:func:`in_proxy_startup`): LiteLLM's lifespan would print a ~370-line traceback after the
    FATAL line, and nothing has started that an exit could leave half done (the proxy serves
    nothing until its lifespan start-up returns). Logs and stdio are flushed first; the status
    is uvicorn's for a failed start-up. Elsewhere (a test, a script) it returns: the caller
    raises."""
    if not in_proxy_startup():
        return
    _flush_logs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


def _flush_logs() -> None:
    for logger in (log, logging.getLogger("sjf_core"), logging.getLogger()):
        for h in logger.handlers:
            try:
                h.flush()
            except (OSError, ValueError):  # a closed stream: nothing more to say there
                pass
