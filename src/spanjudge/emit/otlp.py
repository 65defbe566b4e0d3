"""Verdicts encoded straight into OTLP protobuf, one session at a time: `spanjudge serve`'s path.

What `emit.otel.OtelVerdictSink` emits through the SDK (ARCHITECTURE.md section 8), without SDK
spans, events or log records: each evaluated session becomes one `Span` with one event per
verdict and one `LogRecord` per verdict, encoded as protobuf bytes (`emit.wire`) that the
export queues hold until `OtlpVerdictEncoder.request` puts them in an export request. Each
verdict's span event and log record are written in one step from the verdict, with no
attribute mapping in between, and the encodings of the attributes that repeat from verdict to
verdict (names, labels, outcomes, most explanations) are remembered; what is the same for
every session (keys, names, the resource, the scope) is encoded once. The placement, the
timestamps and the severity come from `emit.otel`, as do the span's attributes and the
session's on each log record, and the order of a verdict's (`emit.otel.VERDICT_OPENING`, its
id, its score, `emit.otel.VERDICT_CLOSING`, as `emit.otel.verdict_attributes` writes them too);
`tests/emit/test_otel_contract.py` checks that the two paths send the same OTLP.

Limits: the SDK's span event and link count limits (128 each, or the `OTEL_SPAN_EVENT_COUNT_LIMIT`
and `OTEL_SPAN_LINK_COUNT_LIMIT` it reads) keep the latest events and links, as the SDK does.
Attribute count and length limits are not applied: a verdict has at most a dozen attributes,
under the default count limit of 128, and no length limit is set by default. The sampler is not
consulted (`OTEL_TRACES_SAMPLER`): an evaluation span is always sent, since the spool keeps a
session until its verdicts are confirmed.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, SpanFlags
from opentelemetry.sdk.trace import SpanLimits
from opentelemetry.util.types import AttributeValue

from spanjudge import semconv
from spanjudge._version import __version__
from spanjudge.emit import wire
from spanjudge.emit.otel import (
    VERDICT_CLOSING,
    VERDICT_OPENING,
    Placement,
    evaluation_span_attributes,
    evaluation_times,
    failed,
    session_record_attributes,
    span_ids,
    verdict_texts,
    warn_event_limit,
)
from spanjudge.remembered import SHORT_CHARS, remembered_when_short
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import NO_TARGET, SessionResult, Verdict, verdict_ids

# The SDK's span flags for a parent or link context that is not remote (ours never are).
_LOCAL = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_SAMPLED = 1  # a log record's trace flags when it carries a span's ids
_WARN, _INFO = 13, 9  # SeverityNumber.WARN, SeverityNumber.INFO

# The tags of the fields written here (opentelemetry/proto/{common,trace,logs}/v1/*.proto).
# The export requests of both signals have the same layout, field for field:
# Export{Trace,Logs}ServiceRequest{1: Resource{Spans,Logs}{1: resource, 2: Scope{Spans,Logs}{
# 1: scope, 2: the spans or log records}, 3: schema_url}}.
_LEN, _VARINT, _I64, _I32 = wire.LEN, wire.VARINT, wire.I64, wire.I32
_RESOURCE_ITEMS = wire.tag(1, _LEN)  # Export*ServiceRequest.resource_{spans,logs}
_RESOURCE = wire.tag(1, _LEN)  # Resource*.resource
_SCOPE_ITEMS = wire.tag(2, _LEN)  # Resource*.scope_{spans,logs}
_SCHEMA_URL = wire.tag(3, _LEN)  # Resource*.schema_url
_SCOPE = wire.tag(1, _LEN)  # Scope*.scope
_ITEM = wire.tag(2, _LEN)  # ScopeSpans.spans, ScopeLogs.log_records
_KEY, _VALUE = wire.tag(1, _LEN), wire.tag(2, _LEN)  # KeyValue
# AnyValue
_STRING = wire.tag(1, _LEN)
_BOOL = wire.tag(2, _VARINT)
_INT = wire.tag(3, _VARINT)
_DOUBLE = wire.tag(4, _I64)
_BYTES = wire.tag(7, _LEN)
# Span
_SPAN_TRACE_ID = wire.tag(1, _LEN)
_SPAN_SPAN_ID = wire.tag(2, _LEN)
_SPAN_PARENT_SPAN_ID = wire.tag(4, _LEN)
_SPAN_NAME = wire.tag(5, _LEN)
_SPAN_KIND = wire.tag(6, _VARINT)
_SPAN_START = wire.tag(7, _I64)
_SPAN_END = wire.tag(8, _I64)
_SPAN_ATTRIBUTES = wire.tag(9, _LEN)
_SPAN_EVENTS = wire.tag(11, _LEN)
_SPAN_DROPPED_EVENTS = wire.tag(12, _VARINT)
_SPAN_LINKS = wire.tag(13, _LEN)
_SPAN_DROPPED_LINKS = wire.tag(14, _VARINT)
_SPAN_STATUS = wire.tag(15, _LEN)
_SPAN_FLAGS = wire.tag(16, _I32)
# Span.Event
_EVENT_TIME = wire.tag(1, _I64)
_EVENT_NAME = wire.tag(2, _LEN)
_EVENT_ATTRIBUTES = wire.tag(3, _LEN)
# Span.Link
_LINK_TRACE_ID = wire.tag(1, _LEN)
_LINK_SPAN_ID = wire.tag(2, _LEN)
_LINK_FLAGS = wire.tag(6, _I32)
# LogRecord
_RECORD_TIME = wire.tag(1, _I64)
_RECORD_SEVERITY_NUMBER = wire.tag(2, _VARINT)
_RECORD_SEVERITY_TEXT = wire.tag(3, _LEN)
_RECORD_BODY = wire.tag(5, _LEN)
_RECORD_ATTRIBUTES = wire.tag(6, _LEN)
_RECORD_FLAGS = wire.tag(8, _I32)
_RECORD_TRACE_ID = wire.tag(9, _LEN)
_RECORD_SPAN_ID = wire.tag(10, _LEN)
_RECORD_OBSERVED_TIME = wire.tag(11, _I64)
_RECORD_EVENT_NAME = wire.tag(12, _LEN)

# What every evaluation span and log record has the same.
_SPAN_NAME_AND_KIND = wire.string(_SPAN_NAME, semconv.SPAN_EVALUATE) + wire.uint(
    _SPAN_KIND, Span.SpanKind.SPAN_KIND_INTERNAL
)
_SPAN_STATUS_UNSET = wire.message(_SPAN_STATUS, b"")  # an empty `Status`, set
# The heads of id fields: the ids written are never 0 (a new span's are random and not 0, the
# others `span_ids` gave), so each is always written, at its full length.
_SPAN_TRACE_ID_HEAD = _SPAN_TRACE_ID + wire.varint(16)
_SPAN_SPAN_ID_HEAD = _SPAN_SPAN_ID + wire.varint(8)
_LINK_SIZE = len(_LINK_TRACE_ID) + 1 + 16 + len(_LINK_SPAN_ID) + 1 + 8 + len(_LINK_FLAGS) + 4
# A link (a `Span.Link` field of its span): its head and its trace id's, then the trace id,
# the span id's head, the span id and the flags.
_LINK_TRACE_ID_HEAD = _SPAN_LINKS + wire.varint(_LINK_SIZE) + _LINK_TRACE_ID + wire.varint(16)
_LINK_SPAN_ID_HEAD = _LINK_SPAN_ID + wire.varint(8)
_LINK_FLAGS_LOCAL = wire.fixed32(_LINK_FLAGS, _LOCAL)
_SPAN_FLAGS_LOCAL = wire.fixed32(_SPAN_FLAGS, _LOCAL)
_EVENT_NAME_FIELD = wire.string(_EVENT_NAME, semconv.EV_EVALUATION_RESULT)
_RECORD_SEVERITY = {
    True: wire.uint(_RECORD_SEVERITY_NUMBER, _WARN) + wire.string(_RECORD_SEVERITY_TEXT, "WARN"),
    False: wire.uint(_RECORD_SEVERITY_NUMBER, _INFO) + wire.string(_RECORD_SEVERITY_TEXT, "INFO"),
}
_RECORD_BODY_EMPTY = wire.message(_RECORD_BODY, b"")  # an empty `AnyValue`, set
_RECORD_EVENT_NAME_FIELD = wire.string(_RECORD_EVENT_NAME, semconv.EV_EVALUATION_RESULT)

# Attributes whose values come from small sets: verdict attributes (evaluator names, labels,
# outcomes, judges, reasons, skills, error types), and all of an evaluation span's but the
# session id (the revision, whether the session is complete, the agent's name). Each pair is
# encoded once, when the value is a string, a boolean or an integer.
_FEW_VALUES = frozenset(
    {
        semconv.GEN_AI_EVALUATION_NAME,
        semconv.GEN_AI_EVALUATION_SCORE_LABEL,
        semconv.SJ_OUTCOME,
        semconv.SJ_JUDGE,
        semconv.SJ_REASON,
        semconv.GEN_AI_SKILL_NAME,
        semconv.ERROR_TYPE,
        semconv.SJ_REVISION,
        semconv.SJ_SESSION_COMPLETE,
        semconv.GEN_AI_AGENT_NAME,
    }
)


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


def any_value_bytes(value: object) -> bytes:
    """`any_value(value)` encoded; scalars written here, arrays, maps and None by protobuf."""
    if isinstance(value, bool):
        return _BOOL + (b"\x01" if value else b"\x00")
    if isinstance(value, str):
        return wire.message(_STRING, value.encode())  # a oneof member: written even if empty
    if isinstance(value, int):
        return _INT + wire.int64(value)
    if isinstance(value, float):
        return _DOUBLE + wire.double(value)
    if isinstance(value, bytes):
        return wire.message(_BYTES, value)
    return any_value(value).SerializeToString()


@functools.lru_cache(maxsize=256)
def _key(key: str) -> bytes:
    return wire.string(_KEY, key)


def key_value(key: str, value: object) -> bytes:
    """A `KeyValue` after its length (`wire.sized`): written as an attribute of any message by
    the attribute field's tag before it (`attributes`)."""
    # a string (most values) as `any_value_bytes` writes it, without its checks
    encoded = _STRING + wire.sized(value.encode()) if type(value) is str else any_value_bytes(value)
    return wire.sized(_key(key) + _VALUE + wire.sized(encoded))


