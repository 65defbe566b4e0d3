"""serve.max_pending_bytes: accepted requests wait decoded in memory until a tick takes them, so
their bytes are bounded too, not only their span count and age (backpressure by memory).
And with several evaluation processes the open-session budget is shared, so
`sessions.max_open_bytes` bounds serve's memory whatever `serve.workers` is."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.sidecar.config import parse_serve
from tests.sidecar.helpers import SidecarProcess, VerdictServer, synthetic_session, wait_for
from tests.sidecar.raw_requests import grpc_call, post
from tests.sidecar.workers_helpers import _config, _env, _Held, _sidecar, _stuck_on_first


def test_requests_waiting_past_the_byte_bound_are_refused_retryably(
    tmp_path: Path, verdicts: VerdictServer
) -> None:
    held = _Held("stuck")
    body = encode_spans(synthetic_session("big", tools=40)).SerializeToString()
    # span count and age far from their bounds: only the bytes waiting can refuse
    sidecar = _sidecar(
        tmp_path,
        held,
        verdicts,
        max_pending_age_s=600,
        max_pending_spans=1_000_000,
        max_pending_bytes=max(1024 * 1024 * 8, 3 * len(body)),
        input={"max_request_bytes": 1024 * 1024 * 8},
    )
    try:
        _stuck_on_first(sidecar)
        bound = sidecar.worker.max_pending_bytes
        accepted = 0
        code, details = grpc.StatusCode.OK, ""
        for i in range(bound // len(body) + 2):
            body_i = encode_spans(synthetic_session(f"big-{i}", tools=40)).SerializeToString()
            code, details = grpc_call(sidecar, body_i)
            if code != grpc.StatusCode.OK:
                break
            accepted += len(body_i)
        assert code == grpc.StatusCode.UNAVAILABLE, (accepted, bound)
        assert "bytes of requests waiting" in details
        assert bound - 2 * len(body) <= accepted <= bound
        status, headers, text = post(sidecar, body)
        assert status == 503 and int(headers["Retry-After"]) >= 1
        assert b"serve.max_pending_bytes" in text
        held.release.set()
        # every request queued is taken in at once, but the sessions still wait for their
        # grace before they close: wait until evaluation caught up, not until intake did
        assert wait_for(lambda: sidecar.worker.refusal(len(body)) is None, 20)
        status, _, _ = post(sidecar, body)
        assert status == 200  # taken again once evaluation caught up
    finally:
        held.release.set()
        sidecar.stop()


def test_a_byte_bound_below_the_largest_request_is_a_configuration_error() -> None:
    problems: list[str] = []
    parse_serve(
        {"max_pending_bytes": 1000, "input": {"max_request_bytes": 4096}}, "serve", problems
    )
    assert problems == [
        "serve.max_pending_bytes: at least input.max_request_bytes (4096),"
        " or the largest request could never wait"
    ]


def _evicted(tmp: Path, workers: int, sessions: int = 120) -> int:
    """Sessions judged early because the open-session budget was full (idle timeout 300 s)."""
    verdicts = VerdictServer()
    tmp = tmp / f"workers-{workers}"
    tmp.mkdir()
    # Sessions left open (no close per turn) until the budget evicts them.
    budget = {
        "mode": "session",
        "idle_timeout_s": 300,
        "end_grace_s": 0.1,
        "max_open_bytes": 400_000,
    }
    config = _config(tmp, workers, sessions=budget, http_endpoint=None)
    sidecar = SidecarProcess(tmp, config, _env(verdicts)).start()
    try:
        exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
        for i in range(sessions):
            assert exporter.export(synthetic_session(f"open-{i}", tools=10, end=False)) == (
                SpanExportResult.SUCCESS
            )
        exporter.shutdown()
        judged = -1
        while judged != len(verdicts.received.sessions()):  # until evictions stop
            judged = len(verdicts.received.sessions())
            time.sleep(1.0)
        return judged
    finally:
        sidecar.terminate()
        verdicts.stop()


def test_two_evaluation_processes_share_the_open_session_budget(tmp_path: Path) -> None:
    one = _evicted(tmp_path, 1)
    two = _evicted(tmp_path, 2)
    assert 0 < one < 120
    # each process holds half the budget: together they hold what one process holds (a
    # process may fill its half before the other does, so a few more may go early)
    assert two >= one - 2, (one, two)
