"""The names the operator's view puts beside hashes and URLs: model names and tenant labels.

Contract (no prompt text, ever; bounded memory; never raises on request data):

* :func:`tenant_label(user_api_key_dict, fairness) <tenant_label>` — what LiteLLM calls the
  caller, for the fairness mode the queues use: ``"key"`` → the key's alias, else the user id
  LiteLLM has for it (the master key: ``default_user_id``); ``"team"`` → the team's alias,
  else its id; the other modes (the OpenAI ``user`` field, a header) → None: that value is
  the client's own, and it stays hashed unless ``show_tenant_names`` is set.
* :func:`deployment_names(kwargs) <deployment_names>` — ``(model group, deployment model)``
  of a deployment call (LiteLLM's ``metadata.model_group`` and the call's ``model``, e.g.
  ``("llama3", "ollama_chat/llama3")``).
* :class:`OpsLabels` remembers, for the status: per backend key the model names and the
  ``api_base`` spellings seen on it (as configured, e.g. ``http://localhost:11434`` for the
  queue key ``http://127.0.0.1:11434/v1``; without credentials), per pool name its model
  group, and per tenant id its label (the most recent :data:`MAX_TENANTS`).
  :meth:`OpsLabels.annotate` adds them to a live status document: ``backends[k]["models"]``
  (``[{"group", "deployment"}]``), ``backends[k]["api_bases"]``, ``pools[i]["model_group"]``,
  ``tenant_labels`` ({tenant id: label}), and each queue row's ``tenant_label``, ``model``
  (the request's model group, when its call is known) and ``request_id`` (the call's, where the
  store's row lacks it: a Redis row). :meth:`OpsLabels.describe` gives a completed entry's
  model group and whether it was streamed (the recent completions).
"""

from __future__ import annotations

import collections
import logging
import weakref
from typing import Any, Iterable, Mapping

from sjf_core import backend_label, note_fault

log = logging.getLogger("litellm_sjf")

#: tenant labels kept (most recent first out)
MAX_TENANTS = 1024
#: model names kept per backend
MAX_MODELS = 16
#: longest label shown (a key alias is the operator's own text, but bounded all the same)
MAX_LABEL = 64


def _text(v: Any) -> str | None:
    return v[:MAX_LABEL] if isinstance(v, str) and v.strip() else None


def tenant_label(user_api_key_dict: Any, fairness: str) -> str | None:
    """See the module docstring. Never raises."""
    try:
        if fairness == "key":
            return (_text(getattr(user_api_key_dict, "key_alias", None))
                    or _text(getattr(user_api_key_dict, "user_id", None)))
        if fairness == "team":
            return (_text(getattr(user_api_key_dict, "team_alias", None))
                    or _text(getattr(user_api_key_dict, "team_id", None)))
    except Exception:  # an unexpected auth object: no label, the hash is shown
        note_fault(log, "litellm_sjf: the caller's key alias / user id unreadable; the tenant shows as its hash",
                   level=logging.DEBUG)
    return None


def deployment_names(kwargs: Any) -> tuple[str | None, str | None]:
    """See the module docstring. Never raises."""
    if not isinstance(kwargs, Mapping):
        return None, None
    group = None
    for key in ("metadata", "litellm_metadata"):
        meta = kwargs.get(key)
        if isinstance(meta, Mapping) and _text(meta.get("model_group")):
            group = _text(meta.get("model_group"))
            break
    return group, _text(kwargs.get("model"))


