"""OTLP JSON to `SpanRecord`, and SDK spans to OTLP JSON lines (the Collector `file` format).

Two spellings exist in the wild and both are read:
- the Collector `file` exporter: hex ids, int64 as strings, enums as integers;
- protobuf's `MessageToJson`: base64 ids, enums as names.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from spanjudge.spans.ids import IdError, id_from_text, optional_parent_text
from spanjudge.spans.limits import DEFAULT_LIMITS, Limits, cap_value
from spanjudge.spans.otlp_proto import SpanProblem
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

    from spanjudge.spans.record import SpanKind, StatusCode

_KIND_NAMES = {f"SPAN_KIND_{k.upper()}": k for k in SPAN_KINDS}
_STATUS_NAMES = {f"STATUS_CODE_{s.upper()}": s for s in STATUS_CODES}


class FieldError(ValueError):
    """A bad field inside one span; ``field`` is its JSON path relative to the span."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _int(value: Any, field: str) -> int:
    kind = type(value)
    if kind is str:
        try:
            return int(value)
        except ValueError:
            pass
    elif kind is int:
        return int(value)
    raise FieldError(field, f"expected an integer (or a decimal string), got {value!r}")


def any_value_json(value: Any, field: str) -> AttrValue:
    if type(value) is not dict:
        if not isinstance(value, Mapping):
            raise FieldError(field, f"expected an AnyValue object, got {type(value).__name__}")
        value = dict(value)
    # Fast path: string values are by far the most common.
    text = value.get("stringValue")
    if text is not None:
        return text if type(text) is str else str(text)
    if "intValue" in value:
        return _int(value["intValue"], field + ".intValue")
    if "doubleValue" in value:
        raw = value["doubleValue"]
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str) and raw in ("NaN", "Infinity", "-Infinity"):
            return float(raw.replace("Infinity", "inf"))
        raise FieldError(field + ".doubleValue", f"expected a number, got {raw!r}")
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        items = (value["arrayValue"] or {}).get("values") or []
        return tuple(any_value_json(v, f"{field}.arrayValue[{i}]") for i, v in enumerate(items))
    if "kvlistValue" in value:
        items = (value["kvlistValue"] or {}).get("values") or []
        return {kv.get("key", ""): any_value_json(kv.get("value", {}), field) for kv in items}
    if "bytesValue" in value:
        try:
            return base64.b64decode(value["bytesValue"]).hex()
        except (ValueError, TypeError):
            raise FieldError(field + ".bytesValue", "expected base64") from None
    return None


def attrs_json(items: Any, field: str, limits: Limits) -> tuple[dict[str, AttrValue], int]:
    if not items:
        return {}, 0
    if type(items) is not list:
        raise FieldError(field, f"expected a list of key/value objects, got {type(items).__name__}")
    if len(items) > limits.max_attrs_per_span:
        return _attrs_general(items, field, limits)
    # One pass for the common case (string keys, string or scalar values); anything odd (a
    # malformed item, a value to cut) is decoded again by the general path, which says why.
    out: dict[str, AttrValue] = {}
    cuts = 0
    cap = limits.max_attr_chars
    for i, kv in enumerate(items):
        if type(kv) is not dict:
            return _attrs_general(items, field, limits)
        value = kv.get("value")
        key = kv.get("key")
        if type(value) is not dict or type(key) is not str:
            return _attrs_general(items, field, limits)
        text = value.get("stringValue")
        if type(text) is str:
            if len(text) > cap:
                return _attrs_general(items, field, limits)
            out[key] = text
            continue
        decoded = any_value_json(value, f"{field}[{i}].value")
        if type(decoded) is tuple:
            decoded, n = cap_value(decoded, limits)
            cuts += n
        elif type(decoded) is str and len(decoded) > cap:
            return _attrs_general(items, field, limits)
        out[key] = decoded
    return out, cuts


