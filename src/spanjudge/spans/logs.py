"""OTLP log records as span content: the one owner of turning a record into what recognition reads.

Under the GenAI conventions an instrumentation may record message content as events emitted
through the Logs API (`gen_ai.client.inference.operation.details`; the older per-message
`gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`,
`gen_ai.tool.message`, `gen_ai.choice`) instead of on its spans. Each such record names the span
it was emitted in (trace id + span id).

Every front end turns a record into a *carrier*: a `SpanRecord` named `LOG_RECORD_SPAN`, a child
of the span the record names, holding one `SpanEvent` with the record's event name, its
attributes and its body's fields (a body `{"content": ...}` reads as an event attribute
`content`, as the span-event form of the same event has it). Carriers travel like any span
(spool, routing, session store, memory budget, late-span re-opening), so a record waits for its
session under the same rules and the same grace as a late span. When a session closes, `join`
moves each carrier's event onto its span, where recognition reads it as if the instrumentation
had recorded it there; nothing downstream knows the content came from a log record.

What is carried: a record that names an event (`event_name`, or the older `event.name`
attribute), or whose body is GenAI-shaped (a message with a role and content, a choice, message
lists). A framework's own event whose body is GenAI-shaped is read under the GenAI event name its
shape says. A body that is a string holding such a JSON object (Python logging through the
SDK's `LoggingHandler` writes a message as its JSON text) is read as that object. A record
without a span context cannot be joined to a session, and a plain log line
(no event, no GenAI-shaped body) is no content: both are counted (`LogDecoding.unread`), never
silently dropped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from spanjudge import semconv
from spanjudge.spans import jsonfast
from spanjudge.spans.ids import IdError, id_from_bytes, id_from_text
from spanjudge.spans.limits import DEFAULT_LIMITS, Limits, cap_value
from spanjudge.spans.otlp_json import FieldError, any_value_json, attrs_json, decode_json_document
from spanjudge.spans.otlp_proto import SpanProblem, any_value
from spanjudge.spans.otlp_proto import _attrs as proto_attrs
from spanjudge.spans.record import Attributes, AttrValue, SpanEvent, SpanRecord
from spanjudge.spans.wire_text import parse_message

if TYPE_CHECKING:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

LOG_RECORD_SPAN = semconv.SPAN_LOG_RECORD
_NAME = attrgetter("name")
# Why a record was not carried (`LogDecoding.unread` keys, the `reason` of the counter).
UNREAD_NO_SPAN = semconv.LOG_UNREAD_NO_SPAN_CONTEXT
UNREAD_NOT_CONTENT = semconv.LOG_UNREAD_NOT_CONTENT

_GENAI_EVENTS = frozenset(
    {
        semconv.EV_GEN_AI_USER_MESSAGE,
        semconv.EV_GEN_AI_SYSTEM_MESSAGE,
        semconv.EV_GEN_AI_ASSISTANT_MESSAGE,
        semconv.EV_GEN_AI_TOOL_MESSAGE,
        semconv.EV_GEN_AI_CHOICE,
        semconv.EV_GEN_AI_INFERENCE_DETAILS,
    }
)
_ROLE_EVENTS = {
    "system": semconv.EV_GEN_AI_SYSTEM_MESSAGE,
    "developer": semconv.EV_GEN_AI_SYSTEM_MESSAGE,
    "user": semconv.EV_GEN_AI_USER_MESSAGE,
    "human": semconv.EV_GEN_AI_USER_MESSAGE,
    "assistant": semconv.EV_GEN_AI_ASSISTANT_MESSAGE,
    "model": semconv.EV_GEN_AI_ASSISTANT_MESSAGE,
    "ai": semconv.EV_GEN_AI_ASSISTANT_MESSAGE,
    "tool": semconv.EV_GEN_AI_TOOL_MESSAGE,
    "function": semconv.EV_GEN_AI_TOOL_MESSAGE,
}
_MESSAGE_KEYS = ("content", "parts", "tool_calls")
_DETAILS_KEYS = (
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
)
# What the body of a GenAI event holds besides the message keys: a choice's `message`
_EVENT_BODY_KEYS = (*_MESSAGE_KEYS, "message", *_DETAILS_KEYS)


@dataclass(slots=True)
class LogDecoding:
    """The carriers of one request or document, the problems of records that could not be
    decoded (with their path), and the counts of records not carried, by reason."""

    carriers: list[SpanRecord] = field(default_factory=list)
    problems: list[SpanProblem] = field(default_factory=list)
    unread: dict[str, int] = field(default_factory=dict)

    def count(self, reason: str) -> None:
        self.unread[reason] = self.unread.get(reason, 0) + 1


def content_event_name(event_name: str | None, attributes: Attributes, body: AttrValue) -> str:
    """The event name recognition reads the record under: a GenAI event keeps its name; any
    other record whose body (or attributes) is GenAI-shaped gets the name its shape says; ""
    when it is no GenAI content (the record's own name, if any, is then kept)."""
    if event_name in _GENAI_EVENTS:
        return event_name
    if isinstance(body, Mapping):
        if "message" in body and "role" not in body:  # an output: `message` (+ finish_reason)
            return semconv.EV_GEN_AI_CHOICE
        role = body.get("role")
        if (
            isinstance(role, str)
            and role.lower() in _ROLE_EVENTS
            and any(key in body for key in _MESSAGE_KEYS)
        ):
            return _ROLE_EVENTS[role.lower()]
        if any(key in body for key in _DETAILS_KEYS):
            return semconv.EV_GEN_AI_INFERENCE_DETAILS
    if any(key in attributes for key in _DETAILS_KEYS[:2]):
        return semconv.EV_GEN_AI_INFERENCE_DETAILS
    return ""


def carrier(
    *,
    trace_id: str | None,
    span_id: str | None,
    time_unix_nano: int,
    event_name: str | None,
    attributes: dict[str, AttrValue],
    body: AttrValue,
    resource: Attributes,
    scope_name: str | None,
    scope_version: str | None,
    truncated: int,
    decoding: LogDecoding,
) -> None:
    """Add the carrier of one decoded record to ``decoding``, or count why there is none."""
    name = event_name or _str(attributes.get(semconv.EVENT_NAME)) or None
    if isinstance(body, str):
        body = _json_body(name, body)
    shaped = content_event_name(name, attributes, body)
    if not shaped and not name:
        decoding.count(UNREAD_NOT_CONTENT)
        return
    if trace_id is None or span_id is None:
        decoding.count(UNREAD_NO_SPAN)
        return
    event_attributes = dict(attributes)
    if isinstance(body, Mapping):
        for key, value in body.items():
            event_attributes.setdefault(key, value)
    elif body is not None:
        # a string body of a message event is its content (`{"content": ...}` spelled short)
        key = "content" if shaped and shaped != semconv.EV_GEN_AI_CHOICE else semconv.LOG_BODY
        event_attributes.setdefault(key, body)
    if shaped and name and shaped != name:
        event_attributes.setdefault(semconv.EVENT_NAME, name)
    digest = hashlib.blake2b(digest_size=8)
    for part in (trace_id, span_id, str(time_unix_nano), name or "", repr(attributes), repr(body)):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x1f")
    own_id = digest.hexdigest()
    if own_id == "0" * 16:
        own_id = "0" * 15 + "1"
    decoding.carriers.append(
        SpanRecord(
            trace_id=trace_id,
            span_id=own_id,
            parent_span_id=span_id,
            name=LOG_RECORD_SPAN,
            start_unix_nano=time_unix_nano,
            end_unix_nano=time_unix_nano,
            # the record's attributes, its content left to the event (not held twice): a session
            # key on a record counts as on a span
            attributes=_without_content(attributes),
            events=(
                SpanEvent(
                    name=shaped or name or "",
                    time_unix_nano=time_unix_nano,
                    attributes=event_attributes,
                ),
            ),
            resource=resource,
            scope_name=scope_name,
            scope_version=scope_version,
            truncated=truncated,
        )
    )


def _json_body(name: str | None, body: str) -> AttrValue:
    """A string body holding a GenAI-shaped JSON object, as that object (Python logging through
    the SDK's LoggingHandler turns a message into its JSON text); any other string as it is.
    Under a GenAI event name a message needs no role (the name says it); else its shape names
    the event."""
    text = body.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return body
    try:
        decoded = _from_json(jsonfast.parse(text))
    except (ValueError, RecursionError):
        return body
    if not isinstance(decoded, dict):
        return body
    if content_event_name(None, {}, decoded):
        return decoded
    if name in _GENAI_EVENTS and any(key in decoded for key in _EVENT_BODY_KEYS):
        return decoded
    return body


def _from_json(value: Any) -> AttrValue:
    """Decoded JSON as an attribute value (arrays as tuples, as OTLP arrays are read)."""
    if isinstance(value, dict):
        return {key: _from_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return tuple(_from_json(item) for item in value)
    return value  # type: ignore[no-any-return]


def _without_content(attributes: dict[str, AttrValue]) -> dict[str, AttrValue]:
    if attributes.keys().isdisjoint(_DETAILS_KEYS):
        return attributes
    return {k: v for k, v in attributes.items() if k not in _DETAILS_KEYS}


def _str(value: AttrValue) -> str:
    return value if isinstance(value, str) else ""


def is_carrier(span: SpanRecord) -> bool:
    return span.name == LOG_RECORD_SPAN and span.parent_span_id is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Joined:
    """A session's spans with every carrier's event on its span; ``records`` carriers were
    joined, ``unjoined`` named a span the session does not hold (never seen, or sampled out)."""

    spans: Sequence[SpanRecord]
    records: int = 0
    unjoined: int = 0


def join(spans: Sequence[SpanRecord]) -> Joined:
    """Move each carrier's event onto the span it names (in time order with the span's own
    events). Carriers never reach recognition: one whose span is not in the session is
    counted in ``unjoined``."""
    if LOG_RECORD_SPAN not in map(_NAME, spans):  # (most sessions: no log records)
        return Joined(spans=spans)
    carried: dict[tuple[str, str | None], list[SpanEvent]] = {}
    kept: list[SpanRecord] = []
    records = 0
    for span in spans:
        if is_carrier(span):
            records += 1
            carried.setdefault((span.trace_id, span.parent_span_id), []).extend(span.events)
        else:
            kept.append(span)
    out: list[SpanRecord] = []
    for span in kept:
        events = carried.pop((span.trace_id, span.span_id), None)
        if events is None:
            out.append(span)
            continue
        merged = sorted((*span.events, *events), key=_event_time)
        out.append(replace(span, events=tuple(merged)))
    unjoined = sum(len(events) for events in carried.values())
    return Joined(spans=out, records=records, unjoined=unjoined)


def _event_time(event: SpanEvent) -> int:
    return event.time_unix_nano


# --- decoders: OTLP JSON and protobuf (SDK log records: `spans.sdk.carriers_from_sdk`) ---


def is_logs_document(doc: Any) -> bool:
    """An OTLP JSON logs document (`resourceLogs`, either spelling) rather than traces."""
    return (
        isinstance(doc, Mapping)
        and "resourceSpans" not in doc
        and "resource_spans" not in doc
        and ("resourceLogs" in doc or "resource_logs" in doc)
    )


def decode_document(doc: Any, limits: Limits = DEFAULT_LIMITS) -> LogDecoding:
    """One OTLP JSON document, traces or logs: its spans, or its log records' carriers (in
    ``carriers`` either way), with the problems of what could not be decoded."""
    if is_logs_document(doc):
        return decode_logs_json(doc, limits)
    spans, problems = decode_json_document(doc, limits)
    return LogDecoding(carriers=spans, problems=problems)


def _time(time_unix_nano: int, observed_unix_nano: int) -> int:
    # `timeUnixNano` is optional (0: unknown); the SDK's Logs API leaves it to the observed time
    return time_unix_nano or observed_unix_nano


def decode_logs_json(doc: Mapping[str, Any], limits: Limits = DEFAULT_LIMITS) -> LogDecoding:
    """Carriers of one OTLP JSON logs document (`{"resourceLogs": [...]}`), either spelling."""
    decoding = LogDecoding()
    resource_logs = doc.get("resourceLogs", doc.get("resource_logs"))
    if not isinstance(resource_logs, list):
        decoding.problems.append(SpanProblem("resourceLogs", "missing or not a list"))
        return decoding
    for ri, rl in enumerate(resource_logs):
        base = f"resourceLogs[{ri}]"
        if type(rl) is not dict:
            decoding.problems.append(
                SpanProblem(base, "expected an object with 'resource' and 'scopeLogs'")
            )
            continue
        try:
            resource, _ = attrs_json(
                (rl.get("resource") or {}).get("attributes"), "resource.attributes", limits
            )
        except (FieldError, AttributeError) as exc:
            decoding.problems.append(SpanProblem(base, str(exc)))
            continue
        scope_logs = rl.get("scopeLogs") or rl.get("scope_logs") or []
        if type(scope_logs) is not list:
            decoding.problems.append(SpanProblem(f"{base}.scopeLogs", "expected a list"))
            continue
        for si, sl in enumerate(scope_logs):
            records = (
                (sl.get("logRecords") or sl.get("log_records") or []) if type(sl) is dict else 0
            )
            if type(records) is not list:
                decoding.problems.append(
                    SpanProblem(
                        f"{base}.scopeLogs[{si}]", "expected an object with a 'logRecords' list"
                    )
                )
                continue
            scope = sl.get("scope") or {}
            scope_name = (scope.get("name") or None) if type(scope) is dict else None
            scope_version = (scope.get("version") or None) if type(scope) is dict else None
            for li, record in enumerate(records):
                path = f"{base}.scopeLogs[{si}].logRecords[{li}]"
                try:
                    if type(record) is not dict:
                        raise FieldError("", "expected a log record object")
                    attributes, cuts = attrs_json(record.get("attributes"), "attributes", limits)
                    body: AttrValue = None
                    if record.get("body") is not None:
                        body, n = cap_value(any_value_json(record["body"], "body"), limits)
                        cuts += n
                    trace_id = _json_id(record, ("traceId", "trace_id"), 16)
                    span_id = _json_id(record, ("spanId", "span_id"), 8)
                    when = _time(
                        _json_int(record, ("timeUnixNano", "time_unix_nano")),
                        _json_int(record, ("observedTimeUnixNano", "observed_time_unix_nano")),
                    )
                    event_name = record.get("eventName", record.get("event_name"))
                except FieldError as exc:
                    decoding.problems.append(
                        SpanProblem(f"{path}.{exc.field}".rstrip("."), exc.message)
                    )
                    continue
                except (AttributeError, TypeError, ValueError) as exc:
                    decoding.problems.append(SpanProblem(path, f"malformed log record: {exc}"))
                    continue
                carrier(
                    trace_id=trace_id if span_id else None,
                    span_id=span_id if trace_id else None,
                    time_unix_nano=when,
                    event_name=event_name if isinstance(event_name, str) else None,
                    attributes=attributes,
                    body=body,
                    resource=resource,
                    scope_name=scope_name,
                    scope_version=scope_version,
                    truncated=cuts,
                    decoding=decoding,
                )
    return decoding


def _json_id(record: Mapping[str, Any], keys: tuple[str, str], size: int) -> str | None:
    text = record.get(keys[0], record.get(keys[1]))
    if not text or text == "0" * (2 * size):
        return None  # a record emitted outside any span
    try:
        return id_from_text(str(text), size, keys[0])
    except IdError as exc:
        raise FieldError(keys[0], str(exc).split(" ", 1)[1]) from None


def _json_int(record: Mapping[str, Any], keys: tuple[str, str]) -> int:
    value = record.get(keys[0], record.get(keys[1], 0))
    if type(value) is int:
        return value
    if type(value) is str and value.isdigit():
        return int(value)
    raise FieldError(keys[0], f"expected an integer (or a decimal string), got {value!r}")


def decode_logs_request(
    request: ExportLogsServiceRequest, limits: Limits = DEFAULT_LIMITS
) -> LogDecoding:
    """Carriers of one OTLP protobuf `ExportLogsServiceRequest`."""
    decoding = LogDecoding()
    for ri, rl in enumerate(request.resource_logs):
        resource, _ = proto_attrs(rl.resource.attributes, limits)
        for si, sl in enumerate(rl.scope_logs):
            for li, record in enumerate(sl.log_records):
                try:
                    trace_id = _proto_id(record.trace_id, 16, "traceId")
                    span_id = _proto_id(record.span_id, 8, "spanId")
                except IdError as exc:
                    path = f"resourceLogs[{ri}].scopeLogs[{si}].logRecords[{li}]"
                    decoding.problems.append(SpanProblem(path, str(exc)))
                    continue
                attributes, cuts = proto_attrs(record.attributes, limits)
                body: AttrValue = None
                if record.HasField("body"):
                    body, n = cap_value(any_value(record.body), limits)
                    cuts += n
                carrier(
                    trace_id=trace_id if span_id else None,
                    span_id=span_id if trace_id else None,
                    time_unix_nano=_time(record.time_unix_nano, record.observed_time_unix_nano),
                    event_name=record.event_name or None,
                    attributes=attributes,
                    body=body,
                    resource=resource,
                    scope_name=sl.scope.name or None,
                    scope_version=sl.scope.version or None,
                    truncated=cuts,
                    decoding=decoding,
                )
    return decoding


def _proto_id(raw: bytes, size: int, what: str) -> str | None:
    if not raw or raw == bytes(size):
        return None
    return id_from_bytes(raw, size, what)


def parse_logs_request(data: bytes) -> ExportLogsServiceRequest:
    """Parse a serialized `ExportLogsServiceRequest`; `ValueError` says what is wrong."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest()
    try:
        parse_message(request, data)  # a string that is not UTF-8 is read with U+FFFD
    except Exception as exc:  # protobuf raises DecodeError, a private-ish subclass
        raise ValueError(f"not a valid OTLP ExportLogsServiceRequest protobuf: {exc}") from None
    return request
