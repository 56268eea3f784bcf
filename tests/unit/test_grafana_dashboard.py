"""examples/grafana/clairvoyant-sjf.json queries only metrics the plugins export.

The exported names are read from the code, not from a list kept here: the metric families
of ``sjf_core.ext._families.Families`` (made on a fresh registry) and of the length memory's
collector (``sjf_core.memory._prom.MemoryCollector``), with the sample suffixes
prometheus-client writes for each type.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

DASHBOARD = Path(__file__).resolve().parents[2] / "examples" / "grafana" / "clairvoyant-sjf.json"
SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count", "_created"),
            "summary": ("", "_sum", "_count", "_created"), "info": ("_info",)}
#: what the issue asks the dashboard to show, by the metric that carries it
REQUIRED = {"queue depth": "sjf_queue_depth", "in-flight": "sjf_in_flight",
            "wait by true class": "sjf_queue_wait_by_true_class_seconds_bucket",
            "online ranking accuracy": "sjf_memory_online_ranking_accuracy",
            "probe outcomes": "sjf_backend_probes_total"}


def exported() -> tuple[set[str], set[str]]:
    """(sample names, label names) of every sjf_* family the plugins export."""
    from prometheus_client import CollectorRegistry

    from sjf_core.ext._families import Families
    from sjf_core.memory._prom import MemoryCollector

    reg = CollectorRegistry()
    metrics = Families(reg)
    families = list(reg.collect()) + list(MemoryCollector().collect())
    names, labels = set(), {"le"}
    for fam in families:
        names.update(fam.name + s for s in SUFFIXES[fam.type])
        for sample in fam.samples:
            labels.update(sample.labels)
    for metric in vars(metrics).values():  # a labelled family has no samples before its first child
        labels.update(getattr(metric, "_labelnames", ()))
    return names, labels


def queries(node) -> list[str]:
    """Every PromQL expression of the dashboard: panel targets and template variable queries."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "expr" and isinstance(v, str):
                out.append(v)
            elif k == "query" and isinstance(v, dict) and isinstance(v.get("query"), str):
                out.append(v["query"])
            else:
                out += queries(v)
    elif isinstance(node, list):
        for v in node:
            out += queries(v)
    return out


def test_every_metric_the_dashboard_queries_is_exported():
    names, labels = exported()
    exprs = queries(json.loads(DASHBOARD.read_text()))
    assert len(exprs) >= 10
    used = {m for e in exprs for m in re.findall(r"\bsjf_[a-zA-Z0-9_:]*", e)}
    assert used and used <= names, f"not exported: {sorted(used - names)}"
    for what, metric in REQUIRED.items():
        assert metric in used, f"the dashboard shows no {what} ({metric})"
    grouped = {lab.strip() for e in exprs for clause in re.findall(r"\bby \(([^)]*)\)", e) for lab in clause.split(",")}
    matched = {m for e in exprs for m in re.findall(r"[{,]\s*([a-zA-Z_]\w*)\s*=~?", e)}
    assert grouped | matched <= labels, f"labels no sjf_* family has: {sorted((grouped | matched) - labels)}"


def test_dashboard_is_importable_json():
    d = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)) and d["uid"] and d["title"]
    assert {v["name"] for v in d["templating"]["list"]} == {"datasource", "backend"}
