"""The official OpenAI instrumentation in event-only mode, through the shipped Collector.

agent (official OpenAI client + `opentelemetry-instrumentation-openai-v2`, scripted model; SDK
OTLP exporters for traces and logs) -> Collector (collector-config/sidecar.yaml: traces/agents
and logs/agents both export to spanjudge) -> `spanjudge serve` -> the Collector's verdict
receiver -> a second Collector writing verdict spans to a `file` exporter.

The same agent runs twice: once with its messages on the chat spans (``span_only``), once with
them only in `gen_ai.client.inference.operation.details` log records (``event_only``). Both
sessions must get the same verdicts.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from spanjudge import semconv
from tests.collector.otelcol import (
    CONFIG_DIR,
    Collector,
    backend_config,
    file_records,
    free_port,
    loopback_env,
    otelcol_binary,
    verdicts_env,
    wait_for,
)
from tests.conftest import unavailable
from tests.sidecar.helpers import SidecarProcess

if importlib.util.find_spec("opentelemetry.instrumentation.openai_v2") is None:
    unavailable("openai-v2", "opentelemetry-instrumentation-openai-v2 is not installed")

from tests.support import openai_agent  # after the check: the agent runs on openai

pytestmark = pytest.mark.slow

Verdicts = list[tuple[str, str, float | None, str | None]]


def _run_agent(content: str, session_id: str, endpoint: str) -> None:
    resource = Resource({"service.name": "openai-agent"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True))
    )
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint, insecure=True))
    )
    try:
        openai_agent.run(content, tracer_provider, logger_provider, session_id)
    finally:
        tracer_provider.shutdown()
        logger_provider.shutdown()


def _judged(traces: Path) -> dict[str, Verdicts]:
    """Session id -> the verdicts of its last revision, from the evaluation spans stored."""
    last: dict[str, tuple[int, Verdicts]] = {}
    for span in file_records(traces, "spans"):
        if span["name"] != semconv.SPAN_EVALUATE:
            continue
        session = str(span["attrs"][semconv.SESSION_ID])
        revision = int(span["attrs"][semconv.SJ_REVISION])
        verdicts = []
        for event in span.get("events", []):
            attrs = {a["key"]: _value(a["value"]) for a in event.get("attributes", [])}
            verdicts.append(
                (
                    str(attrs[semconv.GEN_AI_EVALUATION_NAME]),
                    str(attrs[semconv.SJ_OUTCOME]),
                    attrs.get(semconv.GEN_AI_EVALUATION_SCORE_VALUE),
                    attrs.get(semconv.SJ_REASON) or None,
                )
            )
        if session not in last or last[session][0] < revision:
            last[session] = (revision, sorted(verdicts))
    return {session: verdicts for session, (_, verdicts) in last.items()}


def _value(value: dict[str, Any]) -> Any:
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in value:
            return value[kind]
    if "intValue" in value:
        return int(value["intValue"])
    return None


def test_event_only_content_through_the_collector_is_judged_as_span_content(
    tmp_path: Path,
) -> None:
    otelcol_binary()
    started: list[Any] = []
    try:
        backend_path, backend_env = backend_config(tmp_path / "backend")
        started.append(Collector(tmp_path / "backend", backend_path).start())
        env = loopback_env() | backend_env
        env |= {
            # no Prometheus here: the metrics pipelines export to a closed port
            "PROMETHEUS_REMOTE_WRITE_URL": f"http://127.0.0.1:{free_port()}/api/v1/write",
            "SPANJUDGE_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{free_port()}",
        }
        started.append(Collector(tmp_path / "collector", CONFIG_DIR / "sidecar.yaml", env).start())
        (tmp_path / "spanjudge").mkdir()
        expect = tmp_path / "spanjudge" / "expect.json"
        expect.write_text(json.dumps(openai_agent.EXPECTATIONS))
        config = {
            "expectations_files": [str(expect)],
            "serve": {
                "grpc_endpoint": env["SPANJUDGE_OTLP_GRPC_ENDPOINT"],
                "http_endpoint": None,
                "metrics_endpoint": "127.0.0.1:0",
                "tick_interval_s": 0.1,
                "spool": {"path": str(tmp_path / "spanjudge" / "spool.db")},
            },
        }
        sidecar = SidecarProcess(tmp_path / "spanjudge", config, env=verdicts_env(env)).start()
        started.append(sidecar)

        agents = env["AGENTS_OTLP_GRPC_ENDPOINT"]
        _run_agent("span_only", "openai-agent-spans", agents)
        _run_agent("event_only", "openai-agent-events", agents)
        traces = tmp_path / "backend" / "traces.jsonl"

        def same() -> bool:
            found = _judged(traces)
            return (
                "openai-agent-spans" in found
                and found.get("openai-agent-events") == found["openai-agent-spans"]
            )

        assert wait_for(same, 90), (_judged(traces), sidecar.log.read_text()[-3000:])
        judged = _judged(traces)["openai-agent-events"]
        # the content the judges need arrived only through the logs pipeline
        assert ("outcome", "pass", 1.0, None) in judged
        assert ("skill_selection", "pass", 1.0, None) in judged
    finally:
        for part in reversed(started):
            if isinstance(part, SidecarProcess):
                part.terminate()
            else:
                part.stop()
