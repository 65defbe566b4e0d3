"""Bad input on both receivers: clear statuses, OTLP partial success, counted, process alive."""

from __future__ import annotations

import gzip
import http.client
import json

import grpc
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)

from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import wait_for
from tests.sidecar.raw_requests import (
    MIXED,
    NOW,
    TRACE,
    grpc_call,
    healthy,
    kv,
    post,
    request,
    span,
)


def test_partial_success_over_http_and_grpc(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar()
    status, _, body = post(sidecar, MIXED)
    assert status == 200
    response = ExportTraceServiceResponse.FromString(body)
    assert response.partial_success.rejected_spans == 6
    message = response.partial_success.error_message
    assert "spanId must be 8 bytes, got 3" in message
    assert "traceId must be 16 bytes, got 15" in message
    assert "cyclic parents" in message
    assert "not plausible" in message
    code, grpc_response = grpc_call(sidecar, MIXED)
    assert code == grpc.StatusCode.OK
    assert grpc_response.partial_success.rejected_spans == 6
    # the good span of each request reached its session (the same span twice: one span)
    assert wait_for(lambda: "bad-input" in sidecar.worker.store.open)
    assert len(sidecar.worker.store.open["bad-input"].spans) == 1


@pytest.mark.parametrize(
    ("body", "content_type", "needle"),
    [
        (b"\xff\xff\xff\xff garbage", "application/x-protobuf", "not a valid OTLP"),
        (b"{not json", "application/json", "not valid JSON"),
        (b"[" * 100_000, "application/json", ""),
        (b'{"resourceSpans": [42]}', "application/json", ""),
        (request(span(b"\x02" * 3)), "application/x-protobuf", "every span was rejected"),
    ],
    # named, not by their bytes: the last body holds the time it was built (pytest-xdist's
    # workers each collect the tests and must agree on their names)
    ids=["protobuf-garbage", "json-garbage", "json-deep", "json-wrong-type", "no-valid-span"],
)
def test_malformed_bodies_get_400_with_a_message(
    make_sidecar: MakeSidecar, body: bytes, content_type: str, needle: str
) -> None:
    sidecar = make_sidecar()
    status, _, data = post(sidecar, body, content_type)
    assert status == 400
    if content_type == "application/json":
        message = json.loads(data)["message"]
    else:
        message = status_pb2.Status.FromString(data).message
    assert needle in message and message
    assert sidecar.handler.counts["invalid"] == 1
    assert healthy(sidecar)


def test_malformed_protobuf_over_grpc_is_invalid_argument(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar()
    code, details = grpc_call(sidecar, b"\x0a\xff\xff\xff\xff\x0f")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid OTLP" in details
    assert healthy(sidecar)


def test_oversized_and_gzip_bombs_are_refused(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar(input={"max_request_bytes": 64 * 1024})
    big = request(span(b"\x01" * 8, note="x" * 100_000))
    status, _, _ = post(sidecar, big)
    assert status == 413
    bomb = gzip.compress(b"\x00" * 10_000_000)  # 10 MB of zeros in ~10 kB
    status, _, data = post(sidecar, bomb, Content_Encoding="gzip")
    assert status == 413
    assert b"decompressed request exceeds" in data
    code, details = grpc_call(sidecar, big)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "exceeds the limit" in details
    assert healthy(sidecar)


def test_attribute_bomb_is_capped_not_fatal(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar()
    bomb = span(b"\x01" * 8)
    bomb.attributes.extend(kv(f"k{i}", "v" * 10) for i in range(5_000))
    bomb.attributes.append(kv("huge", "y" * 1_000_000))
    status, _, _ = post(sidecar, request(bomb, session="bomb"))
    assert status == 200
    assert wait_for(lambda: "bomb" in sidecar.worker.store.open)
    record = sidecar.worker.store.open["bomb"].spans[0]
    assert len(record.attributes) == 512  # Limits.max_attrs_per_span
    assert record.truncated > 0


def test_json_request_in_collector_file_spelling(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar()
    doc = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "session.id", "value": {"stringValue": "json-1"}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": TRACE.hex(),
                                "spanId": "00f067aa0ba902b7",
                                "name": "invoke_agent a",
                                "startTimeUnixNano": str(NOW),
                                "endTimeUnixNano": str(NOW + 5),
                            },
                            {"traceId": TRACE.hex(), "spanId": "abc", "name": "broken"},
                        ]
                    }
                ],
            }
        ]
    }
    status, headers, data = post(sidecar, json.dumps(doc).encode(), "application/json")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert json.loads(data)["partialSuccess"]["rejectedSpans"] == "1"
    assert wait_for(lambda: "json-1" in sidecar.worker.store.open)


def test_wrong_content_type_and_path(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar()
    assert post(sidecar, b"x", "text/plain")[0] == 415
    assert sidecar.http is not None
    conn = http.client.HTTPConnection("127.0.0.1", sidecar.http.port, timeout=5)
    conn.request("POST", "/v1/metrics", body=b"", headers={"Content-Length": "0"})
    assert conn.getresponse().status == 404
    conn.close()


def test_full_spool_answers_retryable(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar(spool={"max_bytes": 1024})
    first = request(span(b"\x01" * 8, note="a" * 2000), session="open-1")
    assert post(sidecar, first)[0] == 200  # an empty spool always takes one request
    second = request(span(b"\x02" * 8), session="open-2")
    status, headers, data = post(sidecar, second)
    assert status == 503
    assert headers["Retry-After"] == "2"
    assert "spool full" in status_pb2.Status.FromString(data).message
    code, _ = grpc_call(sidecar, second)
    assert code == grpc.StatusCode.UNAVAILABLE
    assert sidecar.handler.counts["unavailable"] == 2
    assert "open-2" not in sidecar.worker.store.open  # refused, not accepted and dropped
