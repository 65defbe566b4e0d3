"""One agent defect, one alert, in a real Prometheus.

A real `spanjudge serve` judges 12 sessions of one agent, 6 of which skip the skill they were
required to load; a real Prometheus scrapes serve's `/metrics` and evaluates the shipped alert
rules (collector-config/prometheus/spanjudge-alerts.yaml). Only the rules' evaluation interval
and their `for:` durations are shortened (divided alike), so that the test takes seconds.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from spanjudge.demo.agent import SCENARIOS, ScriptedAgent
from tests.sidecar.helpers import ROOT, SidecarProcess, serve_config, wait_for
from tests.support.prometheus import get, query, require_prometheus, running_prometheus

pytestmark = [pytest.mark.slow]

RULES = ROOT / "collector-config" / "prometheus" / "spanjudge-alerts.yaml"
ALERT = "SpanjudgeRequiredSkillLoadRateLow"
SPEED_UP = 200  # `for: 10m` becomes 3s; a rule group's `interval: 1m` becomes 1s (at least)

LOADED = next(s for s in SCENARIOS if s.session_id == "demo-csv-report")
# The same request and tools, without loading the skill: a fluent answer all the same.
SKIPPED = replace(LOADED, calls=[call for call in LOADED.calls if call[0] != "skills"])


def _seconds(duration: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([smh])", duration))


def _ms(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def _fast_rules() -> str:
    """The shipped rules, expressions untouched, with interval and `for:` divided by SPEED_UP."""
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in doc["groups"]:
        group["interval"] = _ms(max(1.0, _seconds(group["interval"]) / SPEED_UP))
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = _ms(_seconds(rule["for"]) / SPEED_UP)
    return yaml.safe_dump(doc, sort_keys=False)


def _alerts(base: str) -> list[dict[str, Any]]:
    answer = get(f"{base}/api/v1/alerts")
    assert answer["status"] == "success", answer
    alerts: list[dict[str, Any]] = answer["data"]["alerts"]
    return alerts


def test_twelve_sessions_six_without_their_skill_fire_one_alert(tmp_path: Path) -> None:
    require_prometheus()
    serve_dir = tmp_path / "serve"
    serve_dir.mkdir()
    sidecar = SidecarProcess(
        serve_dir,
        serve_config(
            serve_dir,
            sessions={"idle_timeout_s": 120.0, "end_grace_s": 0.1},
            workers=1,
            metrics_endpoint="127.0.0.1:0",
        ),
    ).start()
    provider = TracerProvider(resource=Resource({"service.name": "ops-assistant"}))
    try:
        metrics_at = sidecar.endpoints["metrics"]
        (tmp_path / "rules.yaml").write_text(_fast_rules(), encoding="utf-8")
        config = (
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "rule_files: [rules.yaml]\n"
            "scrape_configs:\n  - job_name: spanjudge\n"
            f"    static_configs:\n      - targets: ['{metrics_at}']\n"
        )
        with running_prometheus(tmp_path, config) as prometheus:
            provider.add_span_processor(
                SimpleSpanProcessor(
                    OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
                )
            )
            agent = ScriptedAgent(provider)
            assert wait_for(lambda: query(prometheus, 'up{job="spanjudge"} == 1'), 30)
            # One session at a time, more than a scrape apart: Prometheus sees each verdict
            # arrive, as it would from a live agent (a counter's first sample is not an increase).
            for i in range(12):
                scenario = LOADED if i % 2 == 0 else SKIPPED
                agent.run(replace(scenario, session_id=f"first-day-{i:02d}"), end_session=True)
                time.sleep(1.2)
            judged = 'sum(spanjudge_verdicts_total{gen_ai_evaluation_name="skill_loaded"})'
            assert wait_for(lambda: _value(query(prometheus, judged)) == 12, 30), sidecar.log

            seen: dict[str, set[str]] = {}
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                for alert in _alerts(prometheus):
                    seen.setdefault(alert["labels"]["alertname"], set()).add(alert["state"])
                if "firing" in seen.get(ALERT, set()):
                    break
                time.sleep(0.5)
            # a few more evaluations: nothing else goes pending behind it
            quiet_until = time.monotonic() + 6
            while time.monotonic() < quiet_until:
                alerts = _alerts(prometheus)
                for alert in alerts:
                    seen.setdefault(alert["labels"]["alertname"], set()).add(alert["state"])
                time.sleep(0.5)
    finally:
        provider.shutdown()
        assert sidecar.terminate() == 0

    assert set(seen) == {ALERT}, seen
    assert "firing" in seen[ALERT], seen
    (firing,) = [a for a in alerts if a["labels"]["alertname"] == ALERT]
    assert firing["state"] == "firing"
    assert firing["labels"]["gen_ai_agent_name"] == "ops-assistant"
    assert firing["labels"]["gen_ai_skill_name"] == "csv-report"
    assert firing["labels"]["severity"] == "critical"
    # half of the sessions loaded the skill (the first sample of each series is not counted
    # as an increase, so the figure may move a little around 50%)
    assert 0.3 <= float(firing["value"]) <= 0.7, firing


def _value(vector: list[dict[str, Any]]) -> float | None:
    return float(vector[0]["value"][1]) if vector else None
