"""The emitted evaluation spans, span events and log records of the committed fixtures' sessions
against the contract (ARCHITECTURE.md section 8), every field derived here from the session's
result, as OTLP: what the SDK path (`OtelVerdictSink`, the in-process processor's) hands the
SDK's OTLP exporters, and what `serve` (`emit.otlp`, `sidecar.otlp_send`) sends a real OTLP/gRPC
and OTLP/HTTP receiver. And the two paths send the same OTLP, field by field, but for the
evaluation span's own (random) span id and the timestamps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge import __version__
from spanjudge.emit.otel import OtelVerdictSink
from spanjudge.sidecar.config import ExportConfig
from spanjudge.sidecar.export import build_verdict_export
from spanjudge.values import SessionResult, Verdict
from tests.support.fixture_reports import fixture_results
from tests.support.otlp_messages import timeless
from tests.support.otlp_receivers import GrpcOtlpReceiver, HttpOtlpReceiver

ROOT = Path(__file__).resolve().parents[2]
RESOURCE = Resource.create(
    {"service.name": "verdicts-test", "deployment.environment": "ci"},
    schema_url="https://opentelemetry.io/schemas/1.26.0",  # carried by both paths, not dropped
)
PATHS = ("sdk", "serve grpc", "serve http/protobuf")


@pytest.fixture(scope="module")
def results() -> list[SessionResult]:
    found = fixture_results("claude_code", "strands", "genai_manual", "langgraph")
    assert len(found) > 20
    return found


def _expected_attributes(verdict: Verdict, session_id: str, revision: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.evaluation.name": verdict.evaluator,
        "gen_ai.evaluation.score.label": verdict.label,
        "gen_ai.evaluation.explanation": verdict.explanation,
        "spanjudge.outcome": verdict.outcome,
        "spanjudge.judge": verdict.judge,
        "spanjudge.verdict.id": verdict.stable_id(session_id, revision),
    }
    if verdict.score is not None:
        attrs["gen_ai.evaluation.score.value"] = float(verdict.score)
    if verdict.reason:
        attrs["spanjudge.reason"] = verdict.reason
    if verdict.target.skill:
        attrs["gen_ai.skill.name"] = verdict.target.skill
    if verdict.error_type:
        attrs["error.type"] = verdict.error_type
    return attrs


def _typed(attributes: Any) -> list[tuple[str, str, Any]]:
    """Attributes in order, each with its OTLP type: a ``dict`` or OTLP `KeyValue`s."""
    if isinstance(attributes, dict):
        kinds = {str: "string_value", bool: "bool_value", int: "int_value", float: "double_value"}
        return [(key, kinds[type(value)], value) for key, value in attributes.items()]
    out = []
    for kv in attributes:
        assert isinstance(kv, KeyValue)
        which = kv.value.WhichOneof("value")
        assert which is not None
        out.append((kv.key, which, getattr(kv.value, which)))
    return out


@dataclass
class Sent:
    """The export requests one path sent."""

    traces: list[ExportTraceServiceRequest]
    logs: list[ExportLogsServiceRequest]

    def spans(self) -> list[Span]:
        return [
            s
            for r in self.traces
            for rs in r.resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        ]

    def records(self) -> list[LogRecord]:
        return [
            lr
            for r in self.logs
            for rl in r.resource_logs
            for sl in rl.scope_logs
            for lr in sl.log_records
        ]


def _sdk_sent(results: list[SessionResult]) -> Sent:
    """What the SDK's OTLP exporters send for `OtelVerdictSink`'s spans and log records (their
    requests are made by the encoders used here)."""
    span_out, log_out = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider, logger_provider = (
        TracerProvider(resource=RESOURCE),
        LoggerProvider(resource=RESOURCE),
    )
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_out))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_out))
    sink = OtelVerdictSink(tracer_provider, logger_provider)
    for result in results:
        sink.emit(result)
    return Sent(
        [encode_spans(span_out.get_finished_spans())], [encode_logs(log_out.get_finished_logs())]
    )


def _serve_sent(results: list[SessionResult], protocol: str) -> Sent:
    """What `serve`'s verdict export sends a real OTLP receiver of ``protocol``."""
    receiver = GrpcOtlpReceiver() if protocol == "grpc" else HttpOtlpReceiver()
    export = build_verdict_export(
        ExportConfig(
            enabled=True,
            endpoint=f"http://127.0.0.1:{receiver.port}",
            protocol=protocol,
            insecure=True,
        ),
        RESOURCE,
    )
    try:
        sink = export.sink()
        for result in results:
            sink.emit(result)
        assert sink.flush(30.0)
    finally:
        export.shutdown()
        receiver.stop()
    return Sent(receiver.arrived.traces, receiver.arrived.logs)


@pytest.fixture(scope="module", params=PATHS)
def sent(request: pytest.FixtureRequest, results: list[SessionResult]) -> Sent:
    path: str = request.param
    return _sdk_sent(results) if path == "sdk" else _serve_sent(results, path.split(" ", 1)[1])


