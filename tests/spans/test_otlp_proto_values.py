"""The protobuf decoder on every kind of attribute value, each cap and each bad id, read the way
a user sees them (the record's values, the problem's message), and the sidecar's cycle check."""

from __future__ import annotations

import hashlib
import tracemalloc

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from spanjudge.sidecar.config import InputConfig
from spanjudge.sidecar.intake import check_records
from spanjudge.spans.files import read_input
from spanjudge.spans.limits import TRUNCATION_MARK, Limits
from spanjudge.spans.otlp_proto import decode_request, parse_request
from spanjudge.spans.record import SpanEvent, SpanLink
from spanjudge.spans.sizes import estimate_size
from tests.sidecar.helpers import FIXTURES, to_sdk


def _sha256_16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


TRACE = bytes(range(1, 17))
START = 1_700_000_000_000_000_000


def _kv(key: str, value: AnyValue) -> KeyValue:
    return KeyValue(key=key, value=value)


def _span(**fields: object) -> Span:
    base: dict[str, object] = {
        "trace_id": TRACE,
        "span_id": b"\x00\x00\x00\x00\x00\x00\x00\x02",
        "name": "execute_tool read",
        "start_time_unix_nano": START,
        "end_time_unix_nano": START + 5,
    }
    base.update(fields)
    return Span(**base)  # type: ignore[arg-type]


def _decode(*spans: Span, limits: Limits | None = None):  # type: ignore[no-untyped-def]
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource={"attributes": [_kv("service.name", AnyValue(string_value="svc"))]},
                scope_spans=[ScopeSpans(scope={"name": "lib", "version": ""}, spans=spans)],
            )
        ]
    )
    args = (request,) if limits is None else (request, limits)
    return decode_request(*args)


def test_every_value_kind_becomes_its_python_value() -> None:
    attrs = [
        _kv("empty", AnyValue(string_value="")),
        _kv("text", AnyValue(string_value="hello")),
        _kv("zero", AnyValue(int_value=0)),
        _kv("count", AnyValue(int_value=-3)),
        _kv("ratio", AnyValue(double_value=0.25)),
        _kv("off", AnyValue(bool_value=False)),
        _kv("on", AnyValue(bool_value=True)),
        _kv("raw", AnyValue(bytes_value=b"\x01\xff")),
        _kv("unset", AnyValue()),
        _kv(
            "tags",
            AnyValue(
                array_value=ArrayValue(
                    values=[AnyValue(string_value="a"), AnyValue(int_value=2), AnyValue()]
                )
            ),
        ),
        _kv(
            "nested",
            AnyValue(kvlist_value=KeyValueList(values=[_kv("inner", AnyValue(bool_value=True))])),
        ),
    ]
    records, problems = _decode(_span(attributes=attrs, status=Status(code=2, message="boom")))
    assert problems == []
    (record,) = records
    assert record.attributes == {
        "empty": "",
        "text": "hello",
        "zero": 0,
        "count": -3,
        "ratio": 0.25,
        "off": False,
        "on": True,
        "raw": "01ff",
        "unset": None,
        "tags": ("a", 2, None),
        "nested": {"inner": True},
    }
    assert type(record.attributes["off"]) is bool and type(record.attributes["zero"]) is int
    assert record.trace_id == TRACE.hex() and record.span_id == "0000000000000002"
    assert record.parent_span_id is None
    assert (record.status, record.status_message, record.kind) == ("error", "boom", "unspecified")
    assert record.resource == {"service.name": "svc"}
    assert (record.scope_name, record.scope_version, record.truncated) == ("lib", None, 0)


