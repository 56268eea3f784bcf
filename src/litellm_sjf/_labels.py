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
* :class:`OpsLabels` remembers, for the status: per backend key the model names seen on it,
  per pool name its model group, and per tenant id its label (the most recent
  :data:`MAX_TENANTS`). :meth:`OpsLabels.annotate` adds them to a live status document:
  ``backends[k]["models"]`` (``[{"group", "deployment"}]``), ``pools[i]["model_group"]``,
  ``tenant_labels`` ({tenant id: label}), and each queue row's ``tenant_label`` and
  ``model`` (the request's model group, when its call is known).
"""

from __future__ import annotations

import collections
import logging
import weakref
from typing import Any, Iterable, Mapping

from sjf_core import note_fault

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
        self._pool_groups: dict[str, str] = {}
        self._tenants: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._by_ticket: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # ticket -> model group

    def ticket_seen(self, ticket: Any, group: str | None) -> None:
        """``ticket`` (a pool's: its member's) serves model ``group``; forgotten with the ticket."""
        ticket = getattr(ticket, "member", ticket)
        if group is not None and ticket is not None:
            try:
                self._by_ticket[ticket] = group
            except TypeError:  # a ticket that takes no weak reference: its completions keep no model name
                pass

    def group_of(self, entry: Any) -> str | None:
        """The model group of a queue entry's request (its ``payload`` is its ticket), or None."""
        payload = getattr(entry, "payload", None)
        try:
            return self._by_ticket.get(payload) if payload is not None else None
        except TypeError:
            return None

    def backend_seen(self, backend: str | None, group: str | None, deployment: str | None) -> None:
        """A call of model ``group`` (deployment ``deployment``) was queued on ``backend``."""
        if backend is None or (group is None and deployment is None):
            return
        seen = self._models.setdefault(backend, {})
        seen.pop((group, deployment), None)
        seen[(group, deployment)] = None
        while len(seen) > MAX_MODELS:
            del seen[next(iter(seen))]

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
            if t is not None and c.group is not None:
                try:
                    by_row[(c.backend, t.view_id)] = c.group
                except Exception:  # a ticket of another kind: its row keeps no model name
                    note_fault(log, "litellm_sjf: a request's row id unreadable; its row shows no model name",
                               level=logging.DEBUG)
        labels = dict(self._tenants)
        doc["tenant_labels"] = labels
        for key, b in (doc.get("backends") or {}).items():
            b["models"] = [{"group": g, "deployment": d} for g, d in self._models.get(key, {})]
            self._rows(b.get("queue"), labels, lambda rid, k=key: by_row.get((k, rid)))
        for p in doc.get("pools") or []:
            p["model_group"] = self._pool_groups.get(p.get("name"))
            self._rows(p.get("queue"), labels, lambda rid, g=p["model_group"]: g)
        return doc

    @staticmethod
    def _rows(view: Any, labels: dict, model) -> None:
        if not isinstance(view, dict):
            return
        for name in ("running", "waiters", "reserved"):
            for row in view.get(name) or []:
                row["tenant_label"] = labels.get(row.get("tenant"))
                row["model"] = model(row.get("id"))