_few_key_value = remembered_when_short(maxsize=1024)(key_value)
# Booleans and integers by type as well as value: `1 == True`, and each is written as itself.
_few_number_key_value = functools.lru_cache(maxsize=1024, typed=True)(key_value)


def encoded_attributes(attributes: Mapping[str, object]) -> list[bytes]:
    """Each attribute's `key_value`, in order. Only strings, booleans and integers are looked
    up among the kept encodings (strings through `remembered_when_short`: short ones; the others
    by type and value): values that compare equal can be written differently (`0.0` and `-0.0`,
    `1` and `True`), and a list cannot be a key."""
    encoded = []
    for key, value in attributes.items():
        if key in _FEW_VALUES:
            kind = type(value)
            if kind is str:
                encoded.append(_few_key_value(key, value))
                continue
            if kind is bool or kind is int:
                encoded.append(_few_number_key_value(key, value))
                continue
        encoded.append(key_value(key, value))
    return encoded


def attributes(tag: bytes, key_values: list[bytes]) -> bytes:
    """Attributes as a message's repeated field of that ``tag``: the tag before each."""
    return tag + tag.join(key_values) if key_values else b""


# A verdict's span event and log record are written straight from the verdict, its attributes
# in the order `emit.otel` gives them (`VERDICT_OPENING`, its id, its score, `VERDICT_CLOSING`;
# `test_otel_contract.py` holds the two paths to the same output). All but the id and the score
# come from few texts (an explanation is mostly one of its evaluator's few sentences): what the
# event and the record are around the id and the score is remembered (`_Shape`), by those texts,
# when they are strings (values that compare equal can be written differently: `0.0` and `-0.0`,
# `1` and `True`) and short ones (`SHORT_CHARS`, as `remembered_when_short` keeps them).
_VERDICT_ID_CHARS = 32  # `values.verdict_ids`: hex digits
_VERDICT_ID_LEAD = key_value(semconv.SJ_VERDICT_ID, "0" * _VERDICT_ID_CHARS)[
    :-_VERDICT_ID_CHARS
]  # the id's attribute but for the id's characters
_SCORE_LEAD = key_value(semconv.GEN_AI_EVALUATION_SCORE_VALUE, 0.0)[:-8]  # but for the double
_EVENT_SCORED = _EVENT_ATTRIBUTES + _SCORE_LEAD  # a score in an event, but for the double
_RECORD_SCORED = _RECORD_ATTRIBUTES + _SCORE_LEAD
_REMEMBERED = 1024  # shapes kept of verdicts' few-valued attributes

