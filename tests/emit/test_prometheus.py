"""The real Prometheus exporter serves the verdict metrics; a real Prometheus server scrapes them
and answers a query for `spanjudge_verdicts_total` with the ARCHITECTURE.md section 8 labels."""

from __future__ import annotations

import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry, start_http_server

from spanjudge.demo.agent import SCENARIOS, ScriptedAgent
from spanjudge.emit.metrics import score_views
from spanjudge.processor import SpanJudgeProcessor
from tests.support.prometheus import get as _get
from tests.support.prometheus import require_prometheus, running_prometheus

pytestmark = [pytest.mark.slow]


@pytest.fixture(autouse=True)
def _prometheus_installed() -> None:
    require_prometheus()


@pytest.fixture
def metrics_endpoint() -> Iterator[tuple[int, MeterProvider]]:
    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    meter_provider = MeterProvider(metric_readers=[reader], views=score_views())
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield server.server_port, meter_provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        meter_provider.shutdown()


@pytest.fixture
def prometheus(tmp_path: Path, metrics_endpoint: tuple[int, MeterProvider]) -> Iterator[str]:
    target_port, _ = metrics_endpoint
    with running_prometheus(
        tmp_path,
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: spanjudge\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n",
    ) as base:
        yield base


def test_prometheus_scrapes_verdicts(
    metrics_endpoint: tuple[int, MeterProvider], prometheus: str
) -> None:
    _, meter_provider = metrics_endpoint
    tracer_provider = TracerProvider()
    processor = SpanJudgeProcessor(tracer_provider=tracer_provider, meter_provider=meter_provider)
    tracer_provider.add_span_processor(processor)
    agent = ScriptedAgent(tracer_provider)
    for scenario in SCENARIOS:
        agent.run(scenario, end_session=True)
    assert processor.force_flush(10_000)

    query = urllib.parse.quote('spanjudge_verdicts_total{gen_ai_evaluation_name="skill_loaded"}')
    deadline = time.monotonic() + 30
    series: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        answer = _get(f"{prometheus}/api/v1/query?query={query}")
        assert answer["status"] == "success"
        series = answer["data"]["result"]
        if len(series) >= 3:
            break
        time.sleep(0.5)
    labels = {
        (s["metric"]["spanjudge_outcome"], s["metric"].get("gen_ai_skill_name", "")): (
            s["metric"],
            float(s["value"][1]),
        )
        for s in series
    }
    assert set(labels) == {
        ("pass", "csv-report"),
        ("fail", "incident-triage"),
        ("not_evaluated", ""),
    }, series
    metric, value = labels[("fail", "incident-triage")]
    assert value == 1.0
    assert metric["__name__"] == "spanjudge_verdicts_total"
    assert metric["gen_ai_agent_name"] == "ops-assistant"
    assert metric["job"] == "spanjudge"
    # The score histogram is there too, with the documented buckets.
    buckets = _get(
        f"{prometheus}/api/v1/query?query="
        + urllib.parse.quote('spanjudge_score_bucket{gen_ai_evaluation_name="skill_loaded"}')
    )["data"]["result"]
    assert {b["metric"]["le"] for b in buckets} == {"0.0", "0.25", "0.5", "0.75", "1.0", "+Inf"}
    processor.shutdown()
