"""Render the Grafana-managed alert rules from the Prometheus alerting rules.

The Prometheus rules are the source of truth; every expression has the form
``(<value>) < threshold`` or ``(<value>) > threshold``. Grafana gets the same ``<value>`` as its
query (A) and the same comparison as a threshold expression (C), with the same ``for``, labels
and annotations, so the two alert sets cannot drift apart.

Regenerate after editing the Prometheus rules:
    python -m tests.collector.grafana_alerts > \
        collector-config/grafana/provisioning/alerting/spanjudge-alerts.yaml
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "collector-config"
PROMETHEUS_RULES = CONFIG / "prometheus" / "spanjudge-alerts.yaml"
GRAFANA_RULES = CONFIG / "grafana" / "provisioning" / "alerting" / "spanjudge-alerts.yaml"
DATASOURCE_UID = "spanjudge-prometheus"
FOLDER = "spanjudge"

_FORM = re.compile(r"^\((?P<value>.*)\)\s*(?P<op>[<>])\s*(?P<threshold>[0-9.]+)\s*$", re.DOTALL)
_OPS = {"<": "lt", ">": "gt"}
# Grafana templates annotations with the same Go text/template engine but names the value
# differently: `$value` in Prometheus is `$values.A.Value` for the query refId A.
_VALUE = re.compile(r"\$value\b")


def split_expr(expr: str) -> tuple[str, str, float]:
    """``(<value>) op threshold`` -> (value, Grafana evaluator type, threshold)."""
    match = _FORM.match(expr.strip())
    if match is None:
        raise ValueError(f"alert expression is not of the form '(<value>) < or > number': {expr!r}")
    value = "\n".join(line.rstrip() for line in match["value"].strip("\n").splitlines())
    return _dedent(value), _OPS[match["op"]], float(match["threshold"])


def _dedent(text: str) -> str:
    lines = text.splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines)


def _uid(alert: str) -> str:
    # Grafana uids: at most 40 characters of [a-zA-Z0-9_-].
    words = re.sub(r"(?<!^)(?=[A-Z])", "-", alert.removeprefix("Spanjudge")).lower()
    return f"spanjudge-{words}"[:40]


def _seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smhd])", duration))


def _rule(rule: dict[str, Any]) -> dict[str, Any]:
    value, op, threshold = split_expr(rule["expr"])
    annotations = {k: _VALUE.sub("$values.A.Value", v) for k, v in rule["annotations"].items()}
    return {
        "uid": _uid(rule["alert"]),
        "title": rule["alert"],
        "condition": "C",
        "data": [
            {
                "refId": "A",
                "datasourceUid": DATASOURCE_UID,
                # Instant query; the windows live inside the PromQL ([1h], [30m], ...).
                "relativeTimeRange": {"from": 600, "to": 0},
                "model": {"refId": "A", "expr": value, "instant": True, "range": False},
            },
            {
                "refId": "C",
                "datasourceUid": "__expr__",
                "model": {
                    "refId": "C",
                    "type": "threshold",
                    "expression": "A",
                    "conditions": [{"evaluator": {"type": op, "params": [threshold]}}],
                },
            },
        ],
        # No series means nothing is wrong: every value query filters to problem series only.
        "noDataState": "OK",
        "execErrState": "Error",
        "for": rule.get("for", "0s"),
        "labels": dict(rule.get("labels", {})),
        "annotations": annotations,
        "isPaused": False,
    }


class _Dumper(yaml.SafeDumper):
    """Writes multi-line strings (the PromQL) as literal blocks, so the file stays readable."""


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def render(prometheus_rules: Path = PROMETHEUS_RULES) -> str:
    """The Grafana alert-rule provisioning file for ``prometheus_rules``, as YAML text."""
    doc = yaml.safe_load(prometheus_rules.read_text(encoding="utf-8"))
    groups = [
        {
            "orgId": 1,
            "name": group["name"],
            "folder": FOLDER,
            "interval": group.get("interval", "1m"),
            "rules": [_rule(rule) for rule in group["rules"] if "alert" in rule],
        }
        for group in doc["groups"]
    ]
    header = (
        "# Grafana-managed alert rules for spanjudge (file provisioning, apiVersion 1).\n"
        "# GENERATED from collector-config/prometheus/spanjudge-alerts.yaml by\n"
        "#   python -m tests.collector.grafana_alerts\n"
        "# Do not edit by hand; tests/collector checks that this file is in sync.\n"
    )
    body = yaml.dump(
        {"apiVersion": 1, "groups": groups},
        Dumper=_Dumper,
        sort_keys=False,
        width=1000,
        allow_unicode=True,
    )
    return header + body


def interval_seconds(group: dict[str, Any]) -> int:
    """Evaluation interval of a provisioned group in seconds."""
    return _seconds(str(group["interval"]))


if __name__ == "__main__":
    sys.stdout.write(render())
