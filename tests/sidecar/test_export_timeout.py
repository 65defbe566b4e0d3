"""A slow but working verdict endpoint (each call takes longer than `serve.export.timeout_s`) gets
each session's verdicts once, after the first call: the export time follows its latency, so a
call it was about to answer is not cut and sent again."""

from __future__ import annotations

import time
from concurrent import futures
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

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
