"""OTLP protobuf (`ExportTraceServiceRequest`) to `SpanRecord`, without SDK span objects.

`read_heads` reads only what routing needs of each span (`SpanHead`: ids, times, name, the
session-key attributes, resource and scope) and keeps the span's bytes as sent; `wire_request`
puts such spans back into a request, which `decode_request` decodes as it would the original:
`serve.workers` > 1 routes protobuf requests to its evaluation processes that way.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from sys import getsizeof
from typing import TYPE_CHECKING, Any

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
from spanjudge.spans.sizes import (
    ENTRY_BASE,
    ENTRY_SIZE,
    EVENT_BASE,
    LINK_SIZE,
    SPAN_BASE,
    STR_HEADER,
    attributes_size,
    content_size,
)
from spanjudge.spans.wire_text import parse_message, varint

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status


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
    """The attributes and the count of values cut."""
    out, cuts, _ = _sized_attrs(kvs, limits)
    return out, cuts


def _sized_attrs(kvs: Sequence[KeyValue], limits: Limits) -> tuple[dict[str, AttrValue], int, int]:
    """The attributes, the values cut, and (when there are any) their `attributes_size`: worked
    out from the values as they are read, so that the store need not walk them again."""
    out: dict[str, AttrValue] = {}
    if not kvs:
        return out, 0, 0
    stored = len(kvs)
    if stored > limits.max_attrs_per_span:  # the count cap cuts some: read by `_capped_attrs`
        return _capped_attrs(kvs, limits)
    cuts = 0
    cap = limits.max_attr_chars
    chars = 0  # what `attributes_size` adds for the values beyond their entries
    for kv in kvs:
        value = kv.value
        # Hot path: most attribute values are non-empty strings (a non-empty `string_value` is
        # the oneof's member); skip the generic conversion for them.
        text = value.string_value
        n = len(text)
        if text and n <= cap:
            out[kv.key] = text
            chars += n if text.isascii() else getsizeof(text) - STR_HEADER
            continue
        converted, cut = _converted(value, text, limits)
        cuts += cut
        out[kv.key] = converted
        chars += content_size(converted)
    if len(out) != stored:  # a repeated key: the last value counts, as in the dict
        return out, cuts, attributes_size(out)
    return out, cuts, ENTRY_BASE + stored * ENTRY_SIZE + chars


def _converted(value: AnyValue, text: str, limits: Limits) -> tuple[AttrValue, int]:
    """An attribute value that is not a short non-empty string (``text``: its `string_value`),
    converted and capped, and the count of values cut."""
    which = "string_value" if text else value.WhichOneof("value")
    if which == "string_value":
        if len(text) > limits.max_attr_chars:
            return cap_value(text, limits)
        return text, 0
    if which in _PLAIN:  # an int, float or bool is never cut
        return getattr(value, which), 0
    return cap_value(any_value(value), limits)


def _capped_attrs(kvs: Sequence[KeyValue], limits: Limits) -> tuple[dict[str, AttrValue], int, int]:
    """`_sized_attrs` of more attributes than the count cap keeps: those past it are cut."""
    out: dict[str, AttrValue] = {}
    max_attrs = limits.max_attrs_per_span
    cuts = 0
    for kv in kvs:
        if len(out) >= max_attrs:
            cuts += 1
            continue
        value = kv.value
        converted, cut = _converted(value, value.string_value, limits)
        cuts += cut
        out[kv.key] = converted
    return out, cuts, attributes_size(out) if out else 0


_PLAIN = frozenset(("int_value", "double_value", "bool_value"))
_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_N_KINDS = len(SPAN_KINDS)
_N_STATUS = len(STATUS_CODES)


def _checked(
    span: Span,
) -> tuple[str, str, str | None, int, int, int, int, Status, Sequence[Span.Link]]:
    """The span's trace id, span id, parent, start and end times, kind, status code, status and
    links, every field the decoders keep checked; raises `IdError`/`ValueError` naming the
    field. What was read is handed on because each read of a field builds its value again
    (of a sub-message, even an empty one, a new Python object)."""
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
    links = span.links
    if links:
        for link in links:
            id_from_bytes(link.trace_id, 16, "links.traceId")
            id_from_bytes(link.span_id, 8, "links.spanId")
    return trace_id, span_id, parent, start, end, kind, code, status, links


def span_from_proto(
    span: Span,
    resource: dict[str, AttrValue],
    scope_name: str | None,
    scope_version: str | None,
    limits: Limits = DEFAULT_LIMITS,
    sizes: list[int] | None = None,
) -> SpanRecord:
    """Decode one span; raises `IdError`/`ValueError` with the field name on bad input. With
    ``sizes``, the span's `estimate_size` is appended to it."""
    trace_id, span_id, parent, start, end, kind, code, status, span_links = _checked(span)
    attributes, cuts, size = _sized_attrs(span.attributes, limits)
    name = span.name  # each read of a field builds its value again
    size += SPAN_BASE + len(name)
    events: tuple[SpanEvent, ...] = ()
    span_events = span.events
    if span_events:
        decoded = []
        for ev in span_events[: limits.max_events_per_span]:
            ev_name = ev.name
            ev_attributes, n, ev_size = _sized_attrs(ev.attributes, limits)
            event = SpanEvent(
                name=ev_name, time_unix_nano=ev.time_unix_nano, attributes=ev_attributes
            )
            cuts += n
            size += EVENT_BASE + len(ev_name) + ev_size
            decoded.append(event)
        events = tuple(decoded)
        cuts += max(0, len(span_events) - limits.max_events_per_span)
    links: tuple[SpanLink, ...] = ()
    if span_links:  # checked above
        links = tuple(
            SpanLink(trace_id=link.trace_id.hex(), span_id=link.span_id.hex())
            for link in span_links
        )
        size += len(links) * LINK_SIZE
    record = SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_unix_nano=start,
        end_unix_nano=end,
        kind=SPAN_KINDS[kind],
        status=STATUS_CODES[code],
        status_message=status.message or None,
        attributes=attributes,
        events=events,
        links=links,
        resource=resource,
        scope_name=scope_name or None,
        scope_version=scope_version or None,
        truncated=cuts,
    )
    if sizes is not None:
        sizes.append(size)
    return record