def test_each_session_emits_its_span_events_and_log_records_as_the_contract_says(
    results: list[SessionResult], sent: Sent
) -> None:
    for request in sent.traces:
        (resource_spans,) = request.resource_spans
        assert _typed(resource_spans.resource.attributes) == _typed(dict(RESOURCE.attributes))
        (scope_spans,) = resource_spans.scope_spans
        assert (scope_spans.scope.name, scope_spans.scope.version) == ("spanjudge", __version__)
    for request in sent.logs:
        (resource_logs,) = request.resource_logs
        assert _typed(resource_logs.resource.attributes) == _typed(dict(RESOURCE.attributes))
        (scope_logs,) = resource_logs.scope_logs
        assert (scope_logs.scope.name, scope_logs.scope.version) == ("spanjudge", __version__)
    spans, records = sent.spans(), sent.records()
    assert len(spans) == len(results)
    assert len(records) == sum(len(r.verdicts) for r in results)
    assert len({s.span_id for s in spans}) == len(spans)  # each its own span id
    checked_targets = 0
    for result, span in zip(results, spans, strict=True):
        trajectory = result.trajectory
        session, revision = trajectory.session_id, trajectory.revision
        assert span.name == "spanjudge.evaluate"
        assert span.kind == Span.SpanKind.SPAN_KIND_INTERNAL
        assert len(span.span_id) == 8 and any(span.span_id)
        expected_span_attrs: dict[str, Any] = {
            "session.id": session,
            "spanjudge.revision": revision,
            "spanjudge.session.complete": trajectory.complete,
        }
        if trajectory.agent_name:
            expected_span_attrs["gen_ai.agent.name"] = trajectory.agent_name
        assert _typed(span.attributes) == _typed(expected_span_attrs)
        # in the last turn's trace, under its root span, linked to the other turns
        turns = [(t.trace_id, t.span_id) for t in trajectory.turns]
        parent = (span.trace_id.hex(), span.parent_span_id.hex())
        if turns:
            assert parent == turns[-1]
        assert [(k.trace_id.hex(), k.span_id.hex()) for k in span.links] == turns[:-1]
        assert 0 < span.start_time_unix_nano <= span.end_time_unix_nano
        # one event per verdict, in order, and one log record per verdict, in order
        mine = records[: len(result.verdicts)]
        records = records[len(result.verdicts) :]
        steps = {s.span_id: s.trace_id for s in trajectory.steps}
        for verdict, event, record in zip(result.verdicts, span.events, mine, strict=True):
            attrs = _expected_attributes(verdict, session, revision)
            assert event.name == "gen_ai.evaluation.result"
            assert _typed(event.attributes) == _typed(attrs)
            assert event.time_unix_nano == span.end_time_unix_nano
            assert record.event_name == "gen_ai.evaluation.result"
            assert _typed(record.attributes) == _typed(
                {**attrs, "session.id": session, "spanjudge.revision": revision}
            )
            assert (
                record.time_unix_nano == record.observed_time_unix_nano == span.end_time_unix_nano
            )
            failed = verdict.outcome == "fail"
            assert record.severity_text == ("WARN" if failed else "INFO")
            assert record.severity_number == (
                13 if failed else 9
            )  # the Logs data model's WARN, INFO
            # the evaluated span: the verdict's target span, else its turn, else the last turn
            target = verdict.target
            if target.span_id and target.span_id in steps:
                about = (steps[target.span_id], target.span_id)
                checked_targets += 1
            elif target.turn is not None and 0 <= target.turn < len(turns):
                about = turns[target.turn]
            else:
                about = parent
            assert (record.trace_id.hex(), record.span_id.hex()) == about
            assert record.flags == 1  # sampled, as the evaluated span's context says
    assert checked_targets > 0  # some verdicts are about a span other than the last turn


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_serve_sends_the_otlp_the_sdk_path_sends(
    results: list[SessionResult], protocol: str
) -> None:
    sdk, serve = _sdk_sent(results), _serve_sent(results, protocol)
    (sdk_spans,) = sdk.traces[0].resource_spans
    assert sdk_spans.schema_url == RESOURCE.schema_url
    for request in serve.traces:
        (resource_spans,) = request.resource_spans
        assert resource_spans.resource == sdk_spans.resource
        assert resource_spans.schema_url == sdk_spans.schema_url
        (scope_spans,) = resource_spans.scope_spans
        assert scope_spans.scope == sdk_spans.scope_spans[0].scope
        assert scope_spans.schema_url == sdk_spans.scope_spans[0].schema_url
    (sdk_logs,) = sdk.logs[0].resource_logs
    for request in serve.logs:
        (resource_logs,) = request.resource_logs
        assert resource_logs.resource == sdk_logs.resource
        assert resource_logs.schema_url == sdk_logs.schema_url
        (scope_logs,) = resource_logs.scope_logs
        assert scope_logs.scope == sdk_logs.scope_logs[0].scope
        assert scope_logs.schema_url == sdk_logs.scope_logs[0].schema_url
    assert len(serve.logs) > 1  # more records than one request carries: batches in order
    for mine, reference in zip(serve.spans(), sdk.spans(), strict=True):
        assert timeless(mine) == timeless(reference), (mine, reference)
    for mine_record, reference_record in zip(serve.records(), sdk.records(), strict=True):
        assert timeless(mine_record) == timeless(reference_record), (
            mine_record,
            reference_record,
        )
