"""Sidecar throughput and memory, measured side by side in one run.

End-to-end spans per second over OTLP/gRPC (sessions assembled, deterministic evaluators run,
every session evaluated) with the spool off and on, against a bare Python gRPC receiver that only
parses the same requests. The client runs in its own process and sends the same pre-serialised
requests to each server. Then memory per retained span and per open session (tracemalloc).

    python bench/bench_sidecar.py [--sessions 2000] [--spans-per-session 6] [--clients 4]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.sessions.store import SessionStore
from spanjudge.sidecar.config import parse_serve
from spanjudge.sidecar.server import Sidecar
from spanjudge.spans.otlp_proto import decode_request

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
BATCH_SPANS = 512  # the Collector's default batch size


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def session_spans(index: int, spans: int) -> list[Span]:
    """One agent turn: a root `invoke_agent` (with the end marker) and tool calls under it."""
    sid = f"bench-{index:06d}"
    trace = (index + 1).to_bytes(16, "big")
    root_id = (index * 1000 + 1).to_bytes(8, "big")
    start = time.time_ns() - 60_000_000_000
    out = []
    for i in range(spans - 1):
        out.append(
            Span(
                trace_id=trace,
                span_id=(index * 1000 + 2 + i).to_bytes(8, "big"),
                parent_span_id=root_id,
                name="execute_tool read_file",
                kind=Span.SPAN_KIND_INTERNAL,
                start_time_unix_nano=start + i * 1_000_000,
                end_time_unix_nano=start + i * 1_000_000 + 500_000,
                attributes=[
                    _kv("gen_ai.operation.name", "execute_tool"),
                    _kv("gen_ai.tool.name", "read_file"),
                    _kv("gen_ai.tool.call.id", f"call-{i}"),
                    _kv("gen_ai.tool.call.arguments", json.dumps({"path": f"data/f{i}.csv"})),
                    _kv("gen_ai.tool.call.result", "col_a,col_b\n1,2\n" * 8),
                    _kv("session.id", sid),
                ],
            )
        )
    out.append(
        Span(
            trace_id=trace,
            span_id=root_id,
            name="invoke_agent bench-agent",
            start_time_unix_nano=start,
            end_time_unix_nano=start + spans * 1_000_000,
            attributes=[
                _kv("gen_ai.operation.name", "invoke_agent"),
                _kv("gen_ai.agent.name", "bench-agent"),
                _kv("session.id", sid),
                _kv("spanjudge.session.end", True),
            ],
        )
    )
    return out


def build_requests(sessions: int, spans_per_session: int) -> list[bytes]:
    batch: list[Span] = []
    requests = []
    for index in range(sessions):
        batch.extend(session_spans(index, spans_per_session))
        if len(batch) >= BATCH_SPANS or index == sessions - 1:
            request = ExportTraceServiceRequest(
                resource_spans=[
                    ResourceSpans(
                        resource={"attributes": [_kv("service.name", "bench-agent")]},
                        scope_spans=[ScopeSpans(spans=batch)],
                    )
                ]
            )
            requests.append(request.SerializeToString())
            batch = []
    return requests


# --- the client (own process) ---


def send_retrying(
    call: Any,
    body: bytes,
    *,
    codes: tuple[grpc.StatusCode, ...] = (grpc.StatusCode.UNAVAILABLE,),
    pause_s: float = 0.05,
    timeout_s: float = 60,
    before: Callable[[], None] | None = None,
) -> int:
    """Send ``body`` until it is accepted, retrying an answer in ``codes`` after ``pause_s`` as
    an OTLP exporter retries a retryable refusal; any other failure is raised. ``before`` runs
    ahead of each attempt. Returns how many attempts were refused."""
    refused = 0
    while True:
        if before is not None:
            before()
        try:
            call(body, timeout=timeout_s)
            return refused
        except grpc.RpcError as exc:
            if exc.code() not in codes:
                raise
            refused += 1
            time.sleep(pause_s)


def _client(target: str, requests: list[bytes], clients: int, out: Any) -> None:
    channel = grpc.insecure_channel(target)
    call = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
    chunks = [requests[i::clients] for i in range(clients)]

    def send(chunk: list[bytes]) -> int:
        return sum(send_retrying(call, body) for body in chunk)

    call(ExportTraceServiceRequest().SerializeToString(), timeout=60)  # connected and warm
    started = time.time()
    with futures.ThreadPoolExecutor(clients) as pool:
        retries = sum(pool.map(send, chunks))
    out.put((started, retries))
    channel.close()


def drive(
    target: str,
    requests: list[bytes],
    clients: int,
    done: Callable[[], bool],
    poll_s: float = 0.001,
) -> float:
    """Seconds from the client's first request until it finished and ``done()`` holds, asked
    every ``poll_s`` (wall clock shared by both processes; the client's start-up is not
    counted)."""
    context = multiprocessing.get_context("spawn")  # no fork() under a live gRPC runtime
    queue: Any = context.Queue()
    proc = context.Process(target=_client, args=(target, requests, clients, queue))
    proc.start()
    proc.join()
    started, _retries = queue.get(timeout=5)
    while not done():
        time.sleep(poll_s)
    return time.time() - started


# --- the servers ---


def bare_receiver() -> tuple[grpc.Server, int, Callable[[], int]]:
    """A Python gRPC receiver that only parses requests (the baseline)."""
    parsed = [0]
    lock = threading.Lock()
    empty = ExportTraceServiceResponse().SerializeToString()

    def export(body: bytes, context: Any) -> bytes:
        request = ExportTraceServiceRequest.FromString(body)
        n = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        with lock:
            parsed[0] += n
        return empty

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handler = grpc.unary_unary_rpc_method_handler(
        export, request_deserializer=None, response_serializer=None
    )
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "opentelemetry.proto.collector.trace.v1.TraceService", {"Export": handler}
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port, lambda: parsed[0]


def sidecar(spool: bool, directory: str) -> Sidecar:
    problems: list[str] = []
    serve = parse_serve(
        {
            "grpc_endpoint": "127.0.0.1:0",
            "http_endpoint": None,
            "metrics_endpoint": None,
            "tick_interval_s": 0.02,
            "export": {"enabled": False},
            "spool": {
                "enabled": spool,
                "path": os.path.join(directory, f"bench-{time.time_ns()}.db"),
            },
        },
        "serve",
        problems,
    )
    assert not problems, problems
    config = parse_config({"sessions": {"end_grace_s": 0.0, "idle_timeout_s": 600}})
    instance = Sidecar(config, serve)
    instance.start()
    return instance


def core_inline(requests: list[bytes], sessions: int) -> float:
    """Seconds for the core alone, one thread, no network: decode, assemble, evaluate."""
    config = parse_config({"sessions": {"end_grace_s": 0.0, "idle_timeout_s": 600}})
    engine = Engine(config)
    store = SessionStore(config.policy)
    started = time.perf_counter()
    evaluated = 0
    for body in requests:
        records, _ = decode_request(ExportTraceServiceRequest.FromString(body))
        store.add_all(records)
        for closed in store.close():
            engine.evaluate(closed)
            evaluated += 1
    assert evaluated == sessions
    return time.perf_counter() - started


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    requests = build_requests(args.sessions, args.spans_per_session)
    total_spans = args.sessions * args.spans_per_session
    results: dict[str, Any] = {"spans": total_spans, "requests": len(requests)}
    with tempfile.TemporaryDirectory() as directory:
        for _round in range(args.rounds):
            server, port, parsed = bare_receiver()
            seconds = drive(
                f"127.0.0.1:{port}",
                requests,
                args.clients,
                lambda parsed=parsed: parsed() >= total_spans,  # type: ignore[misc]
            )
            server.stop(0)
            results.setdefault("bare", []).append(total_spans / seconds)
            seconds = core_inline(requests, args.sessions)
            results.setdefault("core_inline", []).append(total_spans / seconds)
            for spool in (False, True):
                name = "spool_on" if spool else "spool_off"
                instance = sidecar(spool, directory)
                assert instance.grpc is not None
                seconds = drive(
                    f"127.0.0.1:{instance.grpc.port}",
                    requests,
                    args.clients,
                    lambda worker=instance.worker: worker.evaluated_sessions >= args.sessions,  # type: ignore[misc]
                )
                instance.stop()
                results.setdefault(name, []).append(total_spans / seconds)
    best = {k: max(v) for k, v in results.items() if isinstance(v, list)}
    results["best_spans_per_s"] = {k: round(v) for k, v in best.items()}
    results["ratio_spool_off"] = round(best["spool_off"] / best["bare"], 3)
    results["ratio_spool_on"] = round(best["spool_on"] / best["bare"], 3)
    # what the sidecar adds on top of the core's own cost (1.0 = nothing)
    results["ratio_spool_off_vs_core"] = round(best["spool_off"] / best["core_inline"], 3)
    results["ratio_spool_on_vs_core"] = round(best["spool_on"] / best["core_inline"], 3)
    return results


def memory(sessions: int, spans_per_session: int) -> dict[str, float]:
    """Bytes retained by the store per span (and per open session), decoded records included."""

    def retained(n_sessions: int, per_session: int) -> int:
        requests = [
            ExportTraceServiceRequest.FromString(b) for b in build_requests(n_sessions, per_session)
        ]
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        store = SessionStore(parse_config({}).policy)
        for request in requests:
            records, _ = decode_request(request)
            store.add_all(records)
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(store.open) == n_sessions
        return after - before

    # total = sessions * (overhead + spans * per_span); two span counts give both terms
    n_sessions = max(100, sessions // 4)
    small, large = 3, 3 + spans_per_session * 2
    t_small = retained(n_sessions, small)
    t_large = retained(n_sessions, large)
    per_span = (t_large - t_small) / (n_sessions * (large - small))
    return {
        "bytes_per_retained_span": round(per_span),
        "bytes_per_open_session_overhead": round(t_small / n_sessions - small * per_span),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--spans-per-session", type=int, default=6)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    # memory first: freeing the throughput runs' garbage would skew tracemalloc's differences
    footprint = memory(args.sessions, args.spans_per_session)
    results = throughput(args)
    results["memory"] = footprint
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