# A verdict's span event and log record but for the session's time, the verdict's id and score,
# and (the record's) what follows its attributes: (the event's name and its attributes up to
# the id's value, its attributes after the score, the size of the event but for its time and
# score, the record's severity, body and attributes up to the id's value, its attributes after
# the score). An event is its time, then the first, the id, the score (`_EVENT_SCORED` and the
# double) and the second; a record its time, then the fourth, the id, the score
# (`_RECORD_SCORED` and the double), the fifth and what the session's records end with.
_Shape = tuple[bytes, bytes, int, bytes, bytes]


def _shape(verdict: Verdict, texts: tuple[object, ...]) -> _Shape:
    """The shape of ``verdict``'s event and record (``texts``: its `verdict_texts`; the
    severity follows the outcome, one of them)."""
    opening, closing = texts[: len(VERDICT_OPENING)], texts[len(VERDICT_OPENING) :]
    opened = [key_value(k, v) for k, v in zip(VERDICT_OPENING, opening, strict=True)]
    closed = [key_value(k, v) for k, v in zip(VERDICT_CLOSING, closing, strict=True) if v]
    event_open = b"".join(
        (_EVENT_NAME_FIELD, attributes(_EVENT_ATTRIBUTES, opened), _EVENT_ATTRIBUTES)
    )
    event_close = attributes(_EVENT_ATTRIBUTES, closed)
    return (
        event_open + _VERDICT_ID_LEAD,
        event_close,
        len(event_open) + len(_VERDICT_ID_LEAD) + _VERDICT_ID_CHARS + len(event_close),
        b"".join(
            (
                _RECORD_SEVERITY[failed(verdict)],
                _RECORD_BODY_EMPTY,
                attributes(_RECORD_ATTRIBUTES, opened),
                _RECORD_ATTRIBUTES,
                _VERDICT_ID_LEAD,
            )
        ),
        attributes(_RECORD_ATTRIBUTES, closed),
    )


