"""Key-less traces (agent spans with no session key yet) count against `sessions.max_open_bytes`
in a real sidecar: past the budget the oldest are evaluated early as evicted sessions (counted
in `spanjudge.sessions{state="evicted"}`) and released from the spool, instead of waiting for
their idle timeout outside any bound."""

from __future__ import annotations

import re
import urllib.request

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import wait_for

pytestmark = pytest.mark.slow
TRACES = 30


def _keyless_agent_trace(i: int) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent-test")
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "keyless"}
    with tracer.start_as_current_span("invoke_agent keyless", attributes=attrs):
        for c in range(4):
            tool = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "read_file",
                "gen_ai.tool.call.id": f"call-{i}-{c}",
                "gen_ai.tool.call.result": "z" * 2000,
            }
            with tracer.start_as_current_span("execute_tool read_file", attributes=tool):
                pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _evicted(text: str) -> float:
    pattern = r'^spanjudge_sessions_total\{[^}]*spanjudge_session_state="evicted"[^}]*\} (\S+)$'
    return sum(float(v) for v in re.findall(pattern, text, re.M))


def test_keyless_traces_are_bounded_by_the_memory_budget(make_sidecar: MakeSidecar) -> None:
    budget = 60_000  # a few traces' worth
    sidecar = make_sidecar(
        sessions={"idle_timeout_s": 600, "max_open_bytes": budget},
        metrics_endpoint="127.0.0.1:0",
    )
    assert sidecar.grpc is not None and sidecar.endpoints is not None
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True)
    for i in range(TRACES):
        assert exporter.export(_keyless_agent_trace(i)) == SpanExportResult.SUCCESS
    exporter.shutdown()
    url = f"http://{sidecar.endpoints.metrics}/metrics"

    def scrape() -> str:
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())

    # most traces were evaluated early, long before their idle timeout
    assert wait_for(lambda: _evicted(scrape()) >= TRACES // 2, 20)
    assert wait_for(lambda: sidecar.worker.pending_spans == 0, 10)
    store = sidecar.worker.store
    # enforced on the worker's tick, after the spans of a request were added
    assert wait_for(lambda: store.memory_bytes <= budget, 10)
    # what was evaluated is released from the spool; what is left is within the budget
    assert wait_for(lambda: sidecar.worker.evaluated_sessions == _evicted(scrape()), 10)
    # nothing acknowledged is lost: each trace is evaluated or still spooled (one request each)
    assert wait_for(
        lambda: sidecar.spool.requests + sidecar.worker.evaluated_sessions == TRACES, 10
    )
