"""TLS, mutual TLS and bearer tokens on both receivers, with certificates made for the test."""

from __future__ import annotations

import http.client
import ssl
from pathlib import Path

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.sidecar.server import Sidecar
from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import Certs, make_certs, synthetic_session, wait_for

TOKEN = "s3cret-token"
GOOD = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path)


@pytest.fixture
def secure(make_sidecar: MakeSidecar, certs: Certs, monkeypatch: pytest.MonkeyPatch) -> Sidecar:
    # requests lets these variables override the exporter's own CA file (session.verify)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    return make_sidecar(
        tls={
            "cert_file": str(certs.server_cert),
            "key_file": str(certs.server_key),
            "client_ca_file": str(certs.ca),
        },
        auth={"bearer_token": TOKEN},
    )


def _grpc_exporter(
    sidecar: Sidecar, certs: Certs, *, client_cert: bool, headers: dict[str, str]
) -> GrpcExporter:
    assert sidecar.grpc is not None
    credentials = grpc.ssl_channel_credentials(
        root_certificates=certs.ca.read_bytes(),
        private_key=certs.client_key.read_bytes() if client_cert else None,
        certificate_chain=certs.client_cert.read_bytes() if client_cert else None,
    )
    return GrpcExporter(
        endpoint=f"localhost:{sidecar.grpc.port}",
        credentials=credentials,
        headers=headers,
        timeout=3,
    )


def _http_exporter(
    sidecar: Sidecar, certs: Certs, *, client_cert: bool, headers: dict[str, str]
) -> HttpExporter:
    assert sidecar.http is not None
    return HttpExporter(
        endpoint=f"https://localhost:{sidecar.http.port}/v1/traces",
        certificate_file=str(certs.ca),
        client_key_file=str(certs.client_key) if client_cert else None,
        client_certificate_file=str(certs.client_cert) if client_cert else None,
        headers=headers,
        timeout=3,
    )


@pytest.mark.parametrize("make_exporter", [_grpc_exporter, _http_exporter])
def test_mutual_tls_with_token_is_accepted(
    secure: Sidecar, certs: Certs, make_exporter: object
) -> None:
    exporter = make_exporter(secure, certs, client_cert=True, headers=GOOD)  # type: ignore[operator]
    assert exporter.export(synthetic_session("tls-ok", end=False)) == SpanExportResult.SUCCESS
    exporter.shutdown()
    assert wait_for(lambda: "tls-ok" in secure.worker.store.open)


@pytest.mark.parametrize("make_exporter", [_grpc_exporter, _http_exporter])
def test_wrong_token_and_missing_client_certificate_are_rejected(
    secure: Sidecar, certs: Certs, make_exporter: object
) -> None:
    spans = synthetic_session("tls-bad", end=False)
    wrong = make_exporter(  # type: ignore[operator]
        secure, certs, client_cert=True, headers={"authorization": "Bearer nope"}
    )
    assert wrong.export(spans) == SpanExportResult.FAILURE
    wrong.shutdown()
    no_cert = make_exporter(secure, certs, client_cert=False, headers=GOOD)  # type: ignore[operator]
    assert no_cert.export(spans) == SpanExportResult.FAILURE
    no_cert.shutdown()
    assert "tls-bad" not in secure.worker.store.open
    assert secure.handler.counts.get("unauthenticated") == 1


def test_status_codes_for_unauthenticated_calls(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar(auth={"bearer_token": TOKEN})
    assert sidecar.grpc is not None and sidecar.http is not None
    with grpc.insecure_channel(f"127.0.0.1:{sidecar.grpc.port}") as channel:
        call = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=None,
            response_deserializer=None,
        )
        with pytest.raises(grpc.RpcError) as info:
            call(b"", timeout=5)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert call(b"", timeout=5, metadata=tuple(GOOD.items())) == b""  # empty request: OK
    conn = http.client.HTTPConnection("127.0.0.1", sidecar.http.port, timeout=5)
    conn.request("POST", "/v1/traces", body=b"", headers={"Content-Type": "application/x-protobuf"})
    response = conn.getresponse()
    assert response.status == 401
    assert response.getheader("WWW-Authenticate") == "Bearer"
    conn.close()


