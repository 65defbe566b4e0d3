"""OpenTelemetry SDK `ReadableSpan` to `SpanRecord`, and SDK log records to their carriers
(`spans.logs`); used by the in-process processor. The SDK passes strings on as the application
gave them: each lone surrogate becomes U+FFFD here (`spans.text`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind as OtelSpanKind
from opentelemetry.trace import StatusCode as OtelStatusCode

from spanjudge.spans.limits import DEFAULT_LIMITS, Limits, cap_value
from spanjudge.spans.logs import LogDecoding, carrier
from spanjudge.spans.record import AttrValue, SpanEvent, SpanLink, SpanRecord
from spanjudge.spans.text import valid_text

if TYPE_CHECKING:
    from spanjudge.spans.record import SpanKind, StatusCode

_KINDS: dict[OtelSpanKind, SpanKind] = {
    OtelSpanKind.INTERNAL: "internal",
    OtelSpanKind.SERVER: "server",
    OtelSpanKind.CLIENT: "client",
    OtelSpanKind.PRODUCER: "producer",
    OtelSpanKind.CONSUMER: "consumer",
}
_STATUS: dict[OtelStatusCode, StatusCode] = {
    OtelStatusCode.UNSET: "unset",
    OtelStatusCode.OK: "ok",
    OtelStatusCode.ERROR: "error",
}


def _norm(value: Any) -> AttrValue:
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Mapping):
        return {valid_text(str(k)): _norm(v) for k, v in value.items()}
    return tuple(_norm(v) for v in value)


def _optional(text: str | None) -> str | None:
    return valid_text(text) if text else None


def _attrs(raw: Mapping[str, Any] | None, limits: Limits) -> tuple[dict[str, AttrValue], int]:
    out: dict[str, AttrValue] = {}
    cuts = 0
    if not raw:
        return out, 0
    for key, value in raw.items():
        # the usual value, an ASCII string, has nothing to normalise
        capped, n = cap_value(
            value if type(value) is str and value.isascii() else _norm(value), limits
        )
        cuts += n
        out[key if key.isascii() else valid_text(key)] = capped
    return out, cuts


_RESOURCE_CACHE: dict[int, tuple[Any, dict[str, AttrValue]]] = {}


def _resource_attrs(span: Any, limits: Limits) -> dict[str, AttrValue]:
    # Resources are shared by every span (and log record) of a provider: convert each once.
    resource = span.resource
    cached = _RESOURCE_CACHE.get(id(resource))
    if cached is not None and cached[0] is resource:
        return cached[1]
    attrs, _ = _attrs(resource.attributes if resource else None, limits)
    if len(_RESOURCE_CACHE) > 64:
        _RESOURCE_CACHE.clear()
    _RESOURCE_CACHE[id(resource)] = (resource, attrs)
    return attrs


def span_from_sdk(span: ReadableSpan, limits: Limits = DEFAULT_LIMITS) -> SpanRecord:
    ctx = span.context
    if ctx is None:
        raise ValueError(f"span {span.name!r} has no context")
    parent = span.parent
    attributes, cuts = _attrs(span.attributes, limits)
    events = []
    for ev in span.events[: limits.max_events_per_span]:
        ev_attrs, n = _attrs(ev.attributes, limits)
        cuts += n
        events.append(
            SpanEvent(name=valid_text(ev.name), time_unix_nano=ev.timestamp, attributes=ev_attrs)
        )
    scope = span.instrumentation_scope
    start = span.start_time or 0
    return SpanRecord(
        trace_id=format(ctx.trace_id, "032x"),
        span_id=format(ctx.span_id, "016x"),
        parent_span_id=format(parent.span_id, "016x") if parent is not None else None,
        name=valid_text(span.name),
        kind=_KINDS.get(span.kind, "internal"),
        start_unix_nano=start,
        end_unix_nano=max(start, span.end_time or start),
        status=_STATUS.get(span.status.status_code, "unset"),
        status_message=_optional(span.status.description),
        attributes=attributes,
        events=tuple(events),
        links=tuple(
            SpanLink(
                trace_id=format(link.context.trace_id, "032x"),
                span_id=format(link.context.span_id, "016x"),
            )
            for link in span.links
        ),
        resource=_resource_attrs(span, limits),
        scope_name=_optional(scope.name) if scope else None,
        scope_version=_optional(scope.version) if scope else None,
        truncated=cuts,
    )


def carriers_from_sdk(records: Iterable[Any], limits: Limits = DEFAULT_LIMITS) -> LogDecoding:
    """The carriers (`spans.logs`) of SDK log records: what a `LogRecordProcessor` is given
    (`ReadWriteLogRecord`, or `ReadableLogRecord`)."""
    decoding = LogDecoding()
    for item in records:
        record = item.log_record
        attributes, cuts = _attrs(record.attributes, limits)
        body: AttrValue = None
        if record.body is not None:
            body, n = cap_value(_norm(record.body), limits)
            cuts += n
        trace_id, span_id = record.trace_id or 0, record.span_id or 0
        joinable = bool(trace_id and span_id)
        scope = item.instrumentation_scope
        carrier(
            trace_id=format(trace_id, "032x") if joinable else None,
            span_id=format(span_id, "016x") if joinable else None,
            time_unix_nano=record.timestamp or record.observed_timestamp or 0,
            event_name=_optional(record.event_name),
            attributes=attributes,
            body=body,
            resource=_resource_attrs(item, limits),
            scope_name=_optional(scope.name) if scope is not None else None,
            scope_version=_optional(scope.version) if scope is not None else None,
            truncated=cuts,
            decoding=decoding,
        )
    return decoding
