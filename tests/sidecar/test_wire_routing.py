"""With `serve.workers` > 1 a protobuf request is routed from what `decode_heads` reads of it,
and each evaluation process decodes its part from the bytes it is sent: the spans accepted,
the problems answered, every span's session key and spool group, each part's records, all as
decoding the whole request in the serve process gives them."""

from __future__ import annotations

import hashlib

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from spanjudge.pipeline import agent_spans
from spanjudge.sessions.keys import (
    BARE_KEY_COPIES,
    NAMESPACED_KEY_SUFFIXES,
    decides,
    session_key,
)
from spanjudge.sidecar.config import InputConfig
from spanjudge.sidecar.evaluation_process import payload, records_of
from spanjudge.sidecar.intake import FORMAT_PROTOBUF, decode_body, decode_heads
from spanjudge.sidecar.routing import Router
from spanjudge.sidecar.spool import group_of
from spanjudge.spans.files import read_input
from spanjudge.spans.limits import TRUNCATION_MARK, Limits
from spanjudge.spans.sizes import estimate_size
from spanjudge.spans.wire_text import varint
from tests.sidecar.helpers import FIXTURES, to_sdk

CHECKS = InputConfig()
KEYS = ("app.thread",)
START = 1_750_000_000_000_000_000


def _fixture_requests() -> list[bytes]:
    """Every fixture's spans as OTLP protobuf requests of 7 spans, as an SDK exports them."""
    bodies = []
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        spans = [s for chunk in read_input(str(path)) for s in chunk.spans]
        for i in range(0, len(spans), 7):
            bodies.append(encode_spans(to_sdk(spans[i : i + 7])).SerializeToString())
    return bodies


def _value(**value: object) -> AnyValue:
    return AnyValue(**value)  # type: ignore[arg-type]


def _span(number: int, *attrs: tuple[str, AnyValue], **fields: object) -> Span:
    base: dict[str, object] = {
        "trace_id": bytes(range(1, 17)),
        "span_id": number.to_bytes(8, "big"),
        "name": "invoke_agent",
        "start_time_unix_nano": START,
        "end_time_unix_nano": START + 1000,
        "attributes": [KeyValue(key=k, value=v) for k, v in attrs],
    }
    base.update(fields)
    return Span(**base)  # type: ignore[arg-type]


def _odd_request() -> bytes:
    """Session keys of every kind of value, cut, duplicated, past the attribute cap, refused;
    spans the decoder rejects; two resources and scopes, one of them spanjudge's own."""
    many = [(f"a{i}", _value(int_value=i)) for i in range(6)]
    spans = [
        _span(1, ("session.id", _value(string_value="s" * 40))),  # cut at 16 characters
        _span(2, ("session.id", _value(int_value=7))),
        _span(3, ("session.id", _value(bytes_value=b"\x01\x02"))),
        _span(4, ("session.id", _value(bool_value=True)), ("app.thread", _value(int_value=3))),
        _span(5, ("session.id", _value(array_value=ArrayValue(values=[_value(int_value=1)])))),
        _span(6, ("session.id", _value(string_value="a")), ("session.id", _value(int_value=2))),
        _span(7, *many, ("session.id", _value(string_value="past the cap"))),
        _span(8, ("gen_ai.conversation.id", _value(string_value="")), ("app.thread", _value())),
        _span(9, trace_id=bytes(16)),
        _span(10, span_id=b"\x01"),
        _span(11, end_time_unix_nano=START - 1),
        _span(12, kind=9),
        _span(13, start_time_unix_nano=10, end_time_unix_nano=20),  # implausible start
        _span(14, parent_span_id=(15).to_bytes(8, "big")),
        _span(15, parent_span_id=(14).to_bytes(8, "big")),  # a cycle with 14
        _span(16, links=[Span.Link(trace_id=b"\x01", span_id=b"\x02" * 8)]),
        _span(17),  # no key: its trace's
        _span(  # the key's name only in a value and an event: no key either
            19,
            ("note", _value(string_value="\n\nsession.id")),
            events=[Span.Event(name="e", attributes=[KeyValue(key="session.id")])],
        ),
        _span(  # namespaced keys: the first `.session.id` by name; `mcp.session.id` is none
            20,
            ("mcp.session.id", _value(string_value="m")),
            ("b.conversation.id", _value(string_value="c")),
            ("a.session.id", _value(int_value=5)),
        ),
        _span(21, *many, ("a.session.id", _value(string_value="past the cap"))),
        _span(22, ("a.session.id", _value(string_value="a")), ("session.id", _value(int_value=8))),
        _span(
            23, ("a.session.id", _value(string_value="a")), ("session.id", _value(string_value="s"))
        ),
    ]
    own = ScopeSpans(scope={"name": "spanjudge"}, spans=[_span(18)])
    resources = [
        ResourceSpans(
            resource={"attributes": [KeyValue(key="session.id", value=_value(string_value="r"))]},
            scope_spans=[ScopeSpans(scope={"name": "lib", "version": "1"}, spans=spans[:9]), own],
        ),
        ResourceSpans(
            resource={"attributes": [KeyValue(key="service.name", value=_value(string_value="x"))]},
            scope_spans=[ScopeSpans(spans=spans[9:])],
            schema_url="https://example.com/schema",
        ),
    ]
    return ExportTraceServiceRequest(resource_spans=resources).SerializeToString()


