"""`serve` encodes its verdicts as protobuf bytes (`emit.wire`, `emit.otlp`) without building
messages; what it writes is what protobuf's own serializer writes for the same messages, byte for
byte: attribute values of each type, whole evaluation spans and log records. (That they carry
what the SDK path carries is `test_otel_contract.py`'s.)"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from google.protobuf.message import Message
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge.emit import otlp, wire
from spanjudge.emit.otel import OtelVerdictSink
from spanjudge.emit.otlp import OtlpVerdictEncoder
from spanjudge.values import SessionResult
from tests.support.fixture_reports import fixture_results
from tests.support.memory import bytes_kept
from tests.support.otlp_messages import timeless

ROOT = Path(__file__).resolve().parents[2]
SPAN_ATTRIBUTES = wire.tag(9, wire.LEN)  # Span.attributes is field 9 (trace.proto)

VALUES: list[tuple[str, object, AnyValue]] = [
    ("non-ascii", "naïve — 日本語 ✓ 🙂", AnyValue(string_value="naïve — 日本語 ✓ 🙂")),
    ("empty", "", AnyValue(string_value="")),
    ("", "an empty key", AnyValue(string_value="an empty key")),
    ("two-byte length", "x" * 300, AnyValue(string_value="x" * 300)),
    ("three-byte length", "y" * 20_000, AnyValue(string_value="y" * 20_000)),
    ("false", False, AnyValue(bool_value=False)),
    ("true", True, AnyValue(bool_value=True)),
    ("zero", 0, AnyValue(int_value=0)),
    ("int", 300, AnyValue(int_value=300)),
    ("negative", -1, AnyValue(int_value=-1)),
    ("int64 min", -(2**63), AnyValue(int_value=-(2**63))),
    ("int64 max", 2**63 - 1, AnyValue(int_value=2**63 - 1)),
    ("double zero", 0.0, AnyValue(double_value=0.0)),
    ("negative zero", -0.0, AnyValue(double_value=-0.0)),
    ("double", 0.125, AnyValue(double_value=0.125)),
    ("infinity", float("inf"), AnyValue(double_value=float("inf"))),
    ("bytes", b"\x00\xff", AnyValue(bytes_value=b"\x00\xff")),
    ("empty bytes", b"", AnyValue(bytes_value=b"")),
    (
        "array",
        ("a", 1, True),
        AnyValue(
            array_value=ArrayValue(
                values=[
                    AnyValue(string_value="a"),
                    AnyValue(int_value=1),
                    AnyValue(bool_value=True),
                ]
            )
        ),
    ),
    (
        "map",
        {"k": 2.5},
        AnyValue(
            kvlist_value=KeyValueList(values=[KeyValue(key="k", value=AnyValue(double_value=2.5))])
        ),
    ),
    ("none", None, AnyValue()),
]


@pytest.mark.parametrize(
    ("key", "value", "expected"), VALUES, ids=[v[0] or "no key" for v in VALUES]
)
def test_an_attribute_is_written_as_protobuf_writes_it(
    key: str, value: object, expected: AnyValue
) -> None:
    mine = otlp.attributes(SPAN_ATTRIBUTES, otlp.encoded_attributes({key: value}))
    assert mine == Span(attributes=[KeyValue(key=key, value=expected)]).SerializeToString()


def test_all_attributes_in_their_order() -> None:
    mine = otlp.attributes(
        SPAN_ATTRIBUTES, otlp.encoded_attributes({key: value for key, value, _ in VALUES})
    )
    expected = Span(attributes=[KeyValue(key=key, value=any) for key, _, any in VALUES])
    assert mine == expected.SerializeToString()


def test_equal_values_of_other_types_stay_apart() -> None:
    """`True == 1 == 1.0` and `0.0 == -0.0` in Python; each is written as itself, whichever
    came first, for a score, for a label (a plugin may return any attribute value) and for
    an evaluation span's revision (whose encodings are kept for booleans and integers too)."""
    for key in (
        "gen_ai.evaluation.score.value",
        "gen_ai.evaluation.score.label",
        "spanjudge.revision",
    ):
        for value, expected in [
            (1.0, AnyValue(double_value=1.0)),
            (1, AnyValue(int_value=1)),
            (True, AnyValue(bool_value=True)),
            (1.0, AnyValue(double_value=1.0)),
            (0.0, AnyValue(double_value=0.0)),
            (-0.0, AnyValue(double_value=-0.0)),
            (0.0, AnyValue(double_value=0.0)),
            (
                ["pass", "fail"],
                AnyValue(
                    array_value=ArrayValue(
                        values=[AnyValue(string_value="pass"), AnyValue(string_value="fail")]
                    )
                ),
            ),
        ]:
            mine = otlp.attributes(SPAN_ATTRIBUTES, otlp.encoded_attributes({key: value}))
            expected_span = Span(attributes=[KeyValue(key=key, value=expected)])
            assert mine == expected_span.SerializeToString(), (key, value)


