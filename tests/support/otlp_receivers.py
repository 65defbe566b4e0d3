"""Real OTLP receivers for tests of what is sent: a gRPC server with the collector's
`TraceService` and `LogsService`, and an HTTP server taking POST /v1/traces and /v1/logs, each
keeping every request as it arrived (decoded message, headers or metadata), and answering what
a test scripts (failures first, then success)."""

from __future__ import annotations

import gzip
import http.server
import ssl
import threading
import zlib
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

_REQUESTS: dict[str, type[Message]] = {
    "/v1/traces": trace_service_pb2.ExportTraceServiceRequest,
    "/v1/logs": logs_service_pb2.ExportLogsServiceRequest,
}
_RESPONSES: dict[str, type[Message]] = {
    "/v1/traces": trace_service_pb2.ExportTraceServiceResponse,
    "/v1/logs": logs_service_pb2.ExportLogsServiceResponse,
}


@dataclass
class Arrived:
    """The requests a receiver took (every attempt, refused ones too), with their headers."""

    traces: list[trace_service_pb2.ExportTraceServiceRequest] = field(default_factory=list)
    logs: list[logs_service_pb2.ExportLogsServiceRequest] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    attempts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def keep(self, request: Message, headers: dict[str, str]) -> None:
        with self.lock:
            self.attempts += 1
            self.headers.append(headers)
            if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
                self.traces.append(request)
            else:
                self.logs.append(request)


class _Service(
    trace_service_pb2_grpc.TraceServiceServicer, logs_service_pb2_grpc.LogsServiceServicer
):
    def __init__(self, receiver: GrpcOtlpReceiver) -> None:
        self.receiver = receiver

    def Export(self, request: Any, context: Any) -> Any:
        receiver = self.receiver
        receiver.arrived.keep(request, dict(context.invocation_metadata()))
        if receiver.holding:
            receiver.released.wait(30)
        with receiver.arrived.lock:
            failure = receiver.failures.pop(0) if receiver.failures else None
        if failure is not None:
            code, trailing = failure
            if trailing:
                context.set_trailing_metadata(trailing)
            context.abort(code, "scripted failure")
        if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
            return receiver.trace_response or trace_service_pb2.ExportTraceServiceResponse()
        return logs_service_pb2.ExportLogsServiceResponse()


class GrpcOtlpReceiver:
    """OTLP/gRPC on 127.0.0.1 (plaintext, or TLS with ``credentials``)."""

    def __init__(self, credentials: grpc.ServerCredentials | None = None) -> None:
        self.arrived = Arrived()
        # (status code, trailing metadata) answered to the next calls, one each
        self.failures: list[tuple[grpc.StatusCode, tuple[tuple[str, Any], ...]]] = []
        self.trace_response: trace_service_pb2.ExportTraceServiceResponse | None = None
        # while holding, calls are taken and not answered until `released` is set
        self.holding = False
        self.released = threading.Event()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        service = _Service(self)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(service, self.server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(service, self.server)
        if credentials is None:
            self.port = self.server.add_insecure_port("127.0.0.1:0")
        else:
            self.port = self.server.add_secure_port("127.0.0.1:0", credentials)
        self.server.start()

    def stop(self) -> None:
        self.released.set()
        self.server.stop(0).wait()


class HttpOtlpReceiver:
    """OTLP/HTTP with protobuf bodies on 127.0.0.1 (over ``tls`` if given); ``statuses`` are
    answered to the next calls (with ``retry_after`` as their `Retry-After`), then 200."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.arrived = Arrived()
        self.statuses: list[int] = []
        self.retry_after: str | None = None
        self.on_request: Callable[[], None] = lambda: None
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                encoding = self.headers.get("Content-Encoding")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                request = _REQUESTS[self.path].FromString(body)
                receiver.on_request()
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.arrived.keep(request, headers)
                with receiver.arrived.lock:
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                if status != 200 and receiver.retry_after is not None:
                    self.send_header("Retry-After", receiver.retry_after)
                answer = _RESPONSES[self.path]().SerializeToString() if status == 200 else b""
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
