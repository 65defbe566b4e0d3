"""Verdicts encoded straight into OTLP protobuf, one session at a time: `spanjudge serve`'s path.

What `emit.otel.OtelVerdictSink` emits through the SDK (ARCHITECTURE.md section 8), without SDK
spans, events or log records: each evaluated session becomes one `Span` message with one event
per verdict and one `LogRecord` message per verdict, and a batch of them becomes one
`ExportTraceServiceRequest` or `ExportLogsServiceRequest`. The placement, the attributes, the
timestamps and the severity come from `emit.otel`, so both paths make every decision in one
place; `tests/emit/test_otel_contract.py` checks that the two send the same OTLP.

Limits: the SDK's span event and link count limits (128 each, or the `OTEL_SPAN_EVENT_COUNT_LIMIT`
and `OTEL_SPAN_LINK_COUNT_LIMIT` it reads) keep the latest events and links, as the SDK does.
Attribute count and length limits are not applied: a verdict has at most a dozen attributes,
under the default count limit of 128, and no length limit is set by default. The sampler is not
consulted (`OTEL_TRACES_SAMPLER`): an evaluation span is always sent, since the spool keeps a
session until its verdicts are confirmed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import (
    ResourceSpans,
    ScopeSpans,
    Span,
    SpanFlags,
    Status,
)
from opentelemetry.sdk.trace import SpanLimits
from opentelemetry.util.types import AttributeValue

from spanjudge import semconv
from spanjudge._version import __version__
from spanjudge.emit.otel import (
    Placement,
    evaluation_span_attributes,
    evaluation_times,
    failed,
    session_record_attributes,
    span_ids,
    verdict_attributes,
    warn_event_limit,
)
from spanjudge.values import SessionResult

# The SDK's span flags for a parent or link context that is not remote (ours never are).
_LOCAL = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_SAMPLED = 1  # a log record's trace flags when it carries a span's ids
_WARN, _INFO = 13, 9  # SeverityNumber.WARN, SeverityNumber.INFO


def any_value(value: object) -> AnyValue:
    """An attribute value as OTLP's `AnyValue`, typed as the SDK's encoder types it."""
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, Mapping):
        return AnyValue(
            kvlist_value=KeyValueList(values=key_values({str(k): v for k, v in value.items()}))
        )
    if isinstance(value, Sequence):
        return AnyValue(array_value=ArrayValue(values=[any_value(v) for v in value]))
    if value is None:
        return AnyValue()
    raise TypeError(f"an attribute value of type {type(value).__name__}: {value!r}")


def key_values(attributes: Mapping[str, object]) -> list[KeyValue]:
    """Attributes as OTLP `KeyValue`s, in their order."""
    return [KeyValue(key=key, value=any_value(value)) for key, value in attributes.items()]


@dataclass(frozen=True, slots=True, kw_only=True)
class EncodedSession:
    """One evaluated session's OTLP: its evaluation span and a log record per verdict."""

    span: Span
    log_records: list[LogRecord]


