"""The three span adapters agree on the same real SDK spans, in both OTLP JSON spellings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from spanjudge.errors import InputError
from spanjudge.spans.files import read_input
from spanjudge.spans.otlp_json import (
    decode_json_document,
    request_to_json_line,
    sdk_spans_to_request,
)
from spanjudge.spans.otlp_proto import decode_request
from spanjudge.spans.sdk import span_from_sdk
from tests.conftest import recorded


def _agent(tracer):  # type: ignore[no-untyped-def]
    with (
        tracer.start_as_current_span(
            "invoke_agent shop",
            attributes={"session.id": "s-1", "gen_ai.operation.name": "invoke_agent"},
        ) as root,
        tracer.start_as_current_span(
            "execute_tool read_csv",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.tool.name": "read_csv",
                "count": 3,
                "ratio": 0.5,
                "ok": True,
                "tags": ["a", "b"],
            },
            links=[Link(root.get_span_context())],
        ) as tool,
    ):
        tool.add_event("gen_ai.tool.message", {"content": "rows: 3"})
        tool.set_status(Status(StatusCode.ERROR, "disk on fire"))


@pytest.fixture
def sdk_spans():  # type: ignore[no-untyped-def]
    return recorded(_agent, resource={"service.name": "shop", "session.id": "res-session"})


def _key(records):  # type: ignore[no-untyped-def]
    return sorted(records, key=lambda r: r.span_id)


def test_collector_json_spelling_matches_sdk(sdk_spans):  # type: ignore[no-untyped-def]
    line = request_to_json_line(sdk_spans_to_request(sdk_spans))
    doc = json.loads(line)
    first = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(first["traceId"]) == 32 and first["traceId"] == first["traceId"].lower()
    assert isinstance(first["kind"], int)
    records, problems = decode_json_document(doc)
    assert problems == []
    assert _key(records) == _key([span_from_sdk(s) for s in sdk_spans])


def test_protobuf_json_mapping_spelling_matches_sdk(sdk_spans):  # type: ignore[no-untyped-def]
    doc = json.loads(json_format.MessageToJson(sdk_spans_to_request(sdk_spans)))
    tool = next(s for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"] if "tool" in s["name"])
    assert tool["kind"] == "SPAN_KIND_CLIENT" and tool["status"]["code"] == "STATUS_CODE_ERROR"
    assert len(tool["spanId"]) == 12  # base64 of 8 bytes
    records, problems = decode_json_document(doc)
    assert problems == []
    assert _key(records) == _key([span_from_sdk(s) for s in sdk_spans])


def test_protobuf_matches_sdk(sdk_spans):  # type: ignore[no-untyped-def]
    request = sdk_spans_to_request(sdk_spans)
    records, problems = decode_request(request)
    assert problems == []
    assert _key(records) == _key([span_from_sdk(s) for s in sdk_spans])
    tool = next(r for r in records if r.name.startswith("execute_tool"))
    assert tool.kind == "client"
    assert tool.status == "error" and tool.status_message == "disk on fire"
    assert tool.attributes["tags"] == ("a", "b") and tool.attributes["count"] == 3
    assert tool.events[0].attributes == {"content": "rows: 3"}
    assert tool.links[0].span_id == tool.parent_span_id
    assert tool.resource["session.id"] == "res-session"


def _line_with(tmp_path: Path, sdk_spans, mutate) -> Path:  # type: ignore[no-untyped-def]
    doc = json.loads(request_to_json_line(sdk_spans_to_request(sdk_spans)))
    mutate(doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1])
    path = tmp_path / "bad.jsonl"
    good = request_to_json_line(sdk_spans_to_request(sdk_spans))
    path.write_text(good + "\n" + json.dumps(doc) + "\n")
    return path


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda s: s.update(spanId="abc123"), "spanId", "16 hex characters"),
        (lambda s: s.update(traceId="00" * 15), "traceId", "32 hex characters"),
        (lambda s: s.pop("spanId"), "spanId", "missing"),
        (lambda s: s.update(kind=9), "kind", "unknown enum value 9"),
        (lambda s: s.update(status={"code": "STATUS_CODE_MAYBE"}), "status.code", "unknown enum"),
        (lambda s: s.update(startTimeUnixNano="soon"), "startTimeUnixNano", "expected an integer"),
        (lambda s: s.update(endTimeUnixNano="1"), "endTimeUnixNano", "is before startTimeUnixNano"),
    ],
)
def test_bad_span_fields_name_file_line_and_field(tmp_path, sdk_spans, mutate, field, words):  # type: ignore[no-untyped-def]
    path = _line_with(tmp_path, sdk_spans, mutate)
    chunks = list(read_input(str(path)))
    assert chunks[0].problems == []
    problems = chunks[1].problems
    assert len(problems) == 1
    assert chunks[1].line == 2
    assert problems[0].path.endswith(f"spans[1].{field}")
    assert words in problems[0].message
    # the other span on the bad line is still decoded, not lost
    assert len(chunks[1].spans) == 1


def test_truncated_line_is_an_input_error(tmp_path, sdk_spans):  # type: ignore[no-untyped-def]
    good = request_to_json_line(sdk_spans_to_request(sdk_spans))
    path = tmp_path / "cut.jsonl"
    path.write_text(good + "\n" + good[: len(good) // 2] + "\n")
    with pytest.raises(InputError) as info:
        list(read_input(str(path)))
    assert info.value.file == str(path) and info.value.line == 2
    assert "the line looks truncated" in str(info.value)


def test_missing_file(tmp_path):  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="no such file"):
        list(read_input(str(tmp_path / "nope.jsonl")))


def test_protobuf_file_single_and_length_prefixed(tmp_path, sdk_spans):  # type: ignore[no-untyped-def]
    data = sdk_spans_to_request(sdk_spans).SerializeToString()
    single = tmp_path / "one.pb"
    single.write_bytes(data)
    framed = tmp_path / "framed.pb"
    framed.write_bytes(len(data).to_bytes(4, "big") + data + len(data).to_bytes(4, "big") + data)
    assert sum(len(c.spans) for c in read_input(str(single))) == 2
    assert sum(len(c.spans) for c in read_input(str(framed))) == 4


def test_huge_attribute_is_truncated_not_dropped(tmp_path):  # type: ignore[no-untyped-def]
    from spanjudge.spans.limits import Limits

    def body(tracer):  # type: ignore[no-untyped-def]
        with tracer.start_as_current_span("big", attributes={"output.value": "x" * 5000}):
            pass

    spans = recorded(body)
    records, _ = decode_request(sdk_spans_to_request(spans), Limits(max_attr_chars=100))
    value = records[0].attributes["output.value"]
    assert isinstance(value, str) and value.startswith("x" * 100) and "truncated" in value
    assert records[0].truncated == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "resourceSpans",
                    "scopeSpans",
                    "spans",
                    "traceId",
                    "spanId",
                    "attributes",
                    "key",
                    "value",
                    "stringValue",
                    "events",
                    "links",
                    "status",
                    "kind",
                    "resource",
                    "scope",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_json_decoder_reports_problems_and_never_raises(doc):  # type: ignore[no-untyped-def]
    records, problems = decode_json_document(doc)
    assert all(p.path is not None and p.message for p in problems)
    assert all(len(r.trace_id) == 32 and len(r.span_id) == 16 for r in records)


def test_gzip_pretty_printed_bom_and_protobuf_gz_inputs(tmp_path, sdk_spans):  # type: ignore[no-untyped-def]
    import gzip

    line = request_to_json_line(sdk_spans_to_request(sdk_spans))
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress((line + "\n").encode()))
    (tmp_path / "pretty.json").write_text(json.dumps(json.loads(line), indent=2))
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + line.encode() + b"\n")
    data = sdk_spans_to_request(sdk_spans).SerializeToString()
    (tmp_path / "a.pb.gz").write_bytes(gzip.compress(data))
    for name in ("a.jsonl.gz", "pretty.json", "bom.jsonl", "a.pb.gz"):
        chunks = list(read_input(str(tmp_path / name)))
        assert sum(len(c.spans) for c in chunks) == 2, name
        assert all(c.problems == [] for c in chunks), name


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"garbage", "cannot read: Not a gzipped file"),
        (None, "cannot read: Compressed file ended before the end-of-stream marker"),
    ],
)
def test_corrupt_gzip_is_an_input_error(tmp_path, sdk_spans, content, words):  # type: ignore[no-untyped-def]
    import gzip

    if content is None:
        line = request_to_json_line(sdk_spans_to_request(sdk_spans))
        content = gzip.compress((line + "\n").encode())[:-20]
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        list(read_input(str(path)))
    assert words in str(info.value) and info.value.file == str(path)
