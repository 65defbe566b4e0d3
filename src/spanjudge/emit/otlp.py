"""Verdicts encoded straight into OTLP protobuf, one session at a time: `spanjudge serve`'s path.

What `emit.otel.OtelVerdictSink` emits through the SDK (ARCHITECTURE.md section 8), without SDK
spans, events or log records: each evaluated session becomes one `Span` message with one event
per verdict, added to an `ExportTraceServiceRequest`, and one `LogRecord` message per verdict,
added to an `ExportLogsServiceRequest`. Messages are built where they will be sent: copying a
protobuf message into another costs about as much as building it. The placement, the attributes, the
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
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, SpanFlags, Status
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


class OtlpVerdictEncoder:
    """Encodes evaluated sessions as OTLP messages under one resource and the `spanjudge`
    instrumentation scope, straight into the export requests that will carry them: a request's
    messages are built in place, never copied from one message into another."""

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

    def trace_request(self) -> ExportTraceServiceRequest:
        """An empty export request for evaluation spans; `spans` gives where they go."""
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add(
            resource=self._resource, schema_url=self._schema_url
        )
        resource_spans.scope_spans.add(scope=self._scope)
        return request

    def logs_request(self) -> ExportLogsServiceRequest:
        """An empty export request for log records; `log_records` gives where they go."""
        request = ExportLogsServiceRequest()
        resource_logs = request.resource_logs.add(
            resource=self._resource, schema_url=self._schema_url
        )
        resource_logs.scope_logs.add(scope=self._scope)
        return request

    def encode(self, result: SessionResult, spans: Any, log_records: Any) -> None:
        """Add the session's evaluation span (a new random span id, in its last turn's trace) to
        ``spans`` and its log records to ``log_records``: the repeated fields of a request from
        `trace_request` and one from `logs_request` (`spans`, `log_records`)."""
        trajectory = result.trajectory
        placement = Placement(trajectory)
        start_ns, end_ns = evaluation_times(result)
        parent = span_ids(placement.parent) if placement.parent is not None else None
        if parent is None:  # a root span in a trace of its own, as the SDK starts one
            trace_id, parent_span_id = random.getrandbits(128) or 1, b""
        else:
            trace_id, parent_span_id = parent[0], parent[1].to_bytes(8, "big")
        links = [ids for ids in (span_ids(pair) for pair in placement.links) if ids is not None]
        dropped_links = _over(len(links), self.max_links)
        verdicts = result.verdicts
        dropped_events = _over(len(verdicts), self.max_events)
        if dropped_events and not self._warned_event_limit:
            self._warned_event_limit = True
            warn_event_limit(len(verdicts), len(verdicts) - dropped_events)
        span = spans.add(
            trace_id=trace_id.to_bytes(16, "big"),
            span_id=(random.getrandbits(64) or 1).to_bytes(8, "big"),
            parent_span_id=parent_span_id,
            name=semconv.SPAN_EVALUATE,
            kind=Span.SpanKind.SPAN_KIND_INTERNAL,
            start_time_unix_nano=start_ns,
            end_time_unix_nano=end_ns,
            attributes=key_values(evaluation_span_attributes(trajectory)),
            dropped_events_count=dropped_events,
            dropped_links_count=dropped_links,
            status=Status(),
            flags=_LOCAL,
        )
        # A log record's attributes are its event's, then these (`log_record_attributes`):
        # each built once, then copied into both messages.
        session_attributes = key_values(session_record_attributes(trajectory))
        # A session's verdicts are about a few spans (most about its last turn).
        evaluated_ids: dict[tuple[str, str] | None, tuple[bytes, bytes] | None] = {}
        for index, verdict in enumerate(verdicts):
            attributes = key_values(
                verdict_attributes(verdict, trajectory.session_id, trajectory.revision)
            )
            if index >= dropped_events:  # the SDK keeps the latest events
                span.events.add(
                    name=semconv.EV_EVALUATION_RESULT,
                    time_unix_nano=end_ns,
                    attributes=attributes,
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
            log_records.add(
                time_unix_nano=end_ns,
                observed_time_unix_nano=end_ns,
                trace_id=ids[0] if ids else b"",
                span_id=ids[1] if ids else b"",
                flags=_SAMPLED if ids else 0,
                body=AnyValue(),
                severity_number=_WARN if warn else _INFO,
                severity_text="WARN" if warn else "INFO",
                attributes=attributes + session_attributes,
                event_name=semconv.EV_EVALUATION_RESULT,
            )
        for link_trace_id, link_span_id in links[dropped_links:]:  # the latest, as the SDK
            span.links.add(
                trace_id=link_trace_id.to_bytes(16, "big"),
                span_id=link_span_id.to_bytes(8, "big"),
                flags=_LOCAL,
            )


def spans(request: ExportTraceServiceRequest) -> Any:
    """Where a `trace_request`'s spans go (its one resource's one scope's)."""
    return request.resource_spans[0].scope_spans[0].spans


def log_records(request: ExportLogsServiceRequest) -> Any:
    """Where a `logs_request`'s log records go (its one resource's one scope's)."""
    return request.resource_logs[0].scope_logs[0].log_records


def _over(count: int, limit: int | None) -> int:
    """How many of ``count`` items a limit drops (None: no limit)."""
    return 0 if limit is None else max(0, count - limit)