# The remembered shapes, by the texts they encode. Only tuples of short strings are put in, so
# a lookup finds nothing for any other values (they are encoded each time) and needs no check
# first; at `_REMEMBERED` tuples it starts over. (`functools.lru_cache` would keep any values
# it is called with: each verdict's values would have to be checked before the lookup, which
# costs several times the lookup.)
_remembered_shapes: dict[tuple[object, ...], _Shape] = {}


def _shape_of(verdict: Verdict) -> _Shape:
    """`_shape` of ``verdict``, remembered when its texts are all short strings."""
    texts = verdict_texts(verdict)
    try:
        found = _remembered_shapes.get(texts)
    except TypeError:  # an unhashable value (a list): encoded, not remembered
        return _shape(verdict, texts)
    if found is None:
        found = _shape(verdict, texts)
        if all(type(value) is str and len(value) <= SHORT_CHARS for value in texts):
            if len(_remembered_shapes) >= _REMEMBERED:
                _remembered_shapes.clear()
            _remembered_shapes[texts] = found
    return found


def _session_fields(trajectory: Trajectory) -> tuple[bytes, bytes]:
    """The evaluation span's attributes field (`evaluation_span_attributes`) and the session's
    attributes each log record carries after its verdict's (`session_record_attributes`): an
    attribute of both with the same value (the session id, the revision) is encoded once."""
    on_span = evaluation_span_attributes(trajectory)
    encoded = encoded_attributes(on_span)
    by_key = dict(zip(on_span, encoded, strict=True))
    on_record = [
        by_key[key] if key in by_key and on_span[key] is value else key_value(key, value)
        for key, value in session_record_attributes(trajectory).items()
    ]
    return attributes(_SPAN_ATTRIBUTES, encoded), attributes(_RECORD_ATTRIBUTES, on_record)


