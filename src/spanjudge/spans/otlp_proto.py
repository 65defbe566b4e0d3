"""OTLP protobuf (`ExportTraceServiceRequest`) to `SpanRecord`, without SDK span objects."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spanjudge.spans.ids import IdError, id_from_bytes, optional_parent
from spanjudge.spans.limits import DEFAULT_LIMITS, Limits, cap_value
from spanjudge.spans.record import (
    SPAN_KINDS,
    STATUS_CODES,
    AttrValue,
    SpanEvent,
    SpanLink,
    SpanRecord,
)

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span


@dataclass(frozen=True, slots=True)
class SpanProblem:
    """One span of a request that could not be decoded, with the field path and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def any_value(value: AnyValue) -> AttrValue:
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "int_value":
        return value.int_value
    if which == "double_value":
        return value.double_value
    if which == "bool_value":
        return value.bool_value
    if which == "array_value":
        return tuple(any_value(v) for v in value.array_value.values)
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return None


def _attrs(kvs: Iterable[KeyValue], limits: Limits) -> tuple[dict[str, AttrValue], int]:
    out: dict[str, AttrValue] = {}
    cuts = 0
    cap = limits.max_attr_chars
    max_attrs = limits.max_attrs_per_span
    for kv in kvs:
        if len(out) >= max_attrs:
            cuts += 1
            continue
        value = kv.value
        # Hot path: most attribute values are strings; skip the generic conversion for them.
        if value.WhichOneof("value") == "string_value":
            text = value.string_value
            if len(text) > cap:
                capped, n = cap_value(text, limits)
                cuts += n
                out[kv.key] = capped
            else:
                out[kv.key] = text
            continue
        converted, n = cap_value(any_value(value), limits)
        cuts += n
        out[kv.key] = converted
    return out, cuts


def span_from_proto(
    span: Span,
    resource: dict[str, AttrValue],
    scope_name: str | None,
    scope_version: str | None,
    limits: Limits = DEFAULT_LIMITS,
) -> SpanRecord:
    """Decode one span; raises `IdError`/`ValueError` with the field name on bad input."""
    trace_id = id_from_bytes(span.trace_id, 16, "traceId")
    span_id = id_from_bytes(span.span_id, 8, "spanId")
    parent = optional_parent(span.parent_span_id)
    if parent == span_id:
        raise ValueError("parentSpanId: a span cannot be its own parent")
    if span.end_time_unix_nano < span.start_time_unix_nano:
        raise ValueError(
            f"endTimeUnixNano: {span.end_time_unix_nano} is before startTimeUnixNano "
            f"{span.start_time_unix_nano}"
        )
    if not 0 <= span.kind < len(SPAN_KINDS):
        raise ValueError(f"kind: unknown span kind {span.kind}")
    if not 0 <= span.status.code < len(STATUS_CODES):
        raise ValueError(f"status.code: unknown status code {span.status.code}")
    attributes, cuts = _attrs(span.attributes, limits)
    events = []
    for ev in span.events[: limits.max_events_per_span]:
        ev_attrs, n = _attrs(ev.attributes, limits)
        cuts += n
        events.append(
            SpanEvent(name=ev.name, time_unix_nano=ev.time_unix_nano, attributes=ev_attrs)
        )
    cuts += max(0, len(span.events) - limits.max_events_per_span)
    links = tuple(
        SpanLink(
            trace_id=id_from_bytes(link.trace_id, 16, "links.traceId"),
            span_id=id_from_bytes(link.span_id, 8, "links.spanId"),
        )
        for link in span.links
    )
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=span.name,
        kind=SPAN_KINDS[span.kind],
        start_unix_nano=span.start_time_unix_nano,
        end_unix_nano=span.end_time_unix_nano,
        status=STATUS_CODES[span.status.code],
        status_message=span.status.message or None,
        attributes=attributes,
        events=tuple(events),
        links=links,
        resource=resource,
        scope_name=scope_name or None,
        scope_version=scope_version or None,
        truncated=cuts,
    )


def decode_request(
    request: ExportTraceServiceRequest, limits: Limits = DEFAULT_LIMITS
) -> tuple[list[SpanRecord], list[SpanProblem]]:
    """Decode every span of a request; bad spans are reported with their path, not dropped."""
    records: list[SpanRecord] = []
    problems: list[SpanProblem] = []
    for ri, rs in enumerate(request.resource_spans):
        resource, _ = _attrs(rs.resource.attributes, limits)
        for si, ss in enumerate(rs.scope_spans):
            scope_name = ss.scope.name
            scope_version = ss.scope.version
            for pi, span in enumerate(ss.spans):
                try:
                    records.append(
                        span_from_proto(span, resource, scope_name, scope_version, limits)
                    )
                except (IdError, ValueError) as exc:
                    path = f"resourceSpans[{ri}].scopeSpans[{si}].spans[{pi}]"
                    problems.append(SpanProblem(path, str(exc)))
    return records, problems


def parse_request(data: bytes) -> ExportTraceServiceRequest:
    # The protobuf classes load on first use: `spanjudge eval` of JSON never needs them.
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    """Parse serialized protobuf; raises `ValueError` with a readable message."""
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError, a private-ish subclass
        raise ValueError(f"not a valid OTLP ExportTraceServiceRequest protobuf: {exc}") from None
    return request
