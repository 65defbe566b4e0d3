"""The pure-Python floor of `bench/bench_collector.py` and `bench/bench_sidecar_load.py`: an
OTLP/gRPC trace receiver doing only what any Python sidecar must do before judging anything.
Both run it in a process of its own (`bench_sidecar_load._floor_server`).

A `grpc.server` on a thread pool of ``workers`` threads (serve's `grpc_workers`) with a generic
handler for `TraceService/Export` on raw bytes, as serve's receiver registers it. For each
request: parse it with the protobuf runtime spanjudge uses
(`ExportTraceServiceRequest.FromString`), read each resource's attributes and every span's
ids, name, start and end times, every attribute key and value and its events' attributes (arrays
and key-value lists walked) into a plain dict, count the spans, and answer with an empty serialised
`ExportTraceServiceResponse`. Nothing is kept past its request: no spool, no sessions, no
evaluation, nothing exported. It imports no spanjudge module.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


def _value(value: Any) -> Any:
    """An `AnyValue` as a Python value."""
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


def read(body: bytes) -> list[dict[str, Any]]:
    """Each span of an export request as a plain dict: the least a judge must look at."""
    request = ExportTraceServiceRequest.FromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    {
                        "trace_id": span.trace_id,
                        "span_id": span.span_id,
                        "parent_span_id": span.parent_span_id,
                        "name": span.name,
                        "start_time_unix_nano": span.start_time_unix_nano,
                        "end_time_unix_nano": span.end_time_unix_nano,
                        "attributes": {kv.key: _value(kv.value) for kv in span.attributes},
                        "events": [
                            {kv.key: _value(kv.value) for kv in event.attributes}
                            for event in span.events
                        ],
                        "resource": resource,
                    }
                )
    return spans


def start(workers: int, max_receive_bytes: int) -> tuple[Any, int, Callable[[], int]]:
    """The receiver started on 127.0.0.1: its server, its port and its count of spans read."""
    counted = [0]
    lock = threading.Lock()
    empty = ExportTraceServiceResponse().SerializeToString()

    def export(body: bytes, context: Any) -> bytes:
        n = len(read(body))
        with lock:
            counted[0] += n
        return empty

    def spans() -> int:
        with lock:
            return counted[0]

    server = grpc.server(  # as serve's receiver sets its server up
        futures.ThreadPoolExecutor(max_workers=workers),
        options=[
            ("grpc.max_receive_message_length", max_receive_bytes),
            ("grpc.so_reuseport", 0),
        ],
        maximum_concurrent_rpcs=workers * 8,
    )
    handler = grpc.unary_unary_rpc_method_handler(
        export, request_deserializer=None, response_serializer=None
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"Export": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port, spans