@functools.lru_cache(maxsize=4096)
def _item_head(size: int) -> bytes:
    return _ITEM + wire.varint(size)


@dataclass(frozen=True, slots=True, kw_only=True)
class EncodedSession:
    """A session's evaluation span and its log records, each a message's encoding."""

    span: bytes
    log_records: list[bytes]


class OtlpVerdictEncoder:
    """Encodes evaluated sessions as OTLP spans and log records under one resource and the
    `spanjudge` instrumentation scope, and puts them in export requests (`request`)."""

    def __init__(
        self,
        resource: Mapping[str, AttributeValue],
        schema_url: str = "",
        limits: SpanLimits | None = None,
    ) -> None:
        # encoded by protobuf, once: set even when empty, as the SDK's encoders set them
        self._resource = wire.message(
            _RESOURCE, Resource(attributes=key_values(resource)).SerializeToString()
        )
        self._scope = wire.message(
            _SCOPE,
            InstrumentationScope(
                name=semconv.SJ_SCOPE_NAME, version=__version__
            ).SerializeToString(),
        )
        self._schema_url = wire.string(_SCHEMA_URL, schema_url)
        limits = limits or SpanLimits()
        self.max_events: int | None = limits.max_events
        self.max_links: int | None = limits.max_links
        self._warned_event_limit = False

    # What makes a span or a log record of ``size`` bytes an item of a `request` when written
    # before it: the field's tag and the length (``item_head(size)``).
    item_head = staticmethod(_item_head)

    def request(self, items: Sequence[bytes]) -> bytes:
        """An `ExportTraceServiceRequest` of spans or an `ExportLogsServiceRequest` of log
        records (the same bytes for both): the resource, the scope and the items, ``items``
        being each one's `item_head` and then its encoding (copied once, into the request)."""
        # joined once: each envelope's length is counted, not measured on a copy
        scoped_size = len(self._scope) + sum(map(len, items))
        scoped_head = _SCOPE_ITEMS + wire.varint(scoped_size)
        size = len(self._resource) + len(scoped_head) + scoped_size + len(self._schema_url)
        return b"".join(
            (
                _RESOURCE_ITEMS,
                wire.varint(size),
                self._resource,
                scoped_head,
                self._scope,
                *items,
                self._schema_url,
            )
        )

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
        links = [ids for ids in (span_ids(pair) for pair in placement.links) if ids is not None]
        dropped_links = _over(len(links), self.max_links)
        verdicts = result.verdicts
        dropped_events = _over(len(verdicts), self.max_events)
        if dropped_events and not self._warned_event_limit:
            self._warned_event_limit = True
            warn_event_limit(len(verdicts), len(verdicts) - dropped_events)
        span_id = (random.getrandbits(64) or 1).to_bytes(8, "big")
        verdict_id = verdict_ids(trajectory.session_id, trajectory.revision)
        # What each event and each log record has around its verdict's shape (`_Shape`): its
        # time, and a log record's attributes end with the session's (`log_record_attributes`),
        # then come the evaluated span's ids.
        end = wire.fixed64(b"", end_ns)  # the end's value: each field of it is left out at 0
        event_time = _EVENT_TIME + end if end else b""
        event_time_size = len(event_time)
        record_time = _RECORD_TIME + end if end else b""
        span_fields, session_fields = _session_fields(trajectory)
        record_end = (_RECORD_OBSERVED_TIME + end if end else b"") + _RECORD_EVENT_NAME_FIELD
        # A session's verdicts are about a few spans, most about the whole session (its last
        # turn): each span's tail is worked out once.
        whole = placement.evaluated_span(NO_TARGET)
        # most often the parent, whose ids were read above
        whole_ids = parent if whole == placement.parent else _ids(whole)
        whole_tail = session_fields + _record_ids(whole_ids) + record_end
        record_tails = {whole: whole_tail}
        events: list[bytes] = []  # each event as the span's field: its tag and size, then it
        log_records: list[bytes] = []
        for index, verdict in enumerate(verdicts):
            event_open, event_close, event_size, record_open, record_close = _shape_of(verdict)
            target = verdict.target
            if target is NO_TARGET:
                tail = whole_tail
            else:
                evaluated = placement.evaluated_span(target)
                found = record_tails.get(evaluated)
                if found is None:
                    found = record_tails[evaluated] = (
                        session_fields + _record_ids(_ids(evaluated)) + record_end
                    )
                tail = found
            identified = verdict_id(verdict).encode()
            score = verdict.score
            # a score goes between the id and what follows it, in the event and the record
            event_scored = record_scored = b""
            if score is not None:
                scored = wire.double(float(score))
                event_scored, record_scored = _EVENT_SCORED + scored, _RECORD_SCORED + scored
            if index >= dropped_events:  # the SDK keeps the latest events
                events += (
                    _event_head(event_time_size + event_size + len(event_scored)),
                    event_time,
                    event_open,
                    identified,
                    event_scored,
                    event_close,
                )
            log_records.append(
                b"".join((record_time, record_open, identified, record_scored, record_close, tail))
            )
        span = b"".join(
            (
                _SPAN_TRACE_ID_HEAD,
                trace_id.to_bytes(16, "big"),
                _SPAN_SPAN_ID_HEAD,
                span_id,
                wire.data(_SPAN_PARENT_SPAN_ID, parent_span_id),
                _SPAN_NAME_AND_KIND,
                wire.fixed64(_SPAN_START, start_ns),
                _SPAN_END + end if end else b"",
                span_fields,
                *events,
                wire.uint(_SPAN_DROPPED_EVENTS, dropped_events),
                *(
                    b"".join(
                        (
                            _LINK_TRACE_ID_HEAD,
                            link_trace_id.to_bytes(16, "big"),
                            _LINK_SPAN_ID_HEAD,
                            link_span_id.to_bytes(8, "big"),
                            _LINK_FLAGS_LOCAL,
                        )
                    )
                    for link_trace_id, link_span_id in links[dropped_links:]  # the latest
                ),
                wire.uint(_SPAN_DROPPED_LINKS, dropped_links),
                _SPAN_STATUS_UNSET,
                _SPAN_FLAGS_LOCAL,
            )
        )
        return EncodedSession(span=span, log_records=log_records)


