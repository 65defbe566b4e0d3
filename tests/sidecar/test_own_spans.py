"""spanjudge's own spans sent to `spanjudge serve` (a Collector that routes the verdicts back to
it) are acknowledged and never judged; they must not stay in the spool, which nothing would
ever release and which would fill up with them until every request is refused."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import synthetic_session, wait_for


def _own_spans(session_id: str) -> list[ReadableSpan]:
    """Evaluation spans as spanjudge emits them: one naming its session, one not."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "spanjudge"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("spanjudge")
    with tracer.start_as_current_span("spanjudge.evaluate", attributes={"session.id": session_id}):
        pass
    with tracer.start_as_current_span("spanjudge.evaluate"):
        pass
    return list(exporter.get_finished_spans())


def test_own_spans_sent_back_leave_nothing_in_the_spool(make_sidecar: MakeSidecar) -> None:
    sidecar = make_sidecar(sessions={"idle_timeout_s": 60, "end_grace_s": 0.1})
    assert sidecar.grpc is not None
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True)
    try:
        assert exporter.export(synthetic_session("judged")) == SpanExportResult.SUCCESS
        assert wait_for(lambda: sidecar.worker.evaluated_sessions == 1, 10)
        # its verdicts come back, alone and together with a new session's spans
        assert exporter.export(_own_spans("judged")) == SpanExportResult.SUCCESS
        mixed = [*_own_spans("judged"), *synthetic_session("next")]
        assert exporter.export(mixed) == SpanExportResult.SUCCESS
        assert wait_for(lambda: sidecar.worker.evaluated_sessions == 2, 10)
        assert wait_for(lambda: sidecar.spool.requests == 0, 5), sidecar.spool.requests
        assert sidecar.spool.bytes == 0
    finally:
        exporter.shutdown()