def test_caps_cut_and_count() -> None:
    limits = Limits(max_attr_chars=4, max_attrs_per_span=2, max_events_per_span=1)
    attrs = [
        _kv("a", AnyValue(string_value="abcdefgh")),
        _kv("a", AnyValue(string_value="abc")),  # the same key again: still one attribute
        _kv("b", AnyValue(int_value=123456789)),  # numbers are never cut
        _kv("c", AnyValue(string_value="dropped")),
        _kv("d", AnyValue(bool_value=True)),
    ]
    events = [
        Span.Event(
            name="e1",
            time_unix_nano=START + 1,
            attributes=[_kv("m", AnyValue(string_value="123456"))],
        ),
        Span.Event(name="e2", time_unix_nano=START + 2),
    ]
    links = [Span.Link(trace_id=TRACE, span_id=b"\x00" * 7 + b"\x09")]
    records, problems = _decode(_span(attributes=attrs, events=events, links=links), limits=limits)
    assert problems == []
    (record,) = records
    assert record.attributes == {"a": "abc", "b": 123456789}
    assert record.events == (
        SpanEvent(
            name="e1",
            time_unix_nano=START + 1,
            attributes={"m": "1234" + TRUNCATION_MARK.format(digest=_sha256_16("123456"))},
        ),
    )
    assert record.links == (SpanLink(trace_id=TRACE.hex(), span_id="0000000000000009"),)
    # "abcdefgh" cut (1), "c" and "d" over the count (2), the event string (1), "e2" (1)
    assert record.truncated == 5


def test_bad_spans_are_named_and_the_good_one_kept() -> None:
    own = b"\x00" * 7 + b"\x05"
    records, problems = _decode(
        _span(trace_id=bytes(16)),
        _span(trace_id=b"\x01" * 15),
        _span(span_id=bytes(8)),
        _span(parent_span_id=b"\x01\x02\x03"),
        _span(span_id=own, parent_span_id=own),
        _span(end_time_unix_nano=START - 1),
        _span(kind=9),
        _span(status=Status(code=7)),
        _span(links=[Span.Link(trace_id=TRACE, span_id=b"\x01")]),
        _span(parent_span_id=bytes(8), span_id=b"\x00" * 7 + b"\x03"),
    )
    assert [str(p) for p in problems] == [
        "resourceSpans[0].scopeSpans[0].spans[0]: traceId is all zeros (invalid)",
        "resourceSpans[0].scopeSpans[0].spans[1]: traceId must be 16 bytes, got 15",
        "resourceSpans[0].scopeSpans[0].spans[2]: spanId is all zeros (invalid)",
        "resourceSpans[0].scopeSpans[0].spans[3]: parentSpanId must be 8 bytes, got 3",
        "resourceSpans[0].scopeSpans[0].spans[4]: parentSpanId: a span cannot be its own parent",
        f"resourceSpans[0].scopeSpans[0].spans[5]: endTimeUnixNano: {START - 1} is before "
        f"startTimeUnixNano {START}",
        "resourceSpans[0].scopeSpans[0].spans[6]: kind: unknown span kind 9",
        "resourceSpans[0].scopeSpans[0].spans[7]: status.code: unknown status code 7",
        "resourceSpans[0].scopeSpans[0].spans[8]: links.spanId must be 8 bytes, got 1",
    ]
    # an all-zero parent is no parent
    assert [(r.span_id, r.parent_span_id) for r in records] == [("0000000000000003", None)]


def test_cycles_are_found_beside_deep_chains() -> None:
    def ids(n: int) -> bytes:
        return n.to_bytes(8, "big")

    chain = [_span(span_id=ids(100), parent_span_id=b"")]
    chain += [_span(span_id=ids(100 + i), parent_span_id=ids(99 + i)) for i in range(1, 6)]
    ring = [_span(span_id=ids(1 + i), parent_span_id=ids(1 + (i + 1) % 3)) for i in range(3)]
    # a span hanging off the ring is not on it
    tail = [_span(span_id=ids(50), parent_span_id=ids(1))]
    other_trace = [_span(trace_id=b"\x02" * 16, span_id=ids(1), parent_span_id=ids(2))]
    records, problems = _decode(*chain, *ring, *tail, *other_trace)
    assert problems == []
    checked = check_records(records, [], InputConfig(), now_s=START / 1e9)
    assert sorted(p.path for p in checked.problems) == [
        f"span {ids(n).hex()} of trace {TRACE.hex()}" for n in (1, 2, 3)
    ]
    assert all("cyclic parents" in p.message for p in checked.problems)
    assert sorted(r.span_id for r in checked.records) == sorted(
        [ids(100 + i).hex() for i in range(6)] + [ids(50).hex(), ids(1).hex()]
    )