def _field(number: int, value: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return bytes((number << 3 | 2,)) + varint(len(value)) + value


def _odd_wire_request() -> bytes:
    """Spans whose attributes only the wire can hold: what `read_heads` reads as a map of key
    to value must read as the `KeyValue`s do (merged, last wins, cut, refused)."""
    key = _field(1, b"session.id")
    text = _field(1, b"s")  # an `AnyValue` string
    number = bytes((3 << 3, 5))  # an `AnyValue` int
    attributes = [
        [_field(2, text) + key],  # the value before the key
        [key + _field(2, text) + _field(2, number)],  # two values: merged, the int counts
        [key + _field(2, number) + _field(2, b"")],  # an empty second value changes nothing
        [_field(1, b"x") + _field(2, text) + key],  # two keys: the last counts
        [key + _field(2, text), key + _field(2, number)],  # two entries: the last counts
        [key + _field(2, number), key + _field(2, text) + bytes((3 << 3, 1))],  # an unknown field
        [key + _field(2, number), key + _field(2, text) + bytes((2 << 3, 1))],  # value: a varint
        [bytes((1 << 3, 1)) + _field(2, text), key],  # a key that is a varint
        [  # as many keys as the cap of 3 keeps: the key's second value is cut
            _field(1, b"a") + _field(2, text),
            _field(1, b"b") + _field(2, text),
            key + _field(2, text),
            key + _field(2, number),
        ],
        [_field(1, f"a{i}".encode()) + _field(2, text) for i in range(4)]
        + [key + _field(2, number)],
        [key + _field(2, _field(1, b"bad \xff utf-8"))],  # read with U+FFFD
    ]
    spans = []
    for number_, kvs in enumerate(attributes, 1):
        span = _span(number_).SerializeToString() + b"".join(_field(9, kv) for kv in kvs)
        spans.append(span + (varint(20 << 3) + b"\x01") * (number_ == 3))  # a field unknown to OTLP
    scope = b"".join(_field(2, span) for span in spans)
    return _field(1, _field(2, scope))


@pytest.mark.parametrize(
    ("bodies", "limits"),
    [
        (_fixture_requests(), Limits()),
        ([_odd_request()], Limits(max_attr_chars=16, max_attrs_per_span=5)),
        ([_odd_wire_request()], Limits(max_attrs_per_span=3)),
        ([_odd_wire_request()], Limits(max_attrs_per_span=4)),
    ],
    ids=["fixtures", "odd", "odd wire", "odd wire cut"],
)
def test_heads_route_and_decode_as_the_whole_request(bodies: list[bytes], limits: Limits) -> None:
    compared = 0
    for body in bodies:
        whole = decode_body(body, FORMAT_PROTOBUF, limits, CHECKS)
        heads = decode_heads(body, limits, CHECKS, KEYS)
        assert [str(p) for p in heads.problems] == [str(p) for p in whole.problems]
        assert [(h.trace_id, h.span_id) for h in heads.records] == [
            (r.trace_id, r.span_id) for r in whole.records
        ]
        wanted = {"session.id", "gen_ai.conversation.id", *BARE_KEY_COPIES, *KEYS}
        for head, record in zip(heads.records, whole.records, strict=True):
            named = {k: v for k, v in record.attributes.items() if k in wanted}
            assert {k: v for k, v in head.attributes.items() if k in wanted} == named
            assert all(record.attributes[k] == v for k, v in head.attributes.items())
            if not any(map(decides, named.values())):  # else not needed
                namespaced = {k for k in record.attributes if k.endswith(NAMESPACED_KEY_SUFFIXES)}
                assert namespaced <= head.attributes.keys()
            assert session_key(head, KEYS) == session_key(record, KEYS)
            assert group_of(head, KEYS) == group_of(record, KEYS)
        kept_heads, _ = agent_spans(heads.records)
        kept, _ = agent_spans(whole.records)
        assert records_of(payload(kept_heads), limits) == list(kept)
        # the store's sizes, worked out while decoding, are the records' own
        sizes: list[int] = []
        mixed = [*payload(kept_heads[:3]), *kept[3:]]  # wire runs, then decoded records
        assert records_of(mixed, limits, sizes) == list(kept)
        assert sizes == [estimate_size(record) for record in kept]
        # routed over three processes: each part decodes to the records routed there
        by_records = Router(3, KEYS, hold_s=60).route(kept)
        by_heads = Router(3, KEYS, hold_s=60).route(kept_heads)
        assert by_heads.keys() == by_records.keys()
        for process, part in by_records.items():
            assert records_of(payload(by_heads[process].records), limits) == part.records
        compared += len(whole.records)
    assert compared > 100 if len(bodies) > 1 else compared in (11, 15)


def test_the_odd_request_has_keys_of_every_kind_and_rejected_spans() -> None:
    # What the comparison above covers: keys found in the span or its resource, cut, refused
    # for their type, past the attribute cap; the rejected spans answered with their field.
    limits = Limits(max_attr_chars=16, max_attrs_per_span=5)
    decoded = decode_heads(_odd_request(), limits, CHECKS, KEYS)
    cut = "s" * 16 + TRUNCATION_MARK.format(digest=hashlib.sha256(b"s" * 40).hexdigest()[:16])
    assert [session_key(h, KEYS) for h in decoded.records] == [
        (cut, "session.id"),
        ("7", "session.id"),
        ("0102", "session.id"),  # bytes: their hex
        ("r", "session.id"),  # a bool is no key: the resource's
        ("r", "session.id"),  # nor an array
        ("2", "session.id"),  # the last of two
        ("r", "session.id"),  # past the attribute cap: the resource's
        ("r", "session.id"),
        ("r", "session.id"),  # spanjudge's own span (left out before routing)
        None,  # the other resource's: no key in the span or its resource
        None,  # the key's name in a value and an event attribute
        ("c", "b.conversation.id"),  # a namespaced conversation id before a session id
        None,  # past the attribute cap, and no key on its resource
        ("8", "session.id"),  # a named key before a namespaced one
        ("s", "session.id"),  # (the head reads no namespaced one here: not needed)
    ]
    problems = " ".join(str(p) for p in decoded.problems)
    for field in ("traceId", "spanId", "endTimeUnixNano", "kind", "startTimeUnixNano"):
        assert field in problems
    assert "cyclic parents" in problems and "links.traceId" in problems


def test_a_hidden_named_key_leaves_the_namespaced_one_to_route_by() -> None:
    # A named key whose value only hides it (default scrubbing) is no key: the session is the
    # namespaced copy's, and the heads serve routes by must find that copy too.
    hidden_values = ("[Scrubbed due to 'session']", "[REDACTED]")
    spans = [
        _span(
            n + 1,
            (named, _value(string_value=value)),
            ("app.session.id", _value(string_value="abc")),
        )
        for n, (named, value) in enumerate(
            (named, value) for named in ("session_id", "session.id") for value in hidden_values
        )
    ]
    body = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    ).SerializeToString()
    heads = decode_heads(body, Limits(), CHECKS, KEYS)
    whole = decode_body(body, FORMAT_PROTOBUF, Limits(), CHECKS)
    assert [session_key(r, KEYS) for r in whole.records] == [("abc", "app.session.id")] * 4
    assert [session_key(h, KEYS) for h in heads.records] == [("abc", "app.session.id")] * 4