class OtlpVerdictEncoder:
    """Encodes evaluated sessions as OTLP messages under one resource and the `spanjudge`
    instrumentation scope, and batches of them as export requests."""

    def __init__(
        self,
        resource: Mapping[str, AttributeValue],
        schema_url: str = "",
        limits: SpanLimits | None = None,
    ) -> None:
        self._resource = Resource(attributes=key_values(resource))
        self._schema_url = schema_url
        self._scope = InstrumentationScope(name=semconv.SJ_SCOPE_NAME, version=__version__)
        limits = limits or SpanLimits()
        self.max_events: int | None = limits.max_events
        self.max_links: int | None = limits.max_links
        self._warned_event_limit = False

    def encode(self, result: SessionResult) -> EncodedSession:
        """The session's evaluation span (a new random span id, in its last turn's trace) and
        its log records."""
        trajectory = result.trajectory
        placement = Placement(trajectory)
        start_ns, end_ns = evaluation_times(result)
        parent = span_ids(placement.parent) if placement.parent is not None else None
        if parent is None:  # a root span in a trace of its own, as the SDK starts one
            trace_id, parent_span_id = random.getrandbits(128) or 1, b""
        else:
            trace_id, parent_span_id = parent[0], parent[1].to_bytes(8, "big")
        links = [
            Span.Link(
                trace_id=ids[0].to_bytes(16, "big"),
                span_id=ids[1].to_bytes(8, "big"),
                flags=_LOCAL,
            )
            for ids in (span_ids(pair) for pair in placement.links)
            if ids is not None
        ]
        dropped_links = _over(len(links), self.max_links)
        events: list[Span.Event] = []
        records: list[LogRecord] = []
        # A log record's attributes are its event's, then these (`log_record_attributes`):
        # each built once, then copied into both messages.
        session_attributes = key_values(session_record_attributes(trajectory))
        # A session's verdicts are about a few spans (most about its last turn).
        evaluated_ids: dict[tuple[str, str] | None, tuple[bytes, bytes] | None] = {}
        for verdict in result.verdicts:
            attributes = key_values(
                verdict_attributes(verdict, trajectory.session_id, trajectory.revision)
            )
            events.append(
                Span.Event(
                    name=semconv.EV_EVALUATION_RESULT,
                    time_unix_nano=end_ns,
                    attributes=attributes,
                )
            )
            evaluated = placement.evaluated_span(verdict)
            if evaluated not in evaluated_ids:
                numbers = span_ids(evaluated) if evaluated is not None else None
                evaluated_ids[evaluated] = (
                    (numbers[0].to_bytes(16, "big"), numbers[1].to_bytes(8, "big"))
                    if numbers is not None
                    else None
                )
            ids = evaluated_ids[evaluated]
            warn = failed(verdict)
            records.append(
                LogRecord(
                    time_unix_nano=end_ns,
                    observed_time_unix_nano=end_ns,
                    trace_id=ids[0] if ids else b"",
                    span_id=ids[1] if ids else b"",
                    flags=_SAMPLED if ids else 0,
                    body=AnyValue(),
                    severity_number=_WARN if warn else _INFO,  # type: ignore[arg-type]
                    severity_text="WARN" if warn else "INFO",
                    attributes=attributes + session_attributes,
                    event_name=semconv.EV_EVALUATION_RESULT,
                )
            )
        dropped_events = _over(len(events), self.max_events)
        if dropped_events and not self._warned_event_limit:
            self._warned_event_limit = True
            warn_event_limit(len(events), len(events) - dropped_events)
        span = Span(
            trace_id=trace_id.to_bytes(16, "big"),
            span_id=(random.getrandbits(64) or 1).to_bytes(8, "big"),
            parent_span_id=parent_span_id,
            name=semconv.SPAN_EVALUATE,
            kind=Span.SpanKind.SPAN_KIND_INTERNAL,
            start_time_unix_nano=start_ns,
            end_time_unix_nano=end_ns,
            attributes=key_values(evaluation_span_attributes(trajectory)),
            events=events[dropped_events:],  # the SDK keeps the latest
            dropped_events_count=dropped_events,
            links=links[dropped_links:],
            dropped_links_count=dropped_links,
            status=Status(),
            flags=_LOCAL,
        )
        return EncodedSession(span=span, log_records=records)

    def trace_request(self, spans: Sequence[Span]) -> ExportTraceServiceRequest:
        """One export request carrying ``spans``."""
        return ExportTraceServiceRequest(
            resource_spans=[
                ResourceSpans(
                    resource=self._resource,
                    scope_spans=[ScopeSpans(scope=self._scope, spans=spans)],
                    schema_url=self._schema_url,
                )
            ]
        )

    def logs_request(self, records: Sequence[LogRecord]) -> ExportLogsServiceRequest:
        """One export request carrying ``records``."""
        return ExportLogsServiceRequest(
            resource_logs=[
                ResourceLogs(
                    resource=self._resource,
                    scope_logs=[ScopeLogs(scope=self._scope, log_records=records)],
                    schema_url=self._schema_url,
                )
            ]
        )


def _over(count: int, limit: int | None) -> int:
    """How many of ``count`` items a limit drops (None: no limit)."""
    return 0 if limit is None else max(0, count - limit)