def decode_request(
    request: ExportTraceServiceRequest,
    limits: Limits = DEFAULT_LIMITS,
    sizes: list[int] | None = None,
) -> tuple[list[SpanRecord], list[SpanProblem]]:
    """Decode every span of a request; bad spans are reported with their path, not dropped.
    With ``sizes``, each record's `estimate_size` is appended to it, in order (for the store)."""
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
                        span_from_proto(span, resource, scope_name, scope_version, limits, sizes)
                    )
                except (IdError, ValueError) as exc:
                    path = f"resourceSpans[{ri}].scopeSpans[{si}].spans[{pi}]"
                    problems.append(SpanProblem(path, str(exc)))
    return records, problems


def parse_request(data: bytes) -> ExportTraceServiceRequest:
    """Parse serialized protobuf; raises `ValueError` with a readable message."""
    # The protobuf classes load on first use: `spanjudge eval` of JSON never needs them.
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    try:
        parse_message(request, data)  # a string that is not UTF-8 is read with U+FFFD
    except Exception as exc:  # protobuf raises DecodeError, a private-ish subclass
        raise ValueError(f"not a valid OTLP ExportTraceServiceRequest protobuf: {exc}") from None
    return request


# One span in wire form: its request's `ResourceSpans` without the scopes, its `ScopeSpans`
# without the spans, and the `Span`, each serialized (the first two shared by their spans).
WireSpan = tuple[bytes, bytes, bytes]


@dataclass(slots=True)
class SpanHead:
    """What routing reads of one protobuf span, the rest left serialized in ``wire``: its ids,
    name and times (what the intake checks), its session-key attributes only, its resource's
    attributes and its scope's name, each as `span_from_proto` would decode them. Read only;
    not frozen because one is built per span on the serve process's own core, where a frozen
    dataclass's `__init__` (a `object.__setattr__` per field) would cost several times more;
    built with positional arguments, in field order, which cost less than keywords there."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_unix_nano: int
    end_unix_nano: int
    attributes: dict[str, AttrValue]
    resource: dict[str, AttrValue]
    scope_name: str | None
    wire: WireSpan


_VIEWS_LOCK = threading.Lock()


def _routing_views() -> tuple[Any, Any]:
    """`_built_views`, built once: receivers' threads decode at once, and a request parsed as
    one build's type must be read as that type."""
    with _VIEWS_LOCK:
        return _built_views()


