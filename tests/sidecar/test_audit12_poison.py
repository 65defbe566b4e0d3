"""Audit of issue 12 item 3: a lone surrogate must not reach /metrics through any JSON encoding
that the receiver accepts (json.loads takes UTF-16 and UTF-32 bodies too)."""

from __future__ import annotations

import http.client
import urllib.request

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import VerdictServer, synthetic_session, wait_for

pytestmark = pytest.mark.slow


def _scrape(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-32"])
def test_lone_surrogate_in_a_non_utf8_json_body_never_breaks_metrics(
    make_sidecar: MakeSidecar, encoding: str
) -> None:
    verdicts = VerdictServer()
    sidecar = None
    try:
        sidecar = make_sidecar(
            sessions={"idle_timeout_s": 60, "end_grace_s": 0.1},
            metrics_endpoint="127.0.0.1:0",
            export={"enabled": True, "endpoint": verdicts.endpoint, "insecure": True},
        )
        assert sidecar.http is not None and sidecar.endpoints is not None
        metrics_port = int(sidecar.endpoints.metrics.rpartition(":")[2])  # type: ignore[union-attr]
        document = json_format.MessageToJson(encode_spans(synthetic_session("wide")))
        body = document.replace('"bench-agent"', '"bench\\ud800agent"').encode(encoding)
        conn = http.client.HTTPConnection("127.0.0.1", sidecar.http.port, timeout=30)
        conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        conn.close()
        if response.status == 200:  # accepted: its strings must have been made valid
            assert wait_for(lambda: "wide" in verdicts.received.sessions(), 20)
            assert wait_for(lambda: "bench" in _scrape(metrics_port)[1], 10)
        else:  # or refused as input that can never succeed
            assert response.status == 400
        for _ in range(2):
            assert _scrape(metrics_port)[0] == 200
    finally:
        if sidecar is not None:
            sidecar.stop()
        verdicts.stop()
