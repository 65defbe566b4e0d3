"""A verdict endpoint that is down while sessions close: the backlog grows past the export queue
size, and every session still gets all its verdicts as spans AND log records once it is back."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import VerdictServer, synthetic_session, wait_for

pytestmark = pytest.mark.slow
SESSIONS = 8


@pytest.mark.parametrize("workers", [1, 2])
def test_outage_backlog_past_the_queue_loses_no_log_record(
    make_sidecar: MakeSidecar, workers: int
) -> None:
    """With evaluation processes each exports its own verdicts: a backlog in one pauses
    evaluation and refuses new requests (retryable) as the single worker does."""
    verdicts = VerdictServer()
    port, received = verdicts.port, verdicts.received
    verdicts.stop()  # the endpoint is down when the sessions close
    sidecar = make_sidecar(
        sessions={"idle_timeout_s": 60, "end_grace_s": 0.1},
        workers=workers,
        export={
            "enabled": True,
            "endpoint": f"http://127.0.0.1:{port}",
            "insecure": True,
            "timeout_s": 1,
            # nine verdicts a session: eight sessions are far past twice this
            "max_queue_spans": 5,
        },
        flush_timeout_s=1,
    )
    assert sidecar.grpc is not None
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True, timeout=10)
    spans = [s for i in range(SESSIONS) for s in synthetic_session(f"backlog-{i}")]
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    sent = {f"backlog-{i}" for i in range(SESSIONS)}
    # evaluated while the endpoint is down: the export backlog is full
    assert wait_for(lambda: sidecar.worker.export_full(), 20)
    # and new work is refused with a retryable status instead of piling up behind it
    late = exporter.export(synthetic_session("late"))
    assert late == SpanExportResult.FAILURE
    assert sidecar.handler.counts.get("unavailable", 0) >= 1
    verdicts = VerdictServer(port, received)  # the endpoint comes back
    try:
        assert wait_for(lambda: set(received.span_ids()) >= sent, 30)
        assert wait_for(lambda: sidecar.spool.bytes == 0, 30)
        span_ids = received.span_ids()
        log_ids = received.log_ids()
        for session in sorted(sent):
            assert len(span_ids[session]) >= 9
            assert log_ids.get(session) == span_ids[session], session
        assert all(revisions == {1} for revisions in received.sessions().values())
    finally:
        exporter.shutdown()
        sidecar.stop()
        verdicts.stop()
