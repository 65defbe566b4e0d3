"""Raw OTLP requests for the bad-input tests: spans with chosen ids and times, posted as-is."""

from __future__ import annotations

import http.client
import time
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from spanjudge.sidecar.server import Sidecar

NOW = time.time_ns()
TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def span(
    span_id: bytes, *, parent: bytes = b"", trace: bytes = TRACE, start: int = NOW, **attrs: str
) -> Span:
    return Span(
        trace_id=trace,
        span_id=span_id,
        parent_span_id=parent,
        name="execute_tool read_file",
        start_time_unix_nano=start,
        end_time_unix_nano=start + 1_000_000,
        attributes=[kv(k.replace("_", "."), v) for k, v in attrs.items()],
    )


def request(*spans: Span, session: str = "bad-input") -> bytes:
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource={"attributes": [kv("session.id", session)]},
                scope_spans=[ScopeSpans(spans=list(spans))],
            )
        ]
    ).SerializeToString()


def post(
    sidecar: Sidecar,
    body: bytes,
    content_type: str = "application/x-protobuf",
    *,
    path: str = "/v1/traces",
    **headers: str,
) -> tuple[int, dict[str, str], bytes]:
    assert sidecar.http is not None
    conn = http.client.HTTPConnection("127.0.0.1", sidecar.http.port, timeout=10)
    conn.request(
        "POST",
        path,
        body=body,
        headers={
            "Content-Type": content_type,
            **{k.replace("_", "-"): v for k, v in headers.items()},
        },
    )
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), data


def grpc_call(
    sidecar: Sidecar,
    body: bytes,
    metadata: Any = None,
    *,
    method: str = EXPORT,
    response: Any = ExportTraceServiceResponse,
) -> tuple[grpc.StatusCode, Any]:
    """Call ``method`` with a raw ``body``: (OK, the decoded ``response``) or (code, details)."""
    assert sidecar.grpc is not None
    with grpc.insecure_channel(f"127.0.0.1:{sidecar.grpc.port}") as channel:
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        try:
            raw = call(body, timeout=10, metadata=metadata)
        except grpc.RpcError as exc:
            return exc.code(), exc.details()
        return grpc.StatusCode.OK, response.FromString(raw)


def healthy(sidecar: Sidecar) -> bool:
    assert sidecar.http is not None
    conn = http.client.HTTPConnection("127.0.0.1", sidecar.http.port, timeout=5)
    conn.request("GET", "/healthz")
    ok = conn.getresponse().status == 200
    conn.close()
    return ok


MIXED = request(
    span(b"\x01" * 8),  # the one good span
    span(b"\x02" * 3),  # wrong-length span id
    span(b"\x03" * 8, trace=b"\x04" * 15),  # wrong-length trace id
    span(b"\x05" * 8, parent=b"\x06" * 8),  # these two are each other's parent
    span(b"\x06" * 8, parent=b"\x05" * 8),
    span(b"\x07" * 8, start=1),  # 1970
    span(b"\x08" * 8, start=NOW + 200 * 365 * 86400 * 10**9),  # two centuries ahead
)
