"""An unexpected internal error while a real sidecar handles an export request is answered as
retryable on both receivers (HTTP 503 with `Retry-After`, gRPC UNAVAILABLE), never as a
permanent `invalid` that clients drop; the cause is logged once and every occurrence counted in
`spanjudge.internal_errors`; once the fault is gone the same client's retry gets through."""

from __future__ import annotations

import logging
import re
import urllib.request
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

import spanjudge.sidecar.intake as intake
from spanjudge.guard import contained
from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import synthetic_session, wait_for
from tests.sidecar.raw_requests import grpc_call, post

pytestmark = pytest.mark.slow
WHERE = "handling an export request"


def _body(session_id: str) -> bytes:
    return encode_spans(synthetic_session(session_id)).SerializeToString()


def _internal_errors(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    pattern = rf'^spanjudge_internal_errors_total{{[^}}]*where="{WHERE}"[^}}]*}} (\S+)$'
    return sum(float(v) for v in re.findall(pattern, text, re.M))


def test_internal_error_is_retryable_logged_once_and_counted(
    make_sidecar: MakeSidecar, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sidecar = make_sidecar(
        sessions={"idle_timeout_s": 60, "end_grace_s": 0.1}, metrics_endpoint="127.0.0.1:0"
    )
    assert sidecar.endpoints is not None and sidecar.endpoints.metrics is not None
    metrics_port = int(sidecar.endpoints.metrics.rsplit(":", 1)[1])
    real_append = sidecar.spool.append

    def broken_append(*args: Any, **kwargs: Any) -> int:
        raise RuntimeError("injected spool bug")

    monkeypatch.setattr(sidecar.spool, "append", broken_append)
    caplog.set_level(logging.ERROR, logger="spanjudge.sidecar")
    with contained():  # as in production: the guard answers instead of re-raising
        answers = [post(sidecar, _body(f"bug-http-{i}")) for i in range(2)]
        codes = [grpc_call(sidecar, _body(f"bug-grpc-{i}")) for i in range(2)]
    for status, headers, _ in answers:
        assert status == 503
        assert int(headers["Retry-After"]) >= 1
    for code, details in codes:
        assert code == grpc.StatusCode.UNAVAILABLE
        assert "injected spool bug" in details
    # the cause once in the log, every occurrence counted
    logged = [r for r in caplog.records if WHERE in r.getMessage()]
    assert len(logged) == 1
    assert logged[0].exc_info is not None and "injected spool bug" in str(logged[0].exc_info[1])
    assert wait_for(lambda: _internal_errors(metrics_port) == 4, 10)
    assert sidecar.handler.counts.get("invalid", 0) == 0
    # the fault passes: the clients' retries are accepted and evaluated
    monkeypatch.setattr(sidecar.spool, "append", real_append)
    assert post(sidecar, _body("bug-http-0"))[0] == 200
    assert grpc_call(sidecar, _body("bug-grpc-0"))[0] == grpc.StatusCode.OK
    assert wait_for(lambda: sidecar.worker.evaluated_sessions == 2, 20)


def test_running_out_of_memory_while_decoding_is_retryable(
    make_sidecar: MakeSidecar, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A MemoryError may pass (other requests finish, memory is freed): answered retryable on
    both receivers, not as the malformed input the decoder's catch-all reports."""
    sidecar = make_sidecar(sessions={"idle_timeout_s": 60, "end_grace_s": 0.1})
    real = intake.decode_request

    def out_of_memory(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(intake, "decode_request", out_of_memory)
    with contained():
        status, headers, _ = post(sidecar, _body("oom-http"))
        code, _ = grpc_call(sidecar, _body("oom-grpc"))
    assert status == 503 and int(headers["Retry-After"]) >= 1
    assert code == grpc.StatusCode.UNAVAILABLE
    monkeypatch.setattr(intake, "decode_request", real)
    assert post(sidecar, _body("oom-http"))[0] == 200  # the client's retry
    assert grpc_call(sidecar, _body("oom-grpc"))[0] == grpc.StatusCode.OK
    assert wait_for(lambda: sidecar.worker.evaluated_sessions == 2, 20)