def _attrs_general(
    items: list[Any], field: str, limits: Limits
) -> tuple[dict[str, AttrValue], int]:
    out: dict[str, AttrValue] = {}
    cuts = 0
    cap = limits.max_attr_chars
    max_attrs = limits.max_attrs_per_span
    for i, kv in enumerate(items):
        if type(kv) is not dict or "key" not in kv:
            raise FieldError(f"{field}[{i}]", "expected an object with 'key' and 'value'")
        if len(out) >= max_attrs:
            cuts += 1
            continue
        raw = kv.get("value", {})
        text = raw.get("stringValue") if type(raw) is dict else None
        if type(text) is str:
            value: AttrValue = text
        else:
            value = any_value_json(raw, f"{field}[{i}].value")
        if type(value) is str:
            if len(value) > cap:
                value, n = cap_value(value, limits)
                cuts += n
        elif type(value) is tuple:
            value, n = cap_value(value, limits)
            cuts += n
        key = kv["key"]
        out[key if type(key) is str else str(key)] = value
    return out, cuts


def _enum(value: Any, names: Mapping[str, str], order: Sequence[str], field: str) -> Any:
    if value is None:
        return order[0]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(order):
        return order[value]
    if isinstance(value, str) and value in names:
        return names[value]
    allowed = ", ".join(list(names)[: len(order)])
    raise FieldError(
        field, f"unknown enum value {value!r} (expected 0..{len(order) - 1} or {allowed})"
    )


def span_from_json(
    span: Mapping[str, Any],
    resource: Mapping[str, AttrValue],
    scope_name: str | None,
    scope_version: str | None,
    limits: Limits = DEFAULT_LIMITS,
) -> SpanRecord:
    if not isinstance(span, Mapping):
        raise FieldError("", "expected a span object")
    for required in ("traceId", "spanId"):
        if not span.get(required):
            raise FieldError(required, "missing (every span needs a traceId and a spanId)")
    try:
        trace_id = id_from_text(str(span["traceId"]), 16, "traceId")
        span_id = id_from_text(str(span["spanId"]), 8, "spanId")
        parent = optional_parent_text(span.get("parentSpanId"))
    except IdError as exc:
        field = str(exc).split(" ", 1)[0]
        raise FieldError(field, str(exc).split(" ", 1)[1]) from None
    if parent == span_id:
        raise FieldError("parentSpanId", "a span cannot be its own parent")
    kind: SpanKind = _enum(span.get("kind"), _KIND_NAMES, SPAN_KINDS, "kind")
    status_obj = span.get("status") or {}
    status: StatusCode = _enum(status_obj.get("code"), _STATUS_NAMES, STATUS_CODES, "status.code")
    start = _int(span.get("startTimeUnixNano", 0), "startTimeUnixNano")
    end = _int(span.get("endTimeUnixNano", start), "endTimeUnixNano")
    if end < start:
        raise FieldError("endTimeUnixNano", f"{end} is before startTimeUnixNano {start}")
    attributes, cuts = attrs_json(span.get("attributes"), "attributes", limits)
    events = []
    raw_events = span.get("events") or []
    for i, ev in enumerate(raw_events[: limits.max_events_per_span]):
        try:
            ev_attrs, n = attrs_json(ev.get("attributes"), "attributes", limits)
            name = str(ev.get("name", ""))
            when = _int(ev.get("timeUnixNano", 0), "timeUnixNano")
        except FieldError as exc:  # the event's path only now: most spans have many events
            raise FieldError(f"events[{i}].{exc.field}", exc.message) from None
        cuts += n
        events.append(SpanEvent(name=name, time_unix_nano=when, attributes=ev_attrs))
    cuts += max(0, len(raw_events) - limits.max_events_per_span)
    links = []
    for i, link in enumerate(span.get("links") or []):
        try:
            links.append(
                SpanLink(
                    trace_id=id_from_text(str(link.get("traceId", "")), 16, "traceId"),
                    span_id=id_from_text(str(link.get("spanId", "")), 8, "spanId"),
                )
            )
        except IdError as exc:
            raise FieldError(f"links[{i}]", str(exc)) from None
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=str(span.get("name", "")),
        kind=kind,
        start_unix_nano=start,
        end_unix_nano=end,
        status=status,
        status_message=status_obj.get("message") or None,
        attributes=attributes,
        events=tuple(events),
        links=tuple(links),
        resource=resource,
        scope_name=scope_name,
        scope_version=scope_version,
        truncated=cuts,
    )


