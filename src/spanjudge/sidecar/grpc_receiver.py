"""OTLP/gRPC `TraceService/Export` and `LogsService/Export`, registered as generic handlers on
raw bytes.

Taking the request as bytes lets the sidecar check the size, parse the protobuf itself (so a
malformed message gets `INVALID_ARGUMENT` with a message, not an opaque internal error) and
spool exactly what was received.
"""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc

from spanjudge.sidecar.config import TlsConfig
from spanjudge.sidecar.handling import Answer, Handler
from spanjudge.sidecar.intake import FORMAT_PROTOBUF, SIGNAL_LOGS, SIGNAL_TRACES

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
METHOD = "Export"
_CODES = {
    "invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "too_large": grpc.StatusCode.INVALID_ARGUMENT,
    "unavailable": grpc.StatusCode.UNAVAILABLE,
}


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def server_credentials(tls: TlsConfig) -> grpc.ServerCredentials:
    """TLS, or mutual TLS when a client CA is configured (client certificates required)."""
    assert tls.cert_file is not None and tls.key_file is not None
    client_ca = _read(tls.client_ca_file) if tls.client_ca_file else None
    return grpc.ssl_server_credentials(
        [(_read(tls.key_file), _read(tls.cert_file))],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )


# Room above `max_request_bytes` in gRPC's own limit, so that the handler, not gRPC, answers an
# oversized request.
RECEIVE_ROOM_BYTES = 1024 * 1024


class GrpcReceiver:
    """The gRPC receiver; `start` binds and returns the bound port."""

    def __init__(
        self,
        handler: Handler,
        endpoint: str,
        *,
        tls: TlsConfig,
        max_request_bytes: int,
        workers: int = 8,
    ) -> None:
        self.handler = handler
        self.endpoint = endpoint
        self.tls = tls
        self.port = 0
        max_len = max_request_bytes + RECEIVE_ROOM_BYTES
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="spanjudge-grpc"),
            options=[
                ("grpc.max_receive_message_length", max_len),
                ("grpc.so_reuseport", 0),
            ],
            maximum_concurrent_rpcs=workers * 8,
        )
        services = {SERVICE: self._export_traces, LOGS_SERVICE: self._export_logs}
        self._server.add_generic_rpc_handlers(
            tuple(
                grpc.method_handlers_generic_handler(
                    service,
                    {
                        METHOD: grpc.unary_unary_rpc_method_handler(
                            export, request_deserializer=None, response_serializer=None
                        )
                    },
                )
                for service, export in services.items()
            )
        )

    def start(self) -> int:
        if self.tls.enabled:
            self.port = self._server.add_secure_port(self.endpoint, server_credentials(self.tls))
        else:
            self.port = self._server.add_insecure_port(self.endpoint)
        self._server.start()
        return self.port

    def _export_traces(self, request: bytes, context: Any) -> bytes:
        return self._export(request, context, SIGNAL_TRACES)

    def _export_logs(self, request: bytes, context: Any) -> bytes:
        return self._export(request, context, SIGNAL_LOGS)

    def _export(self, request: bytes, context: Any, signal: str) -> bytes:
        metadata = context.invocation_metadata() or ()
        if not self.handler.authorized([v for k, v in metadata if k == "authorization"]):
            self.handler.count("grpc", "unauthenticated")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        answer: Answer = self.handler.handle(request, FORMAT_PROTOBUF, "grpc", signal)
        if answer.response is None:
            context.abort(_CODES.get(answer.result, grpc.StatusCode.INTERNAL), answer.message)
        assert answer.response is not None
        data: bytes = answer.response.SerializeToString()
        return data

    def stop(self, grace_s: float) -> None:
        """Stop accepting; in-flight calls get ``grace_s`` to finish."""
        self._server.stop(grace_s).wait(grace_s + 1.0)
