"""Box settings that can take no effect with the deployments at hand (docs/boxes.md, Settings):
:func:`unused_box_settings`, one warning each, for the start-up checks of an adapter that knows
its deployments (the LiteLLM plugin's model list).

* a ``backends: {URL: {box}}`` / ``SJF_BACKEND_BOX`` entry whose URL is no deployment's
  ``api_base`` (compared as queue keys: ``localhost`` = ``127.0.0.1``, the API root = ``/v1``,
  a trailing slash is none; a different port or host is another backend). Not said when a
  deployment's ``api_base`` is no URL here (LiteLLM's ``os.environ/NAME``: this check reads no
  environment), since that one may be the URL, nor when no deployment has an ``api_base``;
* a ``models: {NAME: ...}`` entry that names no model a deployment on that box serves (exact
  names, as the runners are keyed: ``llama3`` and ``llama3:latest`` are two), with the closest
  one; for the default ``box`` (``SJF_BOX``), no model of any backend without its own settings.
"""

from __future__ import annotations

from typing import Any, Iterable

from sjf_core.settings import backend_label, closest, normalise

__all__ = ["unused_box_settings"]


def unused_box_settings(cfg: Any, deployments: Iterable[tuple[Any, Any]]) -> list[str]:
    """The warnings for ``cfg``'s box settings (a SchedulerConfig; ``cfg.box_from``: URL as written
    -> the setting's name, ``""`` for the default ``box``) against ``deployments``: (api_base,
    model) pairs, as the adapter sends them. Pure; never raises on odd input."""
    served: dict[str, set] = {}
    unknown: set | None = None  # models of deployments whose api_base is no URL here: on any box
    for base, model in deployments:
        if isinstance(base, str) and base.strip().lower().startswith(("http://", "https://")):
            served.setdefault(normalise(base), set()).update([str(model)] if model else [])
        elif isinstance(base, str) and base.strip():
            unknown = (unknown or set()) | ({str(model)} if model else set())
    out = []
    for url, name in cfg.box_from.items():
        if url == "":
            own = {normalise(u) for u in cfg.box_from if u}
            models = set().union(unknown or set(), *(ms for key, ms in served.items() if key not in own))
            box, where = cfg.box, f"{name}: models entry"
        elif normalise(url) not in served:
            if unknown is not None or not served:  # it may be that one's URL; or no URL to compare with
                continue
            known = ", ".join(backend_label(k) for k in sorted(served)[:5]) or "none"
            out.append(f"{name}: backend {url} matches no deployment's api_base (the model list's: {known}): its "
                       "box settings are ignored. localhost and 127.0.0.1, the API root and /v1, a trailing slash "
                       "name one backend; check the port and host")
            continue
        else:
            models, where = served[normalise(url)] | (unknown or set()), f"{name}: backend {url}: models entry"
            box = (cfg.backends.get(cfg.queue_key(url)) or cfg.backend(cfg.queue_key(url))).box
        for model in sorted(getattr(box, "models", None) or {}):
            if model not in models:
                best = closest(model, models)
                out.append(f"{where} {model!r} names no model that a deployment "
                           f"{'on that box ' if url else ''}serves (they serve: {', '.join(sorted(models)) or 'none'})"
                           f"; its slots are ignored" + (f"; did you mean {best!r}?" if best else ""))
    return out
