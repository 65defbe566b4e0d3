"""What leaves the spool, and only that: spanjudge's own spans sent back to `spanjudge serve` (a
Collector routing the verdicts back to it) are never judged, so they are not spooled (nothing would
release them and the spool would fill up until every request is refused); and a session releases
the key-less spans it holds, not those of its traces that another session holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge.guard import contained
from spanjudge.sessions.keys import TRACE_ID_SOURCE
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


def _trace(session_id: str) -> tuple[list[ReadableSpan], ReadableSpan]:
    """One trace: key-less tool calls, then the agent span that carries the session key."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent-test")
    root = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "a",
        "session.id": session_id,
        "spanjudge.session.end": True,
    }
    with tracer.start_as_current_span("invoke_agent a", attributes=root):
        for i in range(2):
            tool = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "read_file",
                "gen_ai.tool.call.id": f"call-{i}",
            }
            with tracer.start_as_current_span("execute_tool read_file", attributes=tool):
                pass
    spans = list(exporter.get_finished_spans())
    return spans[:-1], spans[-1]


def test_a_key_for_a_trace_judged_alone_does_not_release_its_spans(
    make_sidecar: MakeSidecar, tmp_path: Path
) -> None:
    """Key-less spans that waited out the idle timeout are their trace's own session; when its
    evaluation fails they stay spooled, and the session key arriving later in that trace must
    not release them with its own session (they were lost at the next start)."""
    spool = {"path": str(tmp_path / "shared.db")}
    sessions = {"idle_timeout_s": 0.5, "end_grace_s": 0.1}
    sidecar = make_sidecar(sessions=sessions, spool=spool)
    assert sidecar.grpc is not None
    pipeline = sidecar.worker.pipeline
    begin = pipeline.engine.begin

    def failing_for_traces(session: Any, *args: Any, **kwargs: Any) -> Any:
        if session.key_source == TRACE_ID_SOURCE:
            raise RuntimeError("this evaluation fails")
        return begin(session, *args, **kwargs)

    pipeline.engine.begin = failing_for_traces  # type: ignore[method-assign]
    keyless, keyed = _trace("late-key")
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True)
    try:
        with contained():
            assert exporter.export(keyless) == SpanExportResult.SUCCESS
            assert wait_for(lambda: pipeline.errors >= 1, 10)  # the trace's evaluation failed
            assert exporter.export([keyed]) == SpanExportResult.SUCCESS
            assert wait_for(lambda: sidecar.worker.evaluated_sessions == 1, 10)
            sidecar.stop()
    finally:
        exporter.shutdown()
    # the next start judges the trace whose evaluation failed
    again = make_sidecar(sessions=sessions, spool=spool)
    assert wait_for(lambda: again.worker.evaluated_sessions == 1, 10)
    assert wait_for(lambda: again.spool.requests == 0, 5)
