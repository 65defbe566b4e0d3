"""`serve` under load, shared by its flood test and the load bench (`bench_sidecar_load.py`):
the flood's requests (each span an ended `invoke_agent` span with its own session id) and the
configuration both run it under, and a verdict receiver that only counts, per session."""

from __future__ import annotations

import os
import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
REQUESTS = 4
SESSIONS_PER_REQUEST = 25_000
WORKERS = 2


def flood_request(first: int, count: int, *, ended: bool = True) -> bytes:
    """``count`` one-span sessions (``many-{first}`` on), each an ended `invoke_agent` span
    with its own session id and trace, marked as the session's end (unless not ``ended``: then
    a child span, the session going on)."""
    start = time.time_ns()
    end = [KeyValue(key="spanjudge.session.end", value=AnyValue(bool_value=True))] if ended else []
    spans = [
        Span(
            trace_id=(i + 1).to_bytes(16, "big"),
            span_id=(i + 1).to_bytes(8, "big"),
            parent_span_id=b"" if ended else (i + 1).to_bytes(8, "little"),
            name="invoke_agent flood",
            kind=Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=start,
            end_time_unix_nano=start + 1_000_000,
            attributes=[
                KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="invoke_agent")),
                KeyValue(key="gen_ai.agent.name", value=AnyValue(string_value="flood")),
                KeyValue(key="session.id", value=AnyValue(string_value=f"many-{i}")),
                *end,
            ],
        )
        for i in range(first, first + count)
    ]
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    ).SerializeToString()


def flood_config(
    spool: Path, endpoint: str, *, max_open_bytes: int, workers: int = WORKERS
) -> dict[str, Any]:
    """`serve`'s configuration under the flood: idle 3 s, end grace 0.2 s, a tick every 50 ms,
    verdicts exported to ``endpoint`` over OTLP/gRPC, gRPC intake only."""
    return {
        "sessions": {"idle_timeout_s": 3.0, "end_grace_s": 0.2, "max_open_bytes": max_open_bytes},
        "serve": {
            "grpc_endpoint": "127.0.0.1:0",
            "http_endpoint": None,
            "metrics_endpoint": None,
            "tick_interval_s": 0.05,
            "workers": workers,
            "spool": {"path": str(spool)},
            "export": {"endpoint": endpoint, "insecure": True},
        },
    }


def rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` (Linux /proc)."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Verdicts(
    trace_service_pb2_grpc.TraceServiceServicer,
    logs_service_pb2_grpc.LogsServiceServicer,
    metrics_service_pb2_grpc.MetricsServiceServicer,
):
    """Counts evaluation spans and verdict log records per session id (and when each session's
    first evaluation span came, on the host's monotonic clock): a hundred thousand sessions'
    verdicts kept whole would take more memory than the server under test."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: dict[str, int] = {}
        self.logs: dict[str, int] = {}
        self.first_seen: dict[str, float] = {}

    @staticmethod
    def _session(attributes: Any) -> str | None:
        for kv in attributes:
            if kv.key == "session.id":
                return str(kv.value.string_value)
        return None

    def Export(self, request: Any, context: Any) -> Any:  # traces, logs and metrics alike
        now = time.monotonic()
        with self.lock:
            if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
                for rs in request.resource_spans:
                    for ss in rs.scope_spans:
                        for span in ss.spans:
                            sid = self._session(span.attributes)
                            if span.name == "spanjudge.evaluate" and sid:
                                self.spans[sid] = self.spans.get(sid, 0) + 1
                                self.first_seen.setdefault(sid, now)
                return trace_service_pb2.ExportTraceServiceResponse()
            if isinstance(request, logs_service_pb2.ExportLogsServiceRequest):
                for rl in request.resource_logs:
                    for sl in rl.scope_logs:
                        for record in sl.log_records:
                            sid = self._session(record.attributes)
                            if sid:
                                self.logs[sid] = self.logs.get(sid, 0) + 1
                return logs_service_pb2.ExportLogsServiceResponse()
        return metrics_service_pb2.ExportMetricsServiceResponse()

    def evaluated(self) -> int:
        """Sessions whose evaluation span came (once or more)."""
        with self.lock:
            return len(self.spans)


def verdict_server() -> tuple[grpc.Server, int, Verdicts]:
    """A started OTLP/gRPC server on a free loopback port counting what it receives."""
    received = Verdicts()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(received, server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(received, server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(received, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port, received
