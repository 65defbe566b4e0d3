"""Content recorded only as OTLP log records is judged as content recorded on the spans, in every
front end: `spanjudge eval`, `spanjudge serve` (OTLP/gRPC and OTLP/HTTP) and in process through
`configure_opentelemetry`.

The agent is the official OpenAI client instrumented by the official OpenTelemetry OpenAI
instrumentation against a scripted model (`tests/support/openai_agent.py`). Run with
``span_only`` its chat spans hold the messages; run with ``event_only`` the messages exist only in
`gen_ai.client.inference.operation.details` log records, and the verdicts must be the same.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge import semconv
from spanjudge.cli import main
from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.expectations import ExpectationResolver, parse_entries
from spanjudge.pipeline import Pipeline
from spanjudge.sessions.store import ClosePolicy, SessionStore
from spanjudge.spans.otlp_json import request_to_json_line, sdk_spans_to_request
from spanjudge.spans.sdk import carriers_from_sdk, span_from_sdk
from spanjudge.values import SessionResult
from tests.conftest import unavailable
from tests.sidecar.helpers import Received, SidecarProcess, VerdictServer, wait_for

if importlib.util.find_spec("opentelemetry.instrumentation.openai_v2") is None:
    unavailable("openai-v2", "opentelemetry-instrumentation-openai-v2 is not installed")

from tests.support import openai_agent

Verdicts = list[tuple[str, str, float | None, str | None]]
EXPECT = openai_agent.EXPECTATIONS


def _recorded(
    content: str, session_id: str = openai_agent.SESSION_ID
) -> tuple[list[Any], list[Any]]:
    """The agent's spans and log records, as its SDK providers finished them."""
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    answer = openai_agent.run(content, tracer_provider, logger_provider, session_id)
    assert answer is not None and "280" in answer
    return list(spans.get_finished_spans()), list(logs.get_finished_logs())


def _content_on_spans(spans: list[Any]) -> bool:
    return any(semconv.GEN_AI_INPUT_MESSAGES in (s.attributes or {}) for s in spans)


def test_event_only_records_the_messages_in_log_records_alone() -> None:
    # What the comparisons below rest on: the two modes differ where the content is.
    spans, logs = _recorded("span_only")
    assert _content_on_spans(spans) and not logs
    spans, logs = _recorded("event_only")
    assert not _content_on_spans(spans)
    assert {r.log_record.event_name for r in logs} == {semconv.EV_GEN_AI_INFERENCE_DETAILS}
    assert all(semconv.GEN_AI_INPUT_MESSAGES in r.log_record.attributes for r in logs)


def _report_verdicts(report: dict[str, Any]) -> dict[str, Verdicts]:
    return {
        s["session_id"]: sorted(
            (v["evaluator"], v["outcome"], v["score"], v["reason"]) for v in s["verdicts"]
        )
        for s in report["sessions"]
    }


def _eval(capsys: pytest.CaptureFixture[str], tmp: Path, *files: Path) -> dict[str, Any]:
    expect = tmp / "expect.json"
    expect.write_text(json.dumps(EXPECT))
    code = main(["eval", *map(str, files), "--expect", str(expect), "--format", "json"])
    out = capsys.readouterr().out
    assert code == 0, out
    report: dict[str, Any] = json.loads(out)
    return report


def _content_on_spans_report(capsys: pytest.CaptureFixture[str], tmp: Path) -> dict[str, Any]:
    """The report of the agent's run with its content on its spans: what every other way of
    recording the same run must be judged as."""
    spans, _ = _recorded("span_only")
    on_spans = tmp / "on_spans.jsonl"
    on_spans.write_text(request_to_json_line(sdk_spans_to_request(spans)) + "\n")
    return _eval(capsys, tmp, on_spans)


