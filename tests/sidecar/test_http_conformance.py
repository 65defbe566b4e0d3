"""OTLP/HTTP details a generic client relies on: empty requests succeed, an unsupported
Content-Type gets 415, the wrong method 405 with `Allow`, `HEAD /healthz` works, and the
`Server` header carries the version."""

from __future__ import annotations

import http.client
import importlib.metadata
import json

import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from spanjudge.sidecar.server import Sidecar
from tests.sidecar.conftest import MakeSidecar


def call(
    sidecar: Sidecar,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    assert sidecar.http is not None
    conn = http.client.HTTPConnection("127.0.0.1", sidecar.http.port, timeout=10)
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), data


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"{}", "application/json"),
        (b'{"resourceSpans": []}', "application/json"),
        (b'{"resourceSpans": null, "someFutureField": 1}', "application/json"),
        (b"", "application/x-protobuf"),
        (ExportTraceServiceRequest().SerializeToString(), "application/x-protobuf"),
    ],
)
def test_empty_request_is_a_success(
    make_sidecar: MakeSidecar, body: bytes, content_type: str
) -> None:
    sidecar = make_sidecar()
    status, headers, data = call(
        sidecar, "POST", "/v1/traces", body, {"Content-Type": content_type}
    )
    assert status == 200, data
    assert headers["Content-Type"] == content_type
    if content_type == "application/json":
        assert json.loads(data) == {}  # an ExportTraceServiceResponse with nothing set
    else:
        response = ExportTraceServiceResponse.FromString(data)
        assert not response.HasField("partial_success")
    assert sidecar.handler.counts == {"ok": 1}
    assert sidecar.worker.spool.requests == 0  # nothing to spool


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", None])
def test_unsupported_content_type_is_415(
    make_sidecar: MakeSidecar, content_type: str | None
) -> None:
    sidecar = make_sidecar()
    headers = {"Content-Type": content_type} if content_type else {}
    status, response_headers, data = call(sidecar, "POST", "/v1/traces", b"{}", headers)
    assert status == 415
    # OTLP/HTTP: every 4xx body is a protobuf google.rpc.Status
    assert response_headers["Content-Type"] == "application/x-protobuf"
    message = status_pb2.Status.FromString(data).message
    assert "application/x-protobuf" in message and "application/json" in message
    assert repr(content_type or "(none)") in message


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "GET"])
def test_wrong_method_on_traces_is_405_with_allow(make_sidecar: MakeSidecar, method: str) -> None:
    sidecar = make_sidecar()
    status, headers, data = call(sidecar, method, "/v1/traces", b"{}" if method != "GET" else None)
    assert status == 405
    assert headers["Allow"] == "POST"
    assert headers["Content-Type"] == "text/plain"
    assert b"<html" not in data.lower() and method.encode() in data
    # the connection stays usable: a POST right after still works
    assert (
        call(sidecar, "POST", "/v1/traces", b"{}", {"Content-Type": "application/json"})[0] == 200
    )


def test_head_healthz_has_no_body_and_other_paths_404(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar()
    status, headers, data = call(sidecar, "HEAD", "/healthz")
    assert status == 200 and data == b""
    assert headers["Content-Length"] == "3"  # what GET would send: "ok\n"
    assert call(sidecar, "GET", "/healthz")[2] == b"ok\n"
    status, headers, _ = call(sidecar, "DELETE", "/healthz")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    assert call(sidecar, "PUT", "/elsewhere", b"x")[0] == 404
    assert call(sidecar, "HEAD", "/v1/traces")[0] == 405


def test_server_header_names_the_version(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar()
    _, headers, _ = call(sidecar, "GET", "/healthz")
    version = importlib.metadata.version("spanjudge")
    assert version
    assert headers["Server"] == f"spanjudge/{version}"
