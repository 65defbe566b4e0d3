"""collector-config/grafana/: dashboard and provisioning files carry what Grafana requires."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from spanjudge.reasons import NOT_SELECTED, OUTSIDE_COVERAGE
from tests.collector import grafana_alerts
from tests.collector.promnames import KNOWN_LABELS, emitted_series, label_names, metric_names

GRAFANA = Path(__file__).resolve().parents[2] / "collector-config" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "spanjudge.json"
PROVIDER = GRAFANA / "provisioning" / "dashboards" / "spanjudge.yaml"
DATASOURCES = GRAFANA / "provisioning" / "datasources" / "spanjudge.yaml"
UID = re.compile(r"^[a-zA-Z0-9_-]{1,40}$")


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _dashboard() -> dict[str, Any]:
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))  # collapsed rows nest their panels
    return out


def _queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target."""
    return [
        (f"panel {p['title']!r} target {t['refId']}", t["expr"])
        for p in _panels(dashboard)
        for t in p.get("targets", [])
    ]


def test_dashboard_has_the_fields_grafana_requires() -> None:
    dash = _dashboard()
    for key in ("uid", "title", "schemaVersion", "panels", "templating", "time"):
        assert key in dash, key
    assert UID.match(dash["uid"])
    assert isinstance(dash["schemaVersion"], int)
    ids = [p["id"] for p in _panels(dash)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in _panels(dash):
        grid = panel["gridPos"]
        assert {"x", "y", "w", "h"} <= grid.keys(), panel["title"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["type"] and panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]


def test_dashboard_variables_are_defined() -> None:
    dash = _dashboard()
    defined = {v["name"] for v in dash["templating"]["list"]}
    text = DASHBOARD.read_text(encoding="utf-8")
    used = set(re.findall(r"\$\{?([a-zA-Z]\w*)", text)) - {"__rate_interval", "__all"}
    assert used <= defined, f"undefined variables {used - defined}"


def test_dashboard_shows_what_the_operator_needs() -> None:
    used: set[str] = set()
    for _, expr in _queries(_dashboard()):
        used |= metric_names(expr)
    wanted = {
        "spanjudge_verdicts_total",  # pass rate and coverage
        "spanjudge_skill_expected_total",  # skill expected versus loaded
        "spanjudge_skill_observed_total",
        "spanjudge_score_bucket",  # score distribution
        "spanjudge_session_tool_calls_bucket",  # trajectory vector
        "spanjudge_session_tokens_bucket",
        "spanjudge_session_duration_seconds_bucket",
        "spanjudge_session_retries_total",
        "spanjudge_session_backtracks_total",
        "spanjudge_judge_calls_total",  # judge errors and budget refusals
        "spanjudge_judge_cost_total",  # judge cost
        "spanjudge_spans_dropped_total",  # sidecar health
        "spanjudge_verdicts_dropped_total",
        "spanjudge_sessions_open",
        "spanjudge_sidecar_spool_bytes",
    }
    assert wanted <= used, f"missing panels for {wanted - used}"


def test_dashboard_queries_use_only_spanjudge_metrics() -> None:
    emitted = emitted_series()
    dash = _dashboard()
    queries = _queries(dash)
    queries += [
        (f"variable {v['name']}", v["query"]["query"])
        for v in dash["templating"]["list"]
        if v["type"] == "query"
    ]
    for where, expr in queries:
        expr = re.sub(r"label_values\((\w+),\s*\w+\)", r"\1", expr)
        used = metric_names(expr)
        assert used, where
        assert used <= emitted, f"{where}: unknown metrics {used - emitted}"
        labels = label_names(expr)
        assert labels <= KNOWN_LABELS, f"{where}: unknown labels {labels - KNOWN_LABELS}"


def test_dashboard_provider_points_grafana_at_a_folder_of_json() -> None:
    doc = _yaml(PROVIDER)
    assert doc["apiVersion"] == 1
    (provider,) = doc["providers"]
    assert provider["name"] and provider["type"] == "file"
    assert provider["options"]["path"].startswith("/")


def test_datasources_provision_the_uid_the_alerts_use() -> None:
    doc = _yaml(DATASOURCES)
    assert doc["apiVersion"] == 1
    by_uid = {d["uid"]: d for d in doc["datasources"]}
    assert len(by_uid) == len(doc["datasources"])
    for source in doc["datasources"]:
        assert {"name", "type", "access", "url"} <= source.keys(), source
    assert by_uid[grafana_alerts.DATASOURCE_UID]["type"] == "prometheus"
    assert {"tempo", "loki"} <= {d["type"] for d in doc["datasources"]}


def test_grafana_alert_rules_are_in_sync_with_prometheus_rules() -> None:
    assert grafana_alerts.GRAFANA_RULES.read_text(encoding="utf-8") == grafana_alerts.render(), (
        "regenerate: python -m tests.collector.grafana_alerts > "
        "collector-config/grafana/provisioning/alerting/spanjudge-alerts.yaml"
    )


def test_grafana_alert_rules_have_the_fields_grafana_requires() -> None:
    doc = _yaml(grafana_alerts.GRAFANA_RULES)
    assert doc["apiVersion"] == 1
    uids: list[str] = []
    emitted = emitted_series()
    for group in doc["groups"]:
        assert {"orgId", "name", "folder", "interval", "rules"} <= group.keys()
        assert grafana_alerts.interval_seconds(group) > 0
        for rule in group["rules"]:
            assert {"uid", "title", "condition", "data", "for"} <= rule.keys(), rule.get("title")
            assert UID.match(rule["uid"]), rule["uid"]
            uids.append(rule["uid"])
            refs = {d["refId"]: d for d in rule["data"]}
            assert rule["condition"] in refs
            assert rule["noDataState"] in {"OK", "NoData", "Alerting", "KeepLast"}
            assert rule["execErrState"] in {"OK", "Error", "Alerting", "KeepLast"}
            query = refs["A"]
            assert query["datasourceUid"] == grafana_alerts.DATASOURCE_UID
            assert metric_names(query["model"]["expr"]) <= emitted
            threshold = refs[rule["condition"]]["model"]
            assert threshold["type"] == "threshold" and threshold["expression"] == "A"
            assert threshold["conditions"][0]["evaluator"]["type"] in {"gt", "lt"}
    assert len(uids) == len(set(uids))


def test_split_expr_refuses_an_expression_it_cannot_copy_faithfully() -> None:
    assert grafana_alerts.split_expr("(\n  sum(x)\n) > 0.5") == ("sum(x)", "gt", 0.5)
    with pytest.raises(ValueError):
        grafana_alerts.split_expr("sum(x) > 0.5 and sum(y) > 1")


def test_the_coverage_panel_uses_the_one_coverage_rule_and_shows_the_sampled_share() -> None:
    [panel] = [p for p in _panels(_dashboard()) if p["title"].startswith("Coverage per")]
    coverage, sampled = (t["expr"] for t in panel["targets"])
    excluded = re.findall(r'spanjudge_reason!~"([^"]*)"', coverage)
    assert excluded
    for pattern in excluded:
        assert set(pattern.split("|")) == OUTSIDE_COVERAGE, pattern
    [left_out] = re.findall(r'spanjudge_reason=~"([^"]*)"', sampled)
    assert set(left_out.split("|")) == NOT_SELECTED
    # a share of sessions, not of verdicts (a session may get one verdict per skill or call)
    assert metric_names(sampled) == {"spanjudge_evaluator_sessions_total"}