@functools.lru_cache(maxsize=4096)
def _event_head(size: int) -> bytes:
    """What makes a span event of ``size`` bytes a field of its span: the tag and the size."""
    return _SPAN_EVENTS + wire.varint(size)


def _ids(evaluated: tuple[str, str] | None) -> tuple[int, int] | None:
    """`span_ids` of an evaluated span, if any."""
    return span_ids(evaluated) if evaluated is not None else None


# A log record's flags and the heads of its trace and span id fields: ids that `span_ids`
# gave are never 0, so the fields are always written, at their full length.
_RECORD_CONTEXT = wire.fixed32(_RECORD_FLAGS, _SAMPLED) + _RECORD_TRACE_ID + wire.varint(16)
_RECORD_SPAN_ID_HEAD = _RECORD_SPAN_ID + wire.varint(8)


def _record_ids(numbers: tuple[int, int] | None) -> bytes:
    """A log record's flags, trace id and span id fields: the evaluated span's context (its
    `_ids`), if any."""
    if numbers is None:
        return b""
    return b"".join(
        (
            _RECORD_CONTEXT,
            numbers[0].to_bytes(16, "big"),
            _RECORD_SPAN_ID_HEAD,
            numbers[1].to_bytes(8, "big"),
        )
    )


def _over(count: int, limit: int | None) -> int:
    """How many of ``count`` items a limit drops (None: no limit)."""
    return 0 if limit is None else max(0, count - limit)