# Other OTLP signals, recognised so that a logs or metrics file gets a message that says so.
_OTHER_SIGNALS = {
    "resourceLogs": "logs",
    "resource_logs": "logs",
    "resourceMetrics": "metrics",
    "resource_metrics": "metrics",
    "resourceProfiles": "profiles",
}


def decode_json_document(
    doc: Any, limits: Limits = DEFAULT_LIMITS
) -> tuple[list[SpanRecord], list[SpanProblem]]:
    """Decode one OTLP JSON document (`{"resourceSpans": [...]}`)."""
    if not isinstance(doc, Mapping):
        return [], [SpanProblem("", "expected a JSON object with 'resourceSpans'")]
    resource_spans = doc.get("resourceSpans", doc.get("resource_spans"))
    if resource_spans is None:
        for key, signal in _OTHER_SIGNALS.items():
            if key in doc:
                return [], [
                    SpanProblem(
                        key,
                        f"this is OTLP {signal} ({key}); spanjudge reads traces (resourceSpans):"
                        " give it the file of a traces pipeline",
                    )
                ]
    if not isinstance(resource_spans, list):
        return [], [SpanProblem("resourceSpans", "missing or not a list")]
    records: list[SpanRecord] = []
    problems: list[SpanProblem] = []
    for ri, rs in enumerate(resource_spans):
        base = f"resourceSpans[{ri}]"
        if type(rs) is not dict:
            problems.append(
                SpanProblem(base, "expected an object with 'resource' and 'scopeSpans'")
            )
            continue
        try:
            resource, _ = attrs_json(
                (rs.get("resource") or {}).get("attributes"), "resource.attributes", limits
            )
        except (FieldError, AttributeError) as exc:
            problems.append(SpanProblem(base, str(exc)))
            continue
        scope_spans = rs.get("scopeSpans") or rs.get("scope_spans") or []
        if type(scope_spans) is not list:
            problems.append(SpanProblem(f"{base}.scopeSpans", "expected a list"))
            continue
        for si, ss in enumerate(scope_spans):
            if type(ss) is not dict or type(ss.get("spans") or []) is not list:
                problems.append(
                    SpanProblem(
                        f"{base}.scopeSpans[{si}]", "expected an object with a 'spans' list"
                    )
                )
                continue
            scope = ss.get("scope") or {}
            scope_name = scope.get("name") or None if type(scope) is dict else None
            scope_version = scope.get("version") or None if type(scope) is dict else None
            for pi, span in enumerate(ss.get("spans") or []):
                path = f"{base}.scopeSpans[{si}].spans[{pi}]"
                try:
                    records.append(
                        span_from_json(span, resource, scope_name, scope_version, limits)
                    )
                except FieldError as exc:
                    field = f"{path}.{exc.field}".rstrip(".")
                    problems.append(SpanProblem(field, str(exc).split(": ", 1)[-1]))
                except (AttributeError, TypeError, ValueError) as exc:
                    problems.append(SpanProblem(path, f"malformed span: {exc}"))
    return records, problems


# --- writing (fixtures, demo data, tests) ---


def _hexify_ids(obj: Any) -> None:

    if isinstance(obj, dict):
        for key in ("traceId", "spanId", "parentSpanId"):
            if obj.get(key):
                obj[key] = base64.b64decode(obj[key]).hex()
        for value in obj.values():
            _hexify_ids(value)
    elif isinstance(obj, list):
        for item in obj:
            _hexify_ids(item)


def request_to_json_line(request: ExportTraceServiceRequest) -> str:
    """One line in the Collector `file` exporter spelling (hex ids, integer enums)."""
    from google.protobuf import json_format  # only this direction needs it

    doc = json_format.MessageToDict(request, use_integers_for_enums=True)
    _hexify_ids(doc)
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def sdk_spans_to_request(spans: Iterable[Any]) -> ExportTraceServiceRequest:
    """Encode SDK `ReadableSpan`s exactly as the OTLP exporter would send them."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(list(spans))