def test_eval_judges_content_in_log_records_as_content_on_spans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = _content_on_spans_report(capsys, tmp_path)
    spans, logs = _recorded("event_only")
    traces, records = tmp_path / "traces.jsonl", tmp_path / "logs.jsonl"
    traces.write_text(request_to_json_line(sdk_spans_to_request(spans)) + "\n")
    records.write_text(request_to_json_line(encode_logs(logs)) + "\n")  # type: ignore[arg-type]
    assert expected["sessions"][0]["final_answer"]
    separate = _eval(capsys, tmp_path, traces, records)
    assert _report_verdicts(separate) == _report_verdicts(expected)
    assert separate["sessions"][0]["final_answer"] == expected["sessions"][0]["final_answer"]
    assert separate["sessions"][0]["log_records"] == len(logs)
    assert separate["sessions"][0]["log_records_unjoined"] == 0
    # one file holding both, as a Collector file exporter shared by two pipelines writes it
    both = tmp_path / "both.jsonl"
    both.write_text(records.read_text() + traces.read_text())
    assert _report_verdicts(_eval(capsys, tmp_path, both)) == _report_verdicts(expected)
    # without its log records the same session reads differently: the test can tell
    assert _report_verdicts(_eval(capsys, tmp_path, traces)) != _report_verdicts(expected)


def _length_prefixed(*messages: bytes) -> bytes:
    """Messages as the Collector's file exporter writes them in its proto format."""
    return b"".join(len(m).to_bytes(4, "big") + m for m in messages)


def test_eval_reads_log_records_from_protobuf_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = _report_verdicts(_content_on_spans_report(capsys, tmp_path))
    spans, logs = _recorded("event_only")
    trace_request = encode_spans(spans).SerializeToString()
    logs_request = encode_logs(logs).SerializeToString()  # type: ignore[arg-type]

    traces, records = tmp_path / "traces.pb", tmp_path / "logs.pb"
    traces.write_bytes(trace_request)
    records.write_bytes(logs_request)
    separate = _eval(capsys, tmp_path, traces, records)
    assert _report_verdicts(separate) == expected
    assert separate["sessions"][0]["log_records"] == len(logs)
    # one file of both, as the file exporter shared by two pipelines writes it
    both = tmp_path / "both.pb"
    both.write_bytes(_length_prefixed(logs_request, trace_request))
    assert _report_verdicts(_eval(capsys, tmp_path, both)) == expected
    assert _report_verdicts(_eval(capsys, tmp_path, traces)) != expected


def _as_framework_events(line: str, event_name: str | None) -> str:
    """The records of an OTLP JSON logs line as a framework's own content events: named
    ``event_name`` (or nothing), their message attributes moved into the body."""
    doc = json.loads(line)
    for resource in doc["resourceLogs"]:
        for scope in resource["scopeLogs"]:
            for record in scope["logRecords"]:
                record.pop("eventName", None)
                if event_name is not None:
                    record["eventName"] = event_name
                moved = [a for a in record["attributes"] if a["key"].startswith("gen_ai.")]
                record["attributes"] = [a for a in record["attributes"] if a not in moved]
                record["body"] = {"kvlistValue": {"values": moved}}
    return json.dumps(doc)


def test_a_framework_event_whose_body_is_genai_shaped_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = _report_verdicts(_content_on_spans_report(capsys, tmp_path))
    spans, logs = _recorded("event_only")
    traces = request_to_json_line(sdk_spans_to_request(spans))
    line = request_to_json_line(encode_logs(logs))  # type: ignore[arg-type]
    for name in ("acme.llm.completion", None):
        both = tmp_path / f"{name}.jsonl"
        both.write_text(traces + "\n" + _as_framework_events(line, name) + "\n")
        assert _report_verdicts(_eval(capsys, tmp_path, both)) == expected, name


def _pipeline(now: list[float]) -> Pipeline:
    engine = Engine(parse_config({}))
    engine.add_expectations(ExpectationResolver(parse_entries(EXPECT, "expectations")))
    policy = ClosePolicy(per_turn=True, idle_timeout_s=60.0)
    return Pipeline(engine, SessionStore(policy, clock=lambda: now[0]), [])


def _outcome(result: SessionResult) -> tuple[str, str | None]:
    verdict = next(v for v in result.verdicts if v.evaluator == "outcome")
    return verdict.outcome, verdict.reason


