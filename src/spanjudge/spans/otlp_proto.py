"""OTLP protobuf (`ExportTraceServiceRequest`) to `SpanRecord`, without SDK span objects."""

from __future__ import annotations

from collections.abc import Sequence
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
    SpanRecordDraft,
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


def _attrs(kvs: Sequence[KeyValue], limits: Limits) -> tuple[dict[str, AttrValue], int]:
    out: dict[str, AttrValue] = {}
    if not kvs:
        return out, 0
    cuts = 0
    cap = limits.max_attr_chars
    max_attrs = limits.max_attrs_per_span
    # Under the count cap (the usual case) no attribute can be cut for it: skip that check.
    check_count = len(kvs) > max_attrs
    for kv in kvs:
        if check_count and len(out) >= max_attrs:
            cuts += 1
            continue
        value = kv.value
        # Hot path: most attribute values are non-empty strings (a non-empty `string_value` is
        # the oneof's member); skip the generic conversion for them.
        text = value.string_value
        which = "string_value" if text else value.WhichOneof("value")
        if which == "string_value":
            if len(text) > cap:
                capped, n = cap_value(text, limits)
                cuts += n
                out[kv.key] = capped
            else:
                out[kv.key] = text
        elif which in _PLAIN:  # an int, float or bool is never cut
            out[kv.key] = getattr(value, which)
        else:
            converted, n = cap_value(any_value(value), limits)
            cuts += n
            out[kv.key] = converted
    return out, cuts


_PLAIN = frozenset(("int_value", "double_value", "bool_value"))
_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_N_KINDS = len(SPAN_KINDS)
_N_STATUS = len(STATUS_CODES)


_new = object.__new__


def span_from_proto(
    span: Span,
    resource: dict[str, AttrValue],
    scope_name: str | None,
    scope_version: str | None,
    limits: Limits = DEFAULT_LIMITS,
) -> SpanRecord:
    """Decode one span; raises `IdError`/`ValueError` with the field name on bad input."""
    raw = span.trace_id
    if len(raw) != 16 or raw == _ZERO_TRACE:
        id_from_bytes(raw, 16, "traceId")  # raises with the reason
    trace_id = raw.hex()
    raw = span.span_id
    if len(raw) != 8 or raw == _ZERO_SPAN:
        id_from_bytes(raw, 8, "spanId")
    span_id = raw.hex()
    raw = span.parent_span_id
    if not raw or raw == _ZERO_SPAN:
        parent = None
    else:
        parent = raw.hex() if len(raw) == 8 else optional_parent(raw)
        if parent == span_id:
            raise ValueError("parentSpanId: a span cannot be its own parent")
    start = span.start_time_unix_nano
    end = span.end_time_unix_nano
    if end < start:
        raise ValueError(f"endTimeUnixNano: {end} is before startTimeUnixNano {start}")
    kind = span.kind
    if not 0 <= kind < _N_KINDS:
        raise ValueError(f"kind: unknown span kind {kind}")
    status = span.status
    code = status.code
    if not 0 <= code < _N_STATUS:
        raise ValueError(f"status.code: unknown status code {code}")
    attributes, cuts = _attrs(span.attributes, limits)
    events: tuple[SpanEvent, ...] = ()
    span_events = span.events
    if span_events:
        decoded = []
        for ev in span_events[: limits.max_events_per_span]:
            ev_attrs, n = _attrs(ev.attributes, limits)
            cuts += n
            decoded.append(
                SpanEvent(name=ev.name, time_unix_nano=ev.time_unix_nano, attributes=ev_attrs)
            )
        events = tuple(decoded)
        cuts += max(0, len(span_events) - limits.max_events_per_span)
    span_links = span.links
    links: tuple[SpanLink, ...] = ()
    if span_links:
        links = tuple(
            SpanLink(
                trace_id=id_from_bytes(link.trace_id, 16, "links.traceId"),
                span_id=id_from_bytes(link.span_id, 8, "links.spanId"),
            )
            for link in span_links
        )
    record = _new(SpanRecordDraft)
    record.trace_id = trace_id
    record.span_id = span_id
    record.parent_span_id = parent
    record.name = span.name
    record.start_unix_nano = start
    record.end_unix_nano = end
    record.kind = SPAN_KINDS[kind]
    record.status = STATUS_CODES[code]
    record.status_message = status.message or None
    record.attributes = attributes
    record.events = events
    record.links = links
    record.resource = resource
    record.scope_name = scope_name or None
    record.scope_version = scope_version or None
    record.truncated = cuts
    record.__class__ = SpanRecord
    return record  # type: ignore[no-any-return]


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