class OpsLabels:
    """Model names per backend and pool, labels per tenant (module docstring)."""

    def __init__(self) -> None:
        self._models: dict[str, dict[tuple, None]] = {}
        self._api_bases: dict[str, dict[str, None]] = {}
        self._pool_groups: dict[str, str] = {}
        self._tenants: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._by_ticket: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # ticket -> (group, streamed)

    def ticket_seen(self, ticket: Any, group: str | None, streamed: bool | None = None) -> None:
        """``ticket`` (a pool's: its member's) serves model ``group``, a stream or not;
        forgotten with the ticket."""
        ticket = getattr(ticket, "member", ticket)
        if ticket is not None and (group is not None or streamed is not None):
            try:
                self._by_ticket[ticket] = (group, streamed)
            except TypeError:  # a ticket that takes no weak reference: its completions keep no names
                pass

    def describe(self, entry: Any) -> dict:
        """``{"model", "streamed"}`` of a queue entry's request (its ``payload`` is its
        ticket); None for what is not known."""
        payload = getattr(entry, "payload", None)
        try:
            group, streamed = self._by_ticket.get(payload, (None, None)) if payload is not None else (None, None)
        except TypeError:
            group, streamed = None, None
        return {"model": group, "streamed": streamed}

    def backend_seen(self, backend: str | None, group: str | None, deployment: str | None,
                     api_base: Any = None) -> None:
        """A call of model ``group`` (deployment ``deployment``, its ``api_base`` as configured)
        was queued on ``backend``."""
        if backend is None:
            return
        if isinstance(api_base, str) and api_base.strip():
            _remember(self._api_bases.setdefault(backend, {}), backend_label(api_base.strip()))
        if group is not None or deployment is not None:
            _remember(self._models.setdefault(backend, {}), (group, deployment))

    def pool_seen(self, pool_name: str, group: str | None) -> None:
        """The pool ``pool_name`` serves model group ``group``."""
        if group is not None:
            self._pool_groups[pool_name] = group

    def tenant_seen(self, tenant: Any, label: str | None) -> None:
        """Tenant id ``tenant`` (hashed) belongs to ``label``."""
        if isinstance(tenant, str) and label is not None:
            self._tenants.pop(tenant, None)
            self._tenants[tenant] = label
            while len(self._tenants) > MAX_TENANTS:
                self._tenants.popitem(last=False)

    def annotate(self, doc: dict, calls: Iterable[Any] = ()) -> dict:
        """Add the names to a live status ``doc`` (in place; returned). ``calls``: the live
        :class:`~litellm_sjf._calls.Call` records (their group names each queue row)."""
        by_row = {}
        for c in calls:
            t = getattr(c, "ticket", None)
            if t is not None:
                try:
                    by_row[(c.backend, t.view_id)] = c
                except Exception:  # a ticket of another kind: its row keeps no model name
                    note_fault(log, "litellm_sjf: a request's row id unreadable; its row shows no model name",
                               level=logging.DEBUG)
        labels = dict(self._tenants)
        doc["tenant_labels"] = labels
        for key, b in (doc.get("backends") or {}).items():
            b["models"] = [{"group": g, "deployment": d} for g, d in self._models.get(key, {})]
            b["api_bases"] = list(self._api_bases.get(key, {}))
            self._rows(b.get("queue"), labels, lambda rid, k=key: by_row.get((k, rid)))
        for p in doc.get("pools") or []:
            p["model_group"] = self._pool_groups.get(p.get("name"))
            self._rows(p.get("queue"), labels, lambda rid: None, p["model_group"])
        return doc

    @staticmethod
    def _rows(view: Any, labels: dict, call_of, group: str | None = None) -> None:
        if not isinstance(view, dict):
            return
        for name in ("running", "waiters", "reserved"):
            for row in view.get(name) or []:
                row["tenant_label"] = labels.get(row.get("tenant"))
                call = call_of(row.get("id"))
                row["model"] = getattr(call, "group", None) if call is not None else group
                if row.get("request_id") is None:  # a store that keeps no id (Redis): the call's
                    row["request_id"] = getattr(call, "request_id", None)


def _remember(seen: dict, item: Any) -> None:
    """Put ``item`` last in the ordered set ``seen``, keeping the newest :data:`MAX_MODELS`."""
    seen.pop(item, None)
    seen[item] = None
    while len(seen) > MAX_MODELS:
        del seen[next(iter(seen))]
