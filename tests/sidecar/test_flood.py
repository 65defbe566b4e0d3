"""A flood of ended sessions in a few requests: each evaluation process stays within its memory
budget, every acknowledged session is evaluated, and serve accepts requests again afterwards."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from tests.sidecar.helpers import SidecarProcess, VerdictServer, wait_for

pytestmark = pytest.mark.slow

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
REQUESTS = 4
SESSIONS_PER_REQUEST = 5_000
WORKERS = 2
MAX_OPEN_BYTES = 64 * 1024 * 1024
# Beyond a process's share of the sessions budget: the export backlog (`max_queue_spans` items)
# and the results a tick holds. An unbounded backlog of a flood is many times this.
EXPORT_ALLOWANCE = 96 * 1024 * 1024
_PAGE = 4096


def flood_request(first: int, count: int) -> bytes:
    """``count`` one-span sessions, each an ended `invoke_agent` span with its own session id."""
    start = time.time_ns()
    spans = [
        Span(
            trace_id=(i + 1).to_bytes(16, "big"),
            span_id=(i + 1).to_bytes(8, "big"),
            name="invoke_agent flood",
            kind=Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=start,
            end_time_unix_nano=start + 1_000_000,
            attributes=[
                KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="invoke_agent")),
                KeyValue(key="gen_ai.agent.name", value=AnyValue(string_value="flood")),
                KeyValue(key="session.id", value=AnyValue(string_value=f"many-{i}")),
                KeyValue(key="spanjudge.session.end", value=AnyValue(bool_value=True)),
            ],
        )
        for i in range(first, first + count)
    ]
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    ).SerializeToString()


def rss(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE


def test_a_flood_of_ended_sessions_stays_within_budget_and_drains(tmp_path: Path) -> None:
    verdicts = VerdictServer()
    sidecar = SidecarProcess(
        tmp_path,
        {
            "sessions": {
                "idle_timeout_s": 3.0,
                "end_grace_s": 0.2,
                "max_open_bytes": MAX_OPEN_BYTES,
            },
            "serve": {
                "grpc_endpoint": "127.0.0.1:0",
                "http_endpoint": None,
                "metrics_endpoint": None,
                "tick_interval_s": 0.05,
                "workers": WORKERS,
                "spool": {"path": str(tmp_path / "spool.db")},
                "export": {"endpoint": verdicts.endpoint, "insecure": True},
            },
        },
    ).start(60)
    channel = grpc.insecure_channel(sidecar.endpoints["grpc"])
    call = channel.unary_unary(EXPORT)
    try:
        pids = sidecar.endpoints["workers"]
        assert len(pids) == WORKERS
        budget = {pid: rss(pid) + MAX_OPEN_BYTES // WORKERS + EXPORT_ALLOWANCE for pid in pids}
        peak = dict.fromkeys(pids, 0)

        def measure() -> None:
            for pid in pids:
                peak[pid] = max(peak[pid], rss(pid))

        accepted = 0
        for n in range(REQUESTS):
            body = flood_request(n * SESSIONS_PER_REQUEST, SESSIONS_PER_REQUEST)
            while True:  # as an exporter retries a retryable refusal
                measure()
                try:
                    call(body, timeout=60)
                    break
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
                    time.sleep(0.5)
            accepted += SESSIONS_PER_REQUEST

        def all_evaluated() -> bool:
            measure()
            return len(verdicts.received.sessions()) >= accepted

        assert wait_for(all_evaluated, 600, 0.5), (
            f"{len(verdicts.received.sessions())} of {accepted} sessions evaluated"
        )
        over = {pid: (peak[pid], budget[pid]) for pid in pids if peak[pid] > budget[pid]}
        assert not over, f"peak RSS over budget (peak, budget) by evaluation process: {over}"
        # after the drain an ordinary request is accepted, not refused as lagging
        call(flood_request(10 * REQUESTS * SESSIONS_PER_REQUEST, 1), timeout=30)
    finally:
        channel.close()
        sidecar.terminate(60)
        verdicts.stop()
