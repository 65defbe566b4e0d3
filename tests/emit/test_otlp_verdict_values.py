"""`serve`'s encoder remembers the encodings of the verdict attributes that repeat (names,
labels, explanations, outcomes, judges, reasons, skills, error types). A verdict from a plugin
may carry values of any attribute type, and texts of any length: each is still written as the
SDK path writes it, whatever was encoded before it, and long texts are not kept."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge.emit.otel import OtelVerdictSink
from spanjudge.emit.otlp import OtlpVerdictEncoder
from spanjudge.values import SessionResult, Target
from tests.support.fixture_reports import fixture_results
from tests.support.memory import bytes_kept
from tests.support.otlp_messages import timeless

RESOURCE = Resource.create({"service.name": "values-test"})

# (label, explanation, reason, skill, error type): values of other types where a plugin may
# put them, equal values of different types one after the other, long and non-ASCII texts
ODD_VALUES: list[tuple[Any, Any, Any, Any, Any]] = [
    ("pass", "fine", None, None, None),
    (1, "fine", None, None, None),
    (True, "fine", None, None, None),
    (1.0, "fine", None, None, None),
    (0.0, "fine", None, None, None),
    (-0.0, "fine", None, None, None),
    (("pass", "fail"), "fine", None, None, None),
    ("pass", "é" * 300, "no_expectation", None, None),
    ("pass", "ü" * 256, None, "skill-" + "s" * 300, None),
    ("pass", "fine", "no_expectation", "s" * 256, "ValueError"),
    ("pass", "", "", "", ""),
    ("pass", "fine", 7, None, None),
    ("pass", "fine", None, None, None),
]


@pytest.fixture(scope="module")
def sessions() -> list[SessionResult]:
    found = [r for r in fixture_results("strands", "langgraph") if r.verdicts]
    assert len(found) > 5
    out = []
    for index, result in enumerate(found[:6]):
        verdicts = []
        for i, (label, explanation, reason, skill, error_type) in enumerate(ODD_VALUES):
            base = result.verdicts[(index + i) % len(result.verdicts)]
            verdicts.append(
                dataclasses.replace(
                    base,
                    outcome="pass",
                    score=None if i % 3 == 0 else (0.0 if i % 3 == 1 else 1.0),
                    label=label,
                    explanation=explanation,
                    reason=reason,
                    target=Target(skill=skill, span_id=base.target.span_id),
                    error_type=error_type,
                )
            )
        out.append(dataclasses.replace(result, verdicts=tuple(verdicts)))
    return out


def test_verdict_values_of_any_type_and_length_are_written_as_the_sdk_path_writes_them(
    sessions: list[SessionResult],
) -> None:
    span_out, log_out = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider(resource=RESOURCE)
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_out))
    logger_provider = LoggerProvider(resource=RESOURCE)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_out))
    sink = OtelVerdictSink(tracer_provider, logger_provider)
    for result in sessions:
        sink.emit(result)
    sdk_spans = encode_spans(span_out.get_finished_spans()).resource_spans[0].scope_spans[0].spans
    sdk_records = list(
        encode_logs(log_out.get_finished_logs()).resource_logs[0].scope_logs[0].log_records
    )
    encoder = OtlpVerdictEncoder(RESOURCE.attributes)
    for _ in range(2):  # the second time from the remembered encodings
        records = sdk_records
        for result, sdk_span in zip(sessions, sdk_spans, strict=True):
            encoded = encoder.encode(result)
            span = Span.FromString(encoded.span)
            assert len(span.events) == len(ODD_VALUES)
            assert timeless(span) == timeless(sdk_span)
            mine, records = records[: len(ODD_VALUES)], records[len(ODD_VALUES) :]
            for record, sdk_record in zip(encoded.log_records, mine, strict=True):
                assert timeless(LogRecord.FromString(record)) == timeless(sdk_record)


def _kept_after(
    encoder: OtlpVerdictEncoder, session: Callable[[int], SessionResult], count: int
) -> int:
    """Bytes still allocated after ``encoder`` wrote ``session(n)`` for ``count`` sessions
    (after one more before, so that what every encoder keeps is there before)."""
    encoder.encode(session(-1))

    def encode_all() -> None:
        for n in range(count):
            encoder.encode(session(n))

    return bytes_kept(encode_all)


def test_long_verdict_texts_are_not_kept_after_their_sessions(
    sessions: list[SessionResult],
) -> None:
    encoder = OtlpVerdictEncoder(RESOURCE.attributes)
    result = sessions[0]
    base = result.verdicts[0]

    def session(n: int) -> SessionResult:
        verdict = dataclasses.replace(
            base,
            explanation=f"explained {n:06d} " + "x" * 20_000,
            target=Target(skill=f"skill-{n:06d}" + "y" * 20_000),
            reason=f"reason-{n:06d}" + "z" * 20_000,
        )
        return dataclasses.replace(result, verdicts=(verdict,))

    kept = _kept_after(encoder, session, 200)
    assert kept < 200 * 60_000 // 4, f"{kept / 1e6:.1f} MB kept"


def test_remembered_encodings_are_bounded_in_number(sessions: list[SessionResult]) -> None:
    """Short texts are remembered, but not all of them: many distinct explanations (each
    verdict's own words) keep no more than a bounded number of encodings."""
    encoder = OtlpVerdictEncoder(RESOURCE.attributes)
    result = sessions[0]
    base = result.verdicts[0]

    def session(n: int) -> SessionResult:
        verdict = dataclasses.replace(base, explanation=f"explained {n:06d} " + "x" * 230)
        return dataclasses.replace(result, verdicts=(verdict,))

    kept = _kept_after(encoder, session, 6_000)
    assert kept < 3_000_000, f"{kept / 1e6:.1f} MB kept"
