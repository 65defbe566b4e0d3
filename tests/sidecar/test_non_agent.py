"""A plain service trace (`GET /health`) sent beside agent sessions is not a session: it gets no
verdicts, is not counted in `spanjudge.sessions`, has its own counter, and leaves the spool."""

from __future__ import annotations

import re
import urllib.request

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import VerdictServer, synthetic_session, wait_for

pytestmark = pytest.mark.slow


def _health_check() -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "web"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("opentelemetry.instrumentation.flask")
    with tracer.start_as_current_span(
        "GET /health",
        kind=SpanKind.SERVER,
        attributes={"http.request.method": "GET", "url.path": "/health", "http.route": "/health"},
    ):
        pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _counter(text: str, name: str) -> float:
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


def test_health_check_trace_is_not_a_session(make_sidecar: MakeSidecar) -> None:
    verdicts = VerdictServer()
    sidecar = None
    try:
        sidecar = make_sidecar(
            sessions={"idle_timeout_s": 0.5, "end_grace_s": 0.1},
            metrics_endpoint="127.0.0.1:0",
            export={"enabled": True, "endpoint": verdicts.endpoint, "insecure": True},
        )
        assert sidecar.grpc is not None and sidecar.endpoints is not None
        exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True)
        assert exporter.export(_health_check()) == SpanExportResult.SUCCESS
        assert exporter.export(synthetic_session("agent-run")) == SpanExportResult.SUCCESS
        exporter.shutdown()
        url = f"http://{sidecar.endpoints.metrics}/metrics"

        def scrape() -> str:
            with urllib.request.urlopen(url, timeout=10) as response:
                return str(response.read().decode())

        assert wait_for(lambda: _counter(scrape(), "spanjudge_non_agent_traces_total") == 1, 20)
        assert wait_for(lambda: sidecar.spool.requests == 0, 20)  # both released
        text = scrape()
        assert _counter(text, "spanjudge_sessions_total") == 1  # the agent run only
        assert set(verdicts.received.sessions()) == {"agent-run"}
        # coverage sees one session: every not_evaluated verdict belongs to the agent run
        assert {e["session.id"] for e in verdicts.received.verdicts().values()} == {"agent-run"}
    finally:
        if sidecar is not None:
            sidecar.stop()
        verdicts.stop()
