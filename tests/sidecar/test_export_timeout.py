"""A slow but working verdict endpoint (each call takes longer than `serve.export.timeout_s`) gets
each session's verdicts once, after the first call: the export time follows its latency, so a
call it was about to answer is not cut and sent again. An endpoint that is down (refusing
connections, or leaving them unanswered) keeps the configured time, though its calls use all of
it too."""

from __future__ import annotations

import logging
import socket
import time
from concurrent import futures
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.resources import Resource

from spanjudge.sidecar.config import ExportConfig
from spanjudge.sidecar.export import build_verdict_export
from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import synthetic_session, wait_for
from tests.sidecar.raw_requests import grpc_call
from tests.support.load import Verdicts

pytestmark = pytest.mark.slow
LATENCY_S = 1.5
TIMEOUT_S = 1.0
SESSIONS = 4


class _Slow(Verdicts):
    """Takes every call, answering each after ``LATENCY_S`` (what it received counts even when
    the caller gave up waiting, as with a real endpoint)."""

    def Export(self, request: Any, context: Any) -> Any:
        answer = super().Export(request, context)
        time.sleep(LATENCY_S)
        return answer


def test_a_slow_endpoint_gets_each_sessions_verdicts_once(make_sidecar: MakeSidecar) -> None:
    received = _Slow()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(received, server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(received, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        sidecar = make_sidecar(
            sessions={"idle_timeout_s": 60, "end_grace_s": 0},
            export={
                "enabled": True,
                "endpoint": f"http://127.0.0.1:{port}",
                "insecure": True,
                "timeout_s": TIMEOUT_S,
            },
        )
        for i in range(SESSIONS):  # one at a time: each its own export calls
            session = f"slow-{i}"
            body = encode_spans(synthetic_session(session)).SerializeToString()
            assert grpc_call(sidecar, body)[0] == grpc.StatusCode.OK
            assert wait_for(lambda s=session: s in received.logs, 60), received.spans
        with received.lock:
            spans, logs = dict(received.spans), dict(received.logs)
        assert set(spans) == {f"slow-{i}" for i in range(SESSIONS)}
        # only the first call, cut at the configured timeout, was sent twice
        twice = {sid for sid, n in spans.items() if n > 1}
        assert twice <= {"slow-0"} and max(spans.values()) <= 2, spans
        per_session = {sid: n for sid, n in logs.items()}
        assert len(set(per_session.values())) == 1, per_session  # no log record sent twice
    finally:
        server.stop(0)


def _export_calls(endpoint: str, calls: int, caplog: pytest.LogCaptureFixture) -> list[float]:
    """Seconds each of ``calls`` export calls (timeout 1 s) took; none of them is accepted."""
    export = build_verdict_export(
        ExportConfig(enabled=True, endpoint=endpoint, protocol="grpc", insecure=True, timeout_s=1),
        Resource.create({}),
    )
    assert export.spans is not None
    took = []
    try:
        with caplog.at_level(logging.INFO, logger="spanjudge.sidecar"):
            for i in range(calls):
                export.spans.add([Span(name=f"verdict-{i}").SerializeToString()])
                started = time.monotonic()
                assert not export.spans.flush()
                took.append(time.monotonic() - started)
    finally:
        export.abort()
    return took


def test_an_endpoint_taking_no_connections_keeps_the_configured_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A listening socket whose accept queue is full and never drained: connections to it go
    # unanswered, and every export call runs until its time is out.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    queued = []
    for _ in range(3):
        client = socket.socket()
        client.setblocking(False)
        client.connect_ex(("127.0.0.1", port))
        queued.append(client)
    try:
        took = _export_calls(f"http://127.0.0.1:{port}", 3, caplog)
    finally:
        for sock in (*queued, server):
            sock.close()
    # the calls do not get longer (a doubled time would make them 1, 2, then 4 s)
    assert took[0] >= 0.9 and max(took) < took[0] + 0.5, took
    assert "calls now get" not in caplog.text


def test_a_refusing_endpoint_keeps_the_configured_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: connections are refused
    took = _export_calls(f"http://127.0.0.1:{port}", 3, caplog)
    assert max(took) < 1.8, took
    assert "calls now get" not in caplog.text
