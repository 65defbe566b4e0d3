"""The shipped pipeline end to end, every part real.

agent (SDK + OTLP exporter) -> Collector (collector-config/sidecar.yaml) -> `spanjudge serve`
-> the same Collector's verdict receiver -> `prometheus_remote_write` -> Prometheus with the
shipped alert rules; verdict spans and log records -> `otlp_grpc/tempo` and `otlp_http/loki`,
played by a second Collector that writes them to `file` exporters.

Two agents share the run: `ops-assistant` runs the fixture sessions whose required skill does not
load, `ops-assistant-healthy` the ones where it does. The skill-miss alert must go pending for
the first agent's skills and nothing may alert for the second. Every panel query of the shipped
Grafana dashboard then runs against this Prometheus and must return the series it is drawn from.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spanjudge import semconv
from spanjudge.spans.record import SpanRecord
from tests.collector import traffic
from tests.collector.otelcol import (
    CONFIG_DIR,
    Collector,
    Prometheus,
    backend_config,
    file_records,
    free_port,
    loopback_env,
    otelcol_binary,
    verdicts_env,
    wait_for,
)
from tests.judges.chat_server import ChatServer, completion
from tests.sidecar.helpers import SidecarProcess

pytestmark = pytest.mark.slow

DASHBOARD = CONFIG_DIR / "grafana" / "dashboards" / "spanjudge.json"
FAILING, HEALTHY = "ops-assistant", "ops-assistant-healthy"
ALERT = "SpanjudgeRequiredSkillLoadRateLow"
SKILL_LOADED = 'spanjudge_verdicts_total{gen_ai_evaluation_name="skill_loaded"}'
JUDGE_REPLY = json.dumps({"rating": "yes", "rationale": "the loaded skill fits the request"})
ROUNDS = 3  # after round 0: at least 5 verdicts per agent and skill for the alert to judge


def _as_agent(spans: list[SpanRecord], agent: str) -> list[SpanRecord]:
    def rename(attrs: Any) -> dict[str, Any]:
        return {k: (agent if k == semconv.GEN_AI_AGENT_NAME else v) for k, v in attrs.items()}

    return [dataclasses.replace(s, attributes=rename(s.attributes)) for s in spans]


@dataclasses.dataclass
class Run:
    prometheus: Prometheus
    backend_dir: Path
    session_ids: set[str]
    failed_skills: set[str]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    otelcol_binary()
    tmp = tmp_path_factory.mktemp("e2e")
    fixture = traffic.sessions()
    outcomes = traffic.skill_loaded_outcomes(fixture, tmp)
    failing = [sid for sid, seen in outcomes.items() if "fail" in dict(seen)]
    healthy = [sid for sid, seen in outcomes.items() if seen and {o for o, _ in seen} == {"pass"}]
    failed_skills = {skill for sid in failing for o, skill in outcomes[sid] if o == "fail"}
    assert failing and healthy and failed_skills

    started: list[Any] = []
    try:
        prometheus = Prometheus(tmp / "prometheus")
        started.append(prometheus)
        backend_path, backend_env = backend_config(tmp / "backend")
        started.append(Collector(tmp / "backend", backend_path).start())
        env = loopback_env() | backend_env
        env |= {
            "PROMETHEUS_REMOTE_WRITE_URL": prometheus.remote_write_url,
            "SPANJUDGE_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{free_port()}",
        }
        started.append(Collector(tmp / "collector", CONFIG_DIR / "sidecar.yaml", env).start())
        # A scripted OpenAI-compatible model as skill_selection's judge: the dashboard's judge
        # panel has calls to show.
        judge = ChatServer([completion(JUDGE_REPLY)] * 1000)
        judge_thread = threading.Thread(target=judge.httpd.serve_forever, daemon=True)
        judge_thread.start()
        started.append(judge)
        (tmp / "spanjudge").mkdir()
        config = traffic.serve_config(
            tmp / "spanjudge",
            grpc_endpoint=env["SPANJUDGE_OTLP_GRPC_ENDPOINT"],
            export={"metrics_interval_s": 1.0},
        )
        # With a price, the dashboard's judge cost panel has a figure to show.
        price = {"input_per_million": 1.0, "output_per_million": 4.0}
        config["judges"] = {
            "scripted": {
                "type": "openai",
                "base_url": judge.base_url,
                "model": "scripted",
                "price": price,
            }
        }
        # trajectory_match sampled: the coverage panel's sampled share has sessions to show
        config["evaluators"] = {
            "skill_selection": {"judge": "scripted"},
            "trajectory_match": {"sample": 0.5},
        }
        sidecar = SidecarProcess(tmp / "spanjudge", config, env=verdicts_env(env)).start()
        started.append(sidecar)

        agent = env["AGENTS_OTLP_GRPC_ENDPOINT"]
        # One span with an impossible clock: rejected by spanjudge, counted as dropped.
        absurd = dataclasses.replace(
            fixture[failing[0]][0], start_unix_nano=1_000_000_000, end_unix_nano=2_000_000_000
        )
        traffic.send(agent, [absurd])
        sent: set[str] = set()
        expected = 0.0
        for round_ in range(ROUNDS + 1):
            for group, name in ((failing, FAILING), (healthy, HEALTHY)):
                for sid in group:
                    spans = _as_agent(traffic.copy(fixture[sid], round_ + 1), name)
                    traffic.send(agent, spans)
                    sent.add(f"{sid}-r{round_ + 1}")
            if round_ == 0:
                # increase() ignores a counter's first sample: wait until Prometheus has it.
                assert wait_for(lambda: prometheus.total(SKILL_LOADED) > 0, 90), sidecar.log
                expected = prometheus.total(SKILL_LOADED)
        assert wait_for(lambda: prometheus.total(SKILL_LOADED) >= expected * (ROUNDS + 1), 90), (
            prometheus.query(SKILL_LOADED)
        )
        yield Run(
            prometheus=prometheus,
            backend_dir=tmp / "backend",
            session_ids=sent,
            failed_skills=failed_skills,
        )
    finally:
        for part in reversed(started):
            if isinstance(part, SidecarProcess):
                part.terminate()
            elif isinstance(part, ChatServer):
                part.httpd.shutdown()
                part.httpd.server_close()
            else:
                part.stop()


def test_skill_miss_alert_fires_for_the_failing_agent_and_nothing_for_the_healthy(
    run: Run,
) -> None:
    prometheus = run.prometheus
    assert ALERT in prometheus.rule_names()

    def pending() -> list[dict[str, Any]]:
        return [a for a in prometheus.alerts() if a["labels"]["alertname"] == ALERT]

    # The test's Prometheus evaluates the rule groups every 5 s (shipped: 1 m); `for: 10m` keeps
    # the alert pending in a test: its expression holds, it has not lasted 10 minutes yet.
    assert wait_for(lambda: len(pending()) >= len(run.failed_skills), 90), prometheus.alerts()
    fired = {
        (a["labels"]["gen_ai_agent_name"], a["labels"]["gen_ai_skill_name"]) for a in pending()
    }
    assert fired == {(FAILING, skill) for skill in run.failed_skills}
    assert all(a["state"] in ("pending", "firing") for a in pending())
    assert all(float(a["value"]) < 0.9 for a in pending())
    # The healthy agent has verdicts enough to be judged, and no alert of any kind.
    healthy = (
        'sum(increase(spanjudge_verdicts_total{gen_ai_evaluation_name="skill_loaded", '
        f'gen_ai_agent_name="{HEALTHY}"}}[1h]))'
    )
    assert prometheus.total(healthy) > 4
    assert not [a for a in prometheus.alerts() if a["labels"].get("gen_ai_agent_name") == HEALTHY]


def test_verdict_spans_and_log_records_reach_the_file_exporter(run: Run) -> None:
    traces = run.backend_dir / "traces.jsonl"
    logs = run.backend_dir / "logs.jsonl"

    def evaluated() -> set[str]:
        return {
            str(s["attrs"][semconv.SESSION_ID])
            for s in file_records(traces, "spans")
            if s["name"] == semconv.SPAN_EVALUATE
        }

    assert wait_for(lambda: evaluated() >= run.session_ids, 60), run.session_ids - evaluated()
    spans = [s for s in file_records(traces, "spans") if s["name"] == semconv.SPAN_EVALUATE]
    assert all(
        e["name"] == semconv.EV_EVALUATION_RESULT for s in spans for e in s.get("events", [])
    )
    assert all(s.get("events") for s in spans)
    records = list(file_records(logs, "logs"))
    results = [r for r in records if r.get("eventName") == semconv.EV_EVALUATION_RESULT]
    assert {str(r["attrs"][semconv.SESSION_ID]) for r in results} >= run.session_ids
    # The log records point at the judged agent's trace, so Loki links to Tempo.
    agent_traces = {
        s["traceId"] for s in file_records(traces, "spans") if s["name"] != semconv.SPAN_EVALUATE
    }
    assert agent_traces, "agent spans must reach Tempo too (traces/agents)"
    assert {r["traceId"] for r in results if r.get("traceId")} <= agent_traces


def test_the_rejected_span_is_dropped_once_not_retried(run: Run) -> None:
    # spanjudge refused the span with the impossible clock (INVALID_ARGUMENT, or a partial
    # success inside a bigger batch): a permanent answer, which the Collector's exporter must
    # not retry. A retried refusal would count again on every attempt.
    dropped = 'spanjudge_spans_dropped_total{reason="rejected"}'
    assert run.prometheus.total(dropped) == 1, run.prometheus.query("spanjudge_spans_dropped_total")


# --- the dashboard ---


def _panels() -> Iterator[dict[str, Any]]:
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for panel in doc["panels"]:
        yield panel
        yield from panel.get("panels", [])


def _grafana_expr(expr: str) -> str:
    """The query Grafana sends with every variable at its default (All; window 1h)."""
    expr = expr.replace("$__rate_interval", "5m").replace("$window", "1h")
    return re.sub(r"\$\{?(agent|evaluator)\}?", ".*", expr)


def _grouping(expr: str) -> set[str]:
    """Labels the result carries: the first aggregation's `by (...)` (minus `le` under
    histogram_quantile); none for a bare `sum (...)`."""
    match = re.search(r"\b(?:sum|max|min|avg|count)\s*(?:by\s*\(([^)]*)\))?\s*\(", expr)
    assert match, expr
    labels = {label.strip() for label in (match.group(1) or "").split(",") if label.strip()}
    if expr.lstrip().startswith("histogram_quantile"):
        labels.discard("le")
    return labels


def test_every_dashboard_panel_query_returns_its_series(run: Run) -> None:
    prometheus = run.prometheus
    empty = []
    checked = 0
    for panel in _panels():
        for target in panel.get("targets", []):
            where = f"panel {panel['title']!r} target {target['refId']}"
            result = prometheus.query(_grafana_expr(target["expr"]))
            if not result:
                empty.append(where)
                continue
            wanted = _grouping(target["expr"])
            legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
            for series in result:
                labels = set(series["metric"]) - {"__name__"}
                assert labels == wanted, f"{where}: labels {labels}, panel groups by {wanted}"
                assert legend <= labels, f"{where}: legend needs {legend - labels}"
                assert math.isfinite(float(series["value"][1])), f"{where}: {series}"
            checked += 1
    assert not empty, f"panels that would show 'No data': {empty}"
    assert checked > 20


def test_dashboard_variables_offer_both_agents(run: Run) -> None:
    agents = run.prometheus.api(
        "/api/v1/label/gen_ai_agent_name/values", **{"match[]": "spanjudge_verdicts_total"}
    )
    assert {FAILING, HEALTHY} <= set(agents)