def test_plain_http_client_cannot_talk_to_tls_receiver(secure: Sidecar, certs: Certs) -> None:
    assert secure.http is not None
    context = ssl.create_default_context(cafile=str(certs.ca))  # no client certificate
    conn = http.client.HTTPSConnection("localhost", secure.http.port, timeout=5, context=context)
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
        conn.request("GET", "/healthz", headers=GOOD)
        conn.getresponse()
    conn.close()


EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _grpc_code(sidecar: Sidecar, metadata: tuple[tuple[str, str], ...]) -> grpc.StatusCode:
    assert sidecar.grpc is not None
    with grpc.insecure_channel(f"127.0.0.1:{sidecar.grpc.port}") as channel:
        try:
            channel.unary_unary(EXPORT)(b"", timeout=5, metadata=metadata)
        except grpc.RpcError as exc:
            return exc.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def _http_status(sidecar: Sidecar, authorization: list[str]) -> int:
    assert sidecar.http is not None
    conn = http.client.HTTPConnection("127.0.0.1", sidecar.http.port, timeout=5)
    conn.putrequest("POST", "/v1/traces")
    conn.putheader("Content-Type", "application/x-protobuf")
    conn.putheader("Content-Length", "0")
    for value in authorization:
        conn.putheader("Authorization", value)
    conn.endheaders()
    status = conn.getresponse().status
    conn.close()
    return status


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer"])
def test_bearer_scheme_in_any_case_on_both_receivers(
    make_sidecar: MakeSidecar, scheme: str
) -> None:
    sidecar = make_sidecar(auth={"bearer_token": TOKEN})
    value = f"{scheme} {TOKEN}"
    assert _grpc_code(sidecar, (("authorization", value),)) == grpc.StatusCode.OK
    assert _http_status(sidecar, [value]) == 200


@pytest.mark.parametrize("order", ["good_first", "good_last"])
def test_duplicate_authorization_is_refused_on_both_receivers(
    make_sidecar: MakeSidecar, order: str
) -> None:
    sidecar = make_sidecar(auth={"bearer_token": TOKEN})
    values = [f"Bearer {TOKEN}", "Bearer nope"]
    if order == "good_last":
        values.reverse()
    metadata = tuple(("authorization", v) for v in values)
    assert _grpc_code(sidecar, metadata) == grpc.StatusCode.UNAUTHENTICATED
    assert _http_status(sidecar, values) == 401


def test_metrics_over_tls_behind_the_token(make_sidecar: MakeSidecar, certs: Certs) -> None:
    sidecar = make_sidecar(
        metrics_endpoint="127.0.0.1:0",
        tls={"cert_file": str(certs.server_cert), "key_file": str(certs.server_key)},
        auth={"bearer_token": TOKEN},
    )
    assert sidecar.endpoints is not None and sidecar.endpoints.metrics is not None
    port = int(sidecar.endpoints.metrics.rpartition(":")[2])
    context = ssl.create_default_context(cafile=str(certs.ca))

    def scrape(headers: dict[str, str]) -> tuple[int, str]:
        conn = http.client.HTTPSConnection("localhost", port, timeout=5, context=context)
        conn.request("GET", "/metrics", headers=headers)
        response = conn.getresponse()
        body = response.read().decode()
        conn.close()
        return response.status, body

    status, body = scrape({"Authorization": f"Bearer {TOKEN}"})
    assert status == 200
    assert "spanjudge_sidecar_pending_spans" in body
    assert scrape({})[0] == 401
    assert scrape({"Authorization": "Bearer nope"})[0] == 401
    plain = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    with pytest.raises(
        (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine)
    ):
        plain.request("GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        plain.getresponse()
    plain.close()
    # /healthz stays open on the receiver (over its TLS), for probes without the token
    assert sidecar.http is not None
    conn = http.client.HTTPSConnection("localhost", sidecar.http.port, timeout=5, context=context)
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200
    conn.close()
