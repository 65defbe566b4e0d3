"""Fuzzing (bounded in time): the decoders either decode or say `BadRequest`; the HTTP endpoint
answers 200/400/413 and stays up."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanjudge.sidecar.config import InputConfig
from spanjudge.sidecar.intake import BadRequest, decode_body
from spanjudge.spans.limits import Limits
from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.raw_requests import MIXED, healthy, post

LIMITS = Limits()
CHECKS = InputConfig(max_request_bytes=256 * 1024)
FAST = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=30,
)
otlp_keys = st.sampled_from(
    [
        "resourceSpans",
        "scopeSpans",
        "spans",
        "traceId",
        "spanId",
        "parentSpanId",
        "attributes",
        "key",
        "value",
        "stringValue",
        "intValue",
        "arrayValue",
        "kvlistValue",
        "values",
        "events",
        "links",
        "status",
        "code",
        "kind",
        "startTimeUnixNano",
        "endTimeUnixNano",
        "resource",
        "bytesValue",
        "doubleValue",
        "timeUnixNano",
        "scope",
        "name",
    ]
)
otlp_like = st.recursive(
    st.none()
    | st.integers()
    | st.text(max_size=34)
    | st.sampled_from(
        [
            "0af7651916cd43dd8448eb211c80319c",
            "00f067aa0ba902b7",
            "AAAAAAAAAAA=",
            "1700000000000000000",
        ]
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(otlp_keys, inner, max_size=5),
    max_leaves=40,
)


HEX_TRACE_ID = re.compile(r"[0-9a-f]{32}")
HEX_SPAN_ID = re.compile(r"[0-9a-f]{16}")


def _decodes_or_refuses(body: bytes, fmt: str) -> None:
    try:
        decoded = decode_body(body, fmt, LIMITS, CHECKS)
    except BadRequest as exc:
        assert exc.message
        return
    # What is accepted is normalised (ids once, to lowercase hex); what is not says why.
    for record in decoded.records:
        assert HEX_TRACE_ID.fullmatch(record.trace_id) and HEX_SPAN_ID.fullmatch(record.span_id)
        assert record.parent_span_id is None or HEX_SPAN_ID.fullmatch(record.parent_span_id)
    assert all(str(problem) for problem in decoded.problems)


@FAST
@given(st.binary(max_size=2048))
def test_protobuf_decoder_on_random_bytes(data: bytes) -> None:
    _decodes_or_refuses(data, "pb")


@FAST
@given(st.data())
def test_protobuf_decoder_on_mutated_requests(data: st.DataObject) -> None:
    body = bytearray(MIXED)
    for _ in range(data.draw(st.integers(1, 8))):
        position = data.draw(st.integers(0, len(body) - 1))
        body[position] = data.draw(st.integers(0, 255))
    _decodes_or_refuses(bytes(body), "pb")


@FAST
@given(st.one_of(json_values, otlp_like))
def test_json_decoder_on_random_documents(doc: Any) -> None:
    _decodes_or_refuses(json.dumps(doc).encode(), "json")


@FAST
@given(st.binary(max_size=512))
def test_json_decoder_on_random_bytes(data: bytes) -> None:
    _decodes_or_refuses(data, "json")


def test_http_endpoint_survives_fuzzing(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar(input={"max_request_bytes": 64 * 1024})
    started = time.monotonic()

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        st.one_of(
            st.binary(max_size=1024).map(lambda b: (b, "application/x-protobuf")),
            otlp_like.map(lambda d: (json.dumps(d).encode(), "application/json")),
        )
    )
    def post_one(case: tuple[bytes, str]) -> None:
        if time.monotonic() - started > 60:  # bounded in time, whatever hypothesis wants
            return
        status, _, _ = post(sidecar, *case)
        assert status in (200, 400, 413)

    post_one()
    assert healthy(sidecar)