@functools.cache
def _built_views() -> tuple[Any, Any]:
    """Two message types that read an `ExportTraceServiceRequest`'s bytes as `read_heads`
    wants them, built once with the protobuf library's descriptor API, in a pool of their own.
    ``Keyed``: OTLP's own schema but for `Span.attributes`, a map of key to `AnyValue` (a
    `KeyValue` is a map entry on the wire, parsed as the `KeyValue` would be: so the bytes it
    accepts are OTLP's), so that a key's value is looked up in the runtime without a Python
    object per attribute. ``Raw``: each span its bytes as sent, so that none is serialized
    again."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.resource.v1 import resource_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2

    field = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    for module in (common_pb2, resource_pb2, trace_pb2, trace_service_pb2):
        file = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(file)
        if module is trace_pb2:
            span = next(message for message in file.message_type if message.name == "Span")
            entry = span.nested_type.add(name="AttributesEntry")
            entry.options.map_entry = True
            entry.field.add(
                name="key", number=1, label=field.LABEL_OPTIONAL, type=field.TYPE_STRING
            )
            value = entry.field.add(name="value", number=2, label=field.LABEL_OPTIONAL)
            value.type = field.TYPE_MESSAGE
            value.type_name = ".opentelemetry.proto.common.v1.AnyValue"
            attributes = next(f for f in span.field if f.name == "attributes")
            attributes.type_name = ".opentelemetry.proto.trace.v1.Span.AttributesEntry"
        pool.Add(file)
    raw = descriptor_pb2.FileDescriptorProto(name="spanjudge/raw.proto", package="spanjudge")
    for name, number, of in (
        ("Raw", 1, "RawResourceSpans"),  # resource_spans
        ("RawResourceSpans", 2, "RawScopeSpans"),  # scope_spans
        ("RawScopeSpans", 2, ""),  # spans, as bytes
    ):
        items = raw.message_type.add(name=name).field.add(name="items", number=number)
        items.label = field.LABEL_REPEATED
        items.type = field.TYPE_MESSAGE if of else field.TYPE_BYTES
        if of:
            items.type_name = f".spanjudge.{of}"
    pool.Add(raw)
    return (
        message_factory.GetMessageClass(
            pool.FindMessageTypeByName(
                "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"
            )
        ),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("spanjudge.Raw")),
    )


def parse_keyed(data: bytes) -> Any:
    """`parse_request` as the type `read_heads` reads fastest, `_routing_views`' ``Keyed``.
    A body it refuses (strings to make UTF-8, or not a request at all) is parsed by
    `parse_request`, so that the repair and the error are that one's, made once."""
    request = _routing_views()[0]()
    try:
        request.ParseFromString(data)
    except Exception:  # protobuf raises DecodeError, a private-ish subclass
        return parse_request(data)
    return request