def test_an_int_outside_int64_is_refused_as_protobuf_refuses_it() -> None:
    for value in (2**63, -(2**63) - 1):
        with pytest.raises(ValueError):
            AnyValue(int_value=value)
        with pytest.raises(ValueError):
            otlp.encoded_attributes({"n": value})


@pytest.fixture(scope="module")
def results() -> list[SessionResult]:
    found = fixture_results("claude_code", "strands", "genai_manual", "langgraph")
    assert len(found) > 20
    return found


def _odd(result: SessionResult) -> SessionResult:
    """The session with the values a proto3 encoder leaves out or writes specially: revision 0,
    incomplete, no agent name, non-ASCII ids, names and explanations, empty explanations, zero
    scores."""
    trajectory = dataclasses.replace(
        result.trajectory,
        session_id="sessión-日本-🙂",
        revision=0,
        complete=False,
        agent_name=None,
    )
    verdicts = tuple(
        dataclasses.replace(
            verdict,
            explanation="" if i % 2 else "é" * 200,
            score=0.0 if verdict.score is not None else None,
        )
        for i, verdict in enumerate(result.verdicts)
    )
    return dataclasses.replace(result, trajectory=trajectory, verdicts=verdicts)


def _canonical(message: type[Message], data: bytes) -> bytes:
    """``data`` read as a ``message`` and written again by protobuf."""
    parsed = message()
    parsed.ParseFromString(data)
    return parsed.SerializeToString()


def test_spans_and_log_records_are_written_as_protobuf_writes_them(
    results: list[SessionResult],
) -> None:
    encoder = OtlpVerdictEncoder({"service.name": "wire-test"})
    sessions = [*results, *(_odd(r) for r in results if r.verdicts)]
    for result in sessions:
        encoded = encoder.encode(result)
        span = Span.FromString(encoded.span)
        assert len(span.events) == len(result.verdicts)
        assert encoded.span == _canonical(Span, encoded.span)
        assert len(encoded.log_records) == len(result.verdicts)
        for record, verdict in zip(encoded.log_records, result.verdicts, strict=True):
            assert record == _canonical(LogRecord, record)
            explanation = {kv.key: kv.value for kv in LogRecord.FromString(record).attributes}[
                "gen_ai.evaluation.explanation"
            ]
            assert explanation == AnyValue(string_value=verdict.explanation)


def test_event_and_link_limits_keep_the_latest_as_the_sdk_does(
    results: list[SessionResult],
) -> None:
    """With event and link count limits below a session's verdicts and turns, the evaluation
    span is the one the SDK path sends under the same limits: the latest events and links, and
    the counts of those dropped."""
    limits = SpanLimits(max_events=2, max_links=1)
    many = [r for r in results if len(r.verdicts) > 2 and len(r.trajectory.turns) > 2]
    assert many
    span_out = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=Resource.create({}), span_limits=limits)
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_out))
    sink = OtelVerdictSink(tracer_provider, LoggerProvider(resource=Resource.create({})))
    encoder = OtlpVerdictEncoder({}, limits=limits)
    for result in many:
        sink.emit(result)
    sdk_spans = encode_spans(span_out.get_finished_spans()).resource_spans[0].scope_spans[0].spans
    for result, reference in zip(many, sdk_spans, strict=True):
        encoded = encoder.encode(result).span
        assert encoded == _canonical(Span, encoded)
        mine = Span.FromString(encoded)
        assert len(mine.events) == 2 and mine.dropped_events_count == len(result.verdicts) - 2
        assert len(mine.links) == 1 and mine.dropped_links_count > 0
        assert timeless(mine) == timeless(reference)


def test_long_values_are_not_kept_after_their_sessions() -> None:
    """Skill names come from traces and may be as long as an attribute value may be: encoding
    them must not keep them (a cache of encodings keeps only short values)."""
    encoded = otlp.encoded_attributes({"gen_ai.skill.name": "warm"})
    assert encoded

    def encode_all() -> None:
        for n in range(200):
            otlp.encoded_attributes({"gen_ai.skill.name": f"skill-{n:06d}" + "x" * 60_000})

    kept = bytes_kept(encode_all)
    assert kept < 200 * 60_000 // 4, f"{kept / 1e6:.1f} MB kept"
