"""examples/grafana/clairvoyant-sjf.json queries only metrics the plugins export, and every
data source it names is one it declares; docs/operations.md's metrics table lists exactly the
exported families.

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
OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count", "_created"),
            "summary": ("", "_sum", "_count", "_created"), "info": ("_info",)}
#: what the issue asks the dashboard to show, by the metric that carries it
REQUIRED = {"queue depth": "sjf_queue_depth", "in-flight": "sjf_in_flight",
            "wait by true class": "sjf_queue_wait_by_true_class_seconds_bucket",
            "online ranking accuracy": "sjf_memory_online_ranking_accuracy",
            "probe outcomes": "sjf_backend_probes_total"}


def families() -> dict[str, tuple[str, frozenset[str]]]:
    """Every sjf_* family the plugins export, as its exposed name (counters with ``_total``)
    -> (type, label names)."""
    from prometheus_client import CollectorRegistry

    from sjf_core.ext._box_metrics import _BoxCollector
    from sjf_core.ext._families import Families
    from sjf_core.ext._pool_metrics import _PoolCollector
    from sjf_core.memory._prom import MemoryCollector

    out = {}
    for metric in vars(Families(CollectorRegistry())).values():
        out[metric._name + ("_total" if metric._type == "counter" else "")] = (
            metric._type, frozenset(metric._labelnames))
    for fam in [*MemoryCollector().collect(), *_PoolCollector().collect(),  # collectors read at scrape time
                *_BoxCollector().collect()]:
        labels = set(getattr(fam, "_labelnames", ())) | {k for sample in fam.samples for k in sample.labels}
        out[fam.name + ("_total" if fam.type == "counter" else "")] = (fam.type, frozenset(labels))
    return out


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


def datasource_refs(node) -> list:
    """Every ``datasource`` value of the dashboard (panels, targets, query variables)."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            out += [v] if k == "datasource" else datasource_refs(v)
    elif isinstance(node, list):
        for v in node:
            out += datasource_refs(v)
    return out


def test_every_datasource_is_a_declared_prometheus_variable_fed_by_the_import_input():
    raw = DASHBOARD.read_text()
    d = json.loads(raw)
    inputs = {i["name"] for i in d.get("__inputs", [])}
    variables = {v["name"]: v for v in d["templating"]["list"]}
    ds_vars = {n for n, v in variables.items() if v["type"] == "datasource" and v.get("query") == "prometheus"}
    assert ds_vars, "no data source variable of type prometheus"
    refs = datasource_refs(d)
    panels = [p for p in d["panels"] if p["type"] != "row"]
    assert len(refs) >= 2 * len(panels)  # each panel and each of its targets names one
    for ref in refs:
        assert isinstance(ref, dict) and ref.get("type") == "prometheus", ref
        m = re.fullmatch(r"\$\{(\w+)\}", str(ref.get("uid")))
        assert m and m.group(1) in ds_vars, f"datasource {ref} is no declared data source variable"
    for p in panels:
        assert "datasource" in p and all("datasource" in t for t in p["targets"]), p["title"]
    # every $NAME / ${NAME} is an import input, a variable or Grafana's own ($__...)
    used = {a or b for a, b in re.findall(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", raw)}
    undeclared = {n for n in used if not n.startswith("__")} - inputs - set(variables)
    assert not undeclared, f"referred to but not declared: {sorted(undeclared)}"
    # the import substitutes ${INPUT} where it occurs: each input must be used, by the
    # data source variable's default (so that the import's choice is what the panels query)
    for name in inputs:
        assert any(variables[v].get("current", {}).get("value") == "${%s}" % name for v in ds_vars), name


def doc_table() -> dict[str, tuple[str, frozenset[str]]]:
    """docs/operations.md's metrics table: name -> (type, label names)."""
    section = OPERATIONS.read_text().split("## Prometheus metrics", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(sjf_\w+)` \| (\w+) \| ([^|]*) \|", section, flags=re.M)
    out = {}
    for name, kind, labels in rows:
        assert name not in out, f"{name} twice in the table"
        out[name] = (kind, frozenset(x.strip() for x in labels.split(",") if x.strip() not in ("", "—")))
    return out


def test_the_operations_metrics_table_lists_exactly_the_exported_families():
    exp, doc = families(), doc_table()
    assert len(exp) >= 30
    assert sorted(set(exp) - set(doc)) == [], "exported but not in docs/operations.md's table"
    assert sorted(set(doc) - set(exp)) == [], "in docs/operations.md's table but not exported"
    wrong = {n: (doc[n], exp[n]) for n in exp if doc[n] != exp[n]}
    assert not wrong, f"type or labels differ (doc, exported): {wrong}"