def read_heads(
    request: Any,
    data: bytes,
    limits: Limits,
    key_attributes: Collection[str],
    key_suffixes: tuple[str, ...] = (),
    decides: Callable[[Any], bool] = bool,
) -> tuple[list[SpanHead], list[SpanProblem]]:
    """Each span's `SpanHead` (the attributes to decode: ``key_attributes``, and those whose
    names end with one of ``key_suffixes``, which are not looked for where one of the former
    holds a value that ``decides`` the span's key); a span that `decode_request` would reject
    is reported with the same path and message instead. ``request``: `parse_keyed` of
    ``data``."""
    from google.protobuf.unknown_fields import UnknownFieldSet
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    keyed_type, raw_type = _routing_views()
    keyed = type(request) is keyed_type
    raw = None  # each span's bytes, or (not read) serialized again
    # a message that reads less than OTLP's reads what that does: `suppress` is for safety only
    with contextlib.suppress(Exception):  # protobuf raises DecodeError, a private-ish subclass
        raw = raw_type.FromString(data).items if keyed else None
    keys = tuple(key_attributes)
    heads: list[SpanHead] = []
    problems: list[SpanProblem] = []
    max_attrs = limits.max_attrs_per_span
    cap = limits.max_attr_chars
    for ri, rs in enumerate(request.resource_spans):
        resource, _ = _attrs(rs.resource.attributes, limits)
        resource_wire = type(rs)(resource=rs.resource, schema_url=rs.schema_url).SerializeToString()
        for si, ss in enumerate(rs.scope_spans):
            scope_name = ss.scope.name or None
            scope_wire = type(ss)(scope=ss.scope, schema_url=ss.schema_url).SerializeToString()
            spans = ss.spans
            if raw is None:
                wires = [span.SerializeToString() for span in spans]
            else:
                wires = raw[ri].items[si].items
            for pi, (span, wire) in enumerate(zip(spans, wires, strict=True)):
                try:
                    trace_id, span_id, parent, start, end, *_ = _checked(span)
                except (IdError, ValueError) as exc:
                    path = f"resourceSpans[{ri}].scopeSpans[{si}].spans[{pi}]"
                    problems.append(SpanProblem(path, str(exc)))
                    continue
                if (
                    keyed
                    # none left out of the map: the runtime keeps a `KeyValue` with fields of
                    # its own there, among the span's unknown fields
                    and not UnknownFieldSet(span)
                    # fewer keys than the count cap: it cuts none, the last value counts
                    and len(found := span.attributes) < max_attrs
                ):
                    attributes = {}
                    for key in keys:
                        value = found.get(key)
                        if value is not None:
                            attributes[key] = _key_value(value, cap, limits)
                    # a suffix check on each name, none decoded for it; not needed where a
                    # named key decides (it comes before any suffix: `sessions.keys`)
                    if key_suffixes and not any(map(decides, attributes.values())):
                        for key in [k for k in found if k.endswith(key_suffixes)]:
                            attributes[key] = _key_value(found[key], cap, limits)
                else:  # read as `decode_request` reads them
                    whole = Span.FromString(wire) if keyed else span
                    kvs = whole.attributes
                    if len(kvs) > max_attrs:  # which ones the count cap keeps: decode them all
                        every, _ = _attrs(kvs, limits)
                        attributes = {
                            k: v
                            for k, v in every.items()
                            if k in key_attributes or k.endswith(key_suffixes)
                        }
                    else:
                        picked = [
                            kv
                            for kv in kvs
                            if kv.key in key_attributes or kv.key.endswith(key_suffixes)
                        ]
                        attributes, _ = _attrs(picked, limits)
                head = SpanHead(
                    trace_id,
                    span_id,
                    parent,
                    span.name,
                    start,
                    end,
                    attributes,
                    resource,
                    scope_name,
                    (resource_wire, scope_wire, wire),
                )
                heads.append(head)
    return heads, problems


def _key_value(value: Any, cap: int, limits: Limits) -> AttrValue:
    """A key attribute's `AnyValue` as `_sized_attrs` reads it."""
    text = value.string_value
    if text and len(text) <= cap:
        return text  # type: ignore[no-any-return]
    return _converted(value, text, limits)[0]


def _key(number: int, size: int) -> bytes:
    """The start of a length-delimited protobuf field of ``size`` bytes: its key, its length
    as a varint."""
    return bytes((number << 3 | 2,)) + varint(size)


def wire_request(runs: Iterable[tuple[bytes, bytes, Sequence[bytes]]]) -> bytes:
    """A serialized `ExportTraceServiceRequest` of runs of spans that share a resource and a
    scope, each (resource, scope, spans) as a `WireSpan` holds them, in order. Each field's
    length is added up before it is written, so the spans are copied once, into the result."""
    parts: list[bytes] = []
    for resource, scope, spans in runs:
        inner: list[bytes] = []
        size = len(scope)
        for span in spans:
            key = _key(2, len(span))
            inner.append(key)
            inner.append(span)
            size += len(key) + len(span)
        scope_key = _key(2, size)
        parts.append(_key(1, len(resource) + len(scope_key) + size))
        parts.append(resource)
        parts.append(scope_key)
        parts.append(scope)
        parts.extend(inner)
    return b"".join(parts)