def test_the_sizes_worked_out_while_decoding_are_the_stores_estimates() -> None:
    """The decoder's sizes spare the store a second walk over each span: they must be exactly
    what the store would work out, on every kind of value, cut or repeated, and on links."""
    odd = [
        _kv("text", AnyValue(string_value="hello")),
        _kv("accented", AnyValue(string_value="café ☕")),
        _kv("empty", AnyValue(string_value="")),
        _kv("count", AnyValue(int_value=7)),
        _kv("raw", AnyValue(bytes_value=b"\x01\xff")),
        _kv("unset", AnyValue()),
        _kv("tags", AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="ab")]))),
        _kv(
            "nested",
            AnyValue(kvlist_value=KeyValueList(values=[_kv("in", AnyValue(string_value="x"))])),
        ),
        _kv("long", AnyValue(string_value="y" * 50)),
    ]
    repeated = [_kv("a", AnyValue(string_value="first")), _kv("a", AnyValue(int_value=1))]
    event = Span.Event(name="said", time_unix_nano=START + 1, attributes=odd[:3])
    link = Span.Link(trace_id=TRACE, span_id=b"\x00" * 7 + b"\x09")
    spans = [
        _span(attributes=odd, events=[event, Span.Event(name="bare")], links=[link]),
        _span(span_id=b"\x00" * 7 + b"\x03", attributes=repeated),
        _span(span_id=b"\x00" * 7 + b"\x04"),
    ]
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    )
    for limits in (Limits(), Limits(max_attr_chars=10, max_attrs_per_span=3)):
        sizes: list[int] = []
        records, problems = decode_request(request, limits, sizes)
        assert problems == [] and len(records) == 3
        assert sizes == [estimate_size(r) for r in records]


def test_fixture_sizes_worked_out_while_decoding_are_the_stores_estimates() -> None:
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        spans = [s for chunk in read_input(str(path)) for s in chunk.spans]
        request = encode_spans(to_sdk(spans))
        sizes: list[int] = []
        records, _ = decode_request(request, Limits(), sizes)
        assert sizes == [estimate_size(r) for r in records], path.name


def _wire(field: int, body: bytes) -> bytes:
    """One length-delimited protobuf field, written by hand: nesting the classes refuse to build."""
    length = bytearray()
    n = len(body)
    while n > 0x7F:
        length.append((n & 0x7F) | 0x80)
        n >>= 7
    length.append(n)
    return bytes([(field << 3) | 2]) + bytes(length) + body


def _nested_request(levels: int, text: bytes) -> bytes:
    """A request of one span whose attribute `a` holds ``text`` under ``levels`` nested
    key-value lists, each keyed `k`."""
    value = _wire(1, text)  # AnyValue.string_value
    for _ in range(levels):
        value = _wire(6, _wire(1, _wire(1, b"k") + _wire(2, value)))  # AnyValue.kvlist_value
    span = (
        _wire(1, TRACE)
        + _wire(2, bytes(7) + b"\x02")
        + _wire(5, b"execute_tool read")
        + _wire(9, _wire(1, b"a") + _wire(2, value))
    )
    return _wire(1, _wire(2, _wire(2, span)))  # resource_spans / scope_spans / spans


def test_a_string_that_is_not_utf8_is_read_with_u_fffd_however_deep_it_sits() -> None:
    records, problems = decode_request(parse_request(_nested_request(30, b"ok\xffok")))
    assert problems == []
    (record,) = records
    value = record.attributes["a"]
    for _ in range(30):
        value = value["k"]
    assert value == "ok\ufffdok"


def test_a_request_nested_deeper_than_protobuf_reads_is_refused_in_bounded_memory() -> None:
    # The runtime refuses more than 100 levels; trying again with repaired strings must not
    # copy the body at every level on the way down (gigabytes for one such request).
    data = _nested_request(150, b"x" * 2_000_000 + b"\xff")
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="not a valid OTLP ExportTraceServiceRequest"):
            parse_request(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * len(data)