def test_log_records_wait_for_their_session_as_late_spans_do() -> None:
    spans, logs = _recorded("event_only")
    records = [span_from_sdk(s) for s in spans]
    carriers = carriers_from_sdk(logs).carriers
    # within the grace after the turn's root span ended: one evaluation, content read
    now = [100.0]
    pipeline = _pipeline(now)
    pipeline.add(records)
    now[0] += 1.0
    assert pipeline.tick() == []
    pipeline.add(carriers)
    now[0] += 10.0
    (result,) = pipeline.tick()
    assert result.trajectory.revision == 1 and _outcome(result) == ("pass", None)
    # after the close: the session re-opens as the next revision (closed, as after any late
    # span, by the idle timeout), content read
    now = [100.0]
    pipeline = _pipeline(now)
    pipeline.add(records)
    now[0] += 10.0
    (first,) = pipeline.tick()
    assert _outcome(first) == ("not_evaluated", "no_final_answer")
    pipeline.add(carriers)
    now[0] += 61.0
    (second,) = pipeline.tick()
    assert second.trajectory.revision == first.trajectory.revision + 1
    assert _outcome(second) == ("pass", None)


# --- in process ---


def _in_process(content: str, monkeypatch: pytest.MonkeyPatch, tmp: Path) -> Verdicts:
    from spanjudge.quickstart import configure_opentelemetry

    for signal in ("TRACES", "METRICS", "LOGS"):
        monkeypatch.setenv(f"OTEL_{signal}_EXPORTER", "none")
    monkeypatch.setenv("SPANJUDGE_CONSOLE", "0")
    config = tmp / "spanjudge.yaml"
    config.write_text(f"expectations_files: [{json.dumps(str(tmp / 'expect.json'))}]\n")
    (tmp / "expect.json").write_text(json.dumps(EXPECT))
    telemetry = configure_opentelemetry(str(config), set_global=False)
    verdicts = InMemoryLogRecordExporter()
    telemetry.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(verdicts))
    try:
        openai_agent.run(content, telemetry.tracer_provider, telemetry.logger_provider)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _evaluated(verdicts):
            time.sleep(0.05)
    finally:
        telemetry.shutdown()
    found = [
        (
            str(a[semconv.GEN_AI_EVALUATION_NAME]),
            str(a[semconv.SJ_OUTCOME]),
            a.get(semconv.GEN_AI_EVALUATION_SCORE_VALUE),
            a.get(semconv.SJ_REASON),
        )
        for r in verdicts.get_finished_logs()
        if r.log_record.event_name == semconv.EV_EVALUATION_RESULT
        for a in [r.log_record.attributes or {}]
    ]
    assert found, "no verdict came out"
    return sorted(found)  # type: ignore[arg-type]


def _evaluated(exporter: InMemoryLogRecordExporter) -> bool:
    return any(
        r.log_record.event_name == semconv.EV_EVALUATION_RESULT
        for r in exporter.get_finished_logs()
    )


def test_in_process_judges_content_in_log_records_as_content_on_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "spans").mkdir()
    (tmp_path / "logs").mkdir()
    on_spans = _in_process("span_only", monkeypatch, tmp_path / "spans")
    in_logs = _in_process("event_only", monkeypatch, tmp_path / "logs")
    assert in_logs == on_spans
    # the content the judges need was read: a request, a catalogue and an answer
    assert ("outcome", "pass", 1.0, None) in in_logs
    assert any(v[0] == "skill_selection" and v[1] == "pass" for v in in_logs)


# --- serve ---


def _served(received: Received) -> dict[str, Verdicts]:
    """Session id -> the verdicts of its last revision, as the sidecar exported them."""
    last: dict[str, tuple[int, Verdicts]] = {}
    with received.lock:
        for span in received.eval_spans:
            session, revision = span["attrs"]["session.id"], span["attrs"]["spanjudge.revision"]
            verdicts = sorted(
                (
                    e[semconv.GEN_AI_EVALUATION_NAME],
                    e[semconv.SJ_OUTCOME],
                    e.get(semconv.GEN_AI_EVALUATION_SCORE_VALUE),
                    e.get(semconv.SJ_REASON) or None,
                )
                for e in span["events"]
            )
            if session not in last or last[session][0] < revision:
                last[session] = (revision, verdicts)
    return {session: verdicts for session, (_, verdicts) in last.items()}


@pytest.mark.slow
def test_serve_judges_content_in_log_records_as_content_on_spans(tmp_path: Path) -> None:
    (tmp_path / "expect.json").write_text(json.dumps(EXPECT))
    verdicts = VerdictServer()
    sidecar = SidecarProcess(
        tmp_path,
        {
            "expectations_files": [str(tmp_path / "expect.json")],
            "serve": {
                "grpc_endpoint": "127.0.0.1:0",
                "http_endpoint": "127.0.0.1:0",
                "metrics_endpoint": "127.0.0.1:0",
                "tick_interval_s": 0.1,
                "spool": {"path": str(tmp_path / "spool.db")},
            },
        },
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": verdicts.endpoint,
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
        },
    ).start()
    try:
        grpc_at, http_at = sidecar.endpoints["grpc"], f"http://{sidecar.endpoints['http']}"
        spans = GrpcSpanExporter(endpoint=grpc_at, insecure=True)
        on_spans, _ = _recorded("span_only", "openai-agent-spans")
        assert spans.export(on_spans) == SpanExportResult.SUCCESS
        # the log records after their spans, over gRPC (the LogsService)
        traced, logs = _recorded("event_only", "openai-agent-logs-grpc")
        assert spans.export(traced) == SpanExportResult.SUCCESS
        grpc_logs = GrpcLogExporter(endpoint=grpc_at, insecure=True)
        assert grpc_logs.export(logs) == LogRecordExportResult.SUCCESS
        # the log records before their spans, over HTTP (POST /v1/logs)
        traced, logs = _recorded("event_only", "openai-agent-logs-http")
        http_logs = HttpLogExporter(endpoint=f"{http_at}/v1/logs")
        assert http_logs.export(logs) == LogRecordExportResult.SUCCESS
        assert spans.export(traced) == SpanExportResult.SUCCESS
        for exporter in (spans, grpc_logs, http_logs):
            exporter.shutdown()

        def judged() -> bool:
            found = _served(verdicts.received)
            return len(found) == 3 and all(
                v[0] != "outcome" or v[3] != "no_final_answer"
                for v in found["openai-agent-logs-http"]
            )

        assert wait_for(judged, 60), _served(verdicts.received)
        assert wait_for(
            lambda: (
                _served(verdicts.received)["openai-agent-logs-grpc"]
                == _served(verdicts.received)["openai-agent-spans"]
            ),
            30,
        ), _served(verdicts.received)
        found = _served(verdicts.received)
        assert found["openai-agent-logs-http"] == found["openai-agent-spans"]
        assert ("outcome", "pass", 1.0, None) in found["openai-agent-spans"]
        assert sidecar.terminate() == 0
    finally:
        if sidecar.proc and sidecar.proc.poll() is None:
            sidecar.kill9()
        verdicts.stop()


@pytest.mark.slow
def test_acknowledged_log_records_survive_a_kill_9(tmp_path: Path) -> None:
    (tmp_path / "expect.json").write_text(json.dumps(EXPECT))

    def config(end_grace_s: float, grpc_endpoint: str = "127.0.0.1:0") -> dict[str, Any]:
        return {
            "expectations_files": [str(tmp_path / "expect.json")],
            "sessions": {"end_grace_s": end_grace_s, "turn_grace_s": end_grace_s},
            "serve": {
                "grpc_endpoint": grpc_endpoint,
                "http_endpoint": None,
                "metrics_endpoint": None,
                "tick_interval_s": 0.1,
                "spool": {"path": str(tmp_path / "spool.db")},
            },
        }

    verdicts = VerdictServer()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": verdicts.endpoint, "OTEL_EXPORTER_OTLP_INSECURE": "true"}
    # the first process holds the session open long enough to be killed with it
    first = SidecarProcess(tmp_path, config(600.0), env).start()
    second: SidecarProcess | None = None
    try:
        at = first.endpoints["grpc"]
        traced, logs = _recorded("event_only", "openai-agent-killed")
        exporter = GrpcLogExporter(endpoint=at, insecure=True)
        assert exporter.export(logs) == LogRecordExportResult.SUCCESS
        spans = GrpcSpanExporter(endpoint=at, insecure=True)
        assert spans.export(traced) == SpanExportResult.SUCCESS
        first.kill9()
        second = SidecarProcess(tmp_path, config(0.2, at), env).start()
        on_spans, _ = _recorded("span_only", "openai-agent-spans")
        assert spans.export(on_spans) == SpanExportResult.SUCCESS
        for done in (exporter, spans):
            done.shutdown()
        assert wait_for(lambda: len(_served(verdicts.received)) == 2, 60), second.log.read_text()
        found = _served(verdicts.received)
        assert found["openai-agent-killed"] == found["openai-agent-spans"]
    finally:
        for process in (first, second):
            if process is not None and process.proc and process.proc.poll() is None:
                process.kill9()
        verdicts.stop()
