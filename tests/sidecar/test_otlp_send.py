"""`serve`'s verdict export against real OTLP receivers, gRPC and HTTP/protobuf: a flush is
confirmed only when the endpoint accepted everything; transient failures are retried within the
call's time (the server's own wait honoured), others are not; headers, TLS (server and client
certificates), HTTP gzip and the `OTEL_EXPORTER_OTLP_*` fallbacks reach the wire as the
OpenTelemetry exporters send them; a partial success is accepted and said; an abort cuts a call
in flight; requests stay under a gRPC server's default size limit."""

from __future__ import annotations

import dataclasses
import glob
import http.server
import logging
import socket
import ssl
import threading
import time
from pathlib import Path

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ResourcePb
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.resources import Resource

from spanjudge import CollectingSink, __version__
from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.offline import run_offline
from spanjudge.sidecar.config import ExportConfig, parse_serve
from spanjudge.sidecar.export import (
    MAX_REQUEST_BYTES,
    ConfirmingExport,
    VerdictExport,
    build_verdict_export,
)
from spanjudge.sidecar.otlp_send import Sent
from spanjudge.values import SessionResult
from tests.sidecar.helpers import make_certs
from tests.support.otlp_receivers import GrpcOtlpReceiver, HttpOtlpReceiver

pytestmark = pytest.mark.slow
ENV = tuple(
    f"OTEL_EXPORTER_OTLP_{signal}{name}"
    for signal in ("", "TRACES_", "LOGS_")
    for name in (
        "ENDPOINT",
        "HEADERS",
        "COMPRESSION",
        "INSECURE",
        "CERTIFICATE",
        "CLIENT_KEY",
        "CLIENT_CERTIFICATE",
        "TIMEOUT",
        "PROTOCOL",
    )
)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def _export(**config: object) -> VerdictExport:
    return build_verdict_export(ExportConfig(enabled=True, **config), Resource.create({}))  # type: ignore[arg-type]


def _one_session(export: VerdictExport, name: str = "verdict") -> None:
    assert export.spans is not None and export.logs is not None
    export.spans.add([Span(name=name).SerializeToString()])
    export.logs.add([LogRecord(event_name="gen_ai.evaluation.result").SerializeToString()])


def _flush(export: VerdictExport) -> bool:
    assert export.spans is not None and export.logs is not None
    spans_ok = export.spans.flush()
    return export.logs.flush() and spans_ok


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED])
def test_grpc_transient_failures_are_retried_within_the_call(code: grpc.StatusCode) -> None:
    receiver = GrpcOtlpReceiver()
    wait = RetryInfo(retry_delay=Duration(nanos=100_000_000)).SerializeToString()
    receiver.failures = [(code, (("google.rpc.retryinfo-bin", wait),))] * 2
    export = _export(endpoint=f"http://127.0.0.1:{receiver.port}", timeout_s=10)
    try:
        _one_session(export)
        started = time.monotonic()
        assert _flush(export)
        assert time.monotonic() - started < 2  # the server's 0.1 s, not the 1 s, 2 s backoff
        assert len(receiver.arrived.traces) == 3 and len(receiver.arrived.logs) == 1
        assert export.backlog == 0
    finally:
        export.shutdown()
        receiver.stop()


def test_grpc_a_permanent_failure_is_not_retried_and_stays_queued() -> None:
    receiver = GrpcOtlpReceiver()
    receiver.failures = [(grpc.StatusCode.INVALID_ARGUMENT, ())]
    export = _export(endpoint=f"http://127.0.0.1:{receiver.port}", timeout_s=10)
    try:
        _one_session(export)
        assert not _flush(export)
        assert receiver.arrived.attempts == 2  # the spans once, the log records once
        assert export.spans is not None and export.spans.backlog == 1
        assert _flush(export)  # the next flush sends what waited
        assert export.backlog == 0
    finally:
        export.shutdown()
        receiver.stop()


def test_grpc_retries_end_with_the_calls_time() -> None:
    receiver = GrpcOtlpReceiver()
    receiver.failures = [(grpc.StatusCode.UNAVAILABLE, ())] * 20
    export = _export(endpoint=f"http://127.0.0.1:{receiver.port}", timeout_s=1.5)
    try:
        assert export.spans is not None
        export.spans.add([Span(name="verdict").SerializeToString()])
        started = time.monotonic()
        assert not export.spans.flush()
        assert time.monotonic() - started < 2.5
        assert 2 <= receiver.arrived.attempts <= 3  # at once, after about 1 s, not after 2 s
    finally:
        export.shutdown()
        receiver.stop()


def test_http_retries_429_and_5xx_as_the_server_asks_and_not_4xx() -> None:
    receiver = HttpOtlpReceiver()
    receiver.statuses = [503, 429]
    receiver.retry_after = "0"
    export = _export(
        endpoint=f"http://127.0.0.1:{receiver.port}", protocol="http/protobuf", timeout_s=10
    )
    try:
        _one_session(export)
        started = time.monotonic()
        assert _flush(export)
        assert time.monotonic() - started < 1.5  # Retry-After 0, not the 1 s, 2 s backoff
        assert len(receiver.arrived.traces) == 3 and len(receiver.arrived.logs) == 1
        receiver.statuses = [400]
        _one_session(export, "second")
        assert not _flush(export)
        assert len(receiver.arrived.traces) == 4  # not retried
        assert export.spans is not None and export.spans.backlog == 1
    finally:
        export.shutdown()
        receiver.stop()


def test_configured_headers_reach_both_transports() -> None:
    grpc_receiver, http_receiver = GrpcOtlpReceiver(), HttpOtlpReceiver()
    exports = [
        _export(endpoint=f"http://127.0.0.1:{grpc_receiver.port}", headers={"x-tenant": "acme"}),
        _export(
            endpoint=f"http://127.0.0.1:{http_receiver.port}",
            protocol="http/protobuf",
            headers={"X-Tenant": "acme"},
        ),
    ]
    try:
        for export in exports:
            _one_session(export)
            assert _flush(export)
        for arrived in (grpc_receiver.arrived, http_receiver.arrived):
            assert len(arrived.headers) == 2
            assert all(h.get("x-tenant") == "acme" for h in arrived.headers), arrived.headers
        assert all(
            h["content-type"] == "application/x-protobuf" for h in http_receiver.arrived.headers
        )
    finally:
        for export in exports:
            export.shutdown()
        grpc_receiver.stop()
        http_receiver.stop()


def test_http_environment_fallbacks_endpoint_headers_and_gzip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    traces, logs = HttpOtlpReceiver(), HttpOtlpReceiver()
    # the signal's endpoint is used as it is; the general one gets the signal's path
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{traces.port}/v1/traces"
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{logs.port}/")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-signal=traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-signal=any,authorization=Bearer%20t0k")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    export = _export(protocol="http/protobuf")
    try:
        _one_session(export)
        assert _flush(export)
        assert len(traces.arrived.traces) == 1 and len(logs.arrived.logs) == 1
        (trace_headers,), (log_headers,) = traces.arrived.headers, logs.arrived.headers
        assert trace_headers["x-signal"] == "traces" and "authorization" not in trace_headers
        assert log_headers["x-signal"] == "any"
        assert log_headers["authorization"] == "Bearer t0k"
        assert trace_headers["content-encoding"] == log_headers["content-encoding"] == "gzip"
    finally:
        export.shutdown()
        traces.stop()
        logs.stop()


def test_grpc_environment_fallbacks_endpoint_insecure_and_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver = GrpcOtlpReceiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"127.0.0.1:{receiver.port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")  # no scheme: TLS unless said
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=acme")
    # accepted with gzip on; whether the wire was compressed this receiver cannot see (grpcio
    # keeps `grpc-encoding` from the handler's metadata)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    export = _export()
    try:
        _one_session(export)
        assert _flush(export)
        assert [h.get("x-tenant") for h in receiver.arrived.headers] == ["acme", "acme"]
    finally:
        export.shutdown()
        receiver.stop()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_tls_with_a_ca_and_a_client_certificate(protocol: str, tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    if protocol == "grpc":
        receiver: GrpcOtlpReceiver | HttpOtlpReceiver = GrpcOtlpReceiver(
            grpc.ssl_server_credentials(
                [(certs.server_key.read_bytes(), certs.server_cert.read_bytes())],
                root_certificates=certs.ca.read_bytes(),
                require_client_auth=True,
            )
        )
    else:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(certs.ca))
        context.load_cert_chain(certs.server_cert, certs.server_key)
        context.verify_mode = ssl.CERT_REQUIRED
        receiver = HttpOtlpReceiver(tls=context)
    tls = {
        "endpoint": f"https://127.0.0.1:{receiver.port}",
        "protocol": protocol,
        "timeout_s": 3,
        "certificate_file": str(certs.ca),
    }
    trusted = _export(
        **tls,
        client_key_file=str(certs.client_key),
        client_certificate_file=str(certs.client_cert),
    )
    anonymous = _export(**tls)  # the server asks for a client certificate: refused
    try:
        _one_session(trusted)
        assert _flush(trusted)
        _one_session(anonymous)
        assert not _flush(anonymous)
        assert len(receiver.arrived.traces) == 1
    finally:
        trusted.shutdown()
        anonymous.shutdown()
        receiver.stop()


def test_a_partial_success_is_accepted_and_said(caplog: pytest.LogCaptureFixture) -> None:
    receiver = GrpcOtlpReceiver()
    receiver.trace_response = trace_service_pb2.ExportTraceServiceResponse(
        partial_success=trace_service_pb2.ExportTracePartialSuccess(
            rejected_spans=1, error_message="span too old"
        )
    )
    export = _export(endpoint=f"http://127.0.0.1:{receiver.port}")
    try:
        with caplog.at_level(logging.WARNING, logger="spanjudge.sidecar"):
            for _ in range(2):
                _one_session(export)
                assert _flush(export)  # a retry cannot help: not sent again
        said = [r for r in caplog.records if "rejected 1" in r.getMessage()]
        assert len(said) == 1 and "span too old" in said[0].getMessage()  # said once
        assert len(receiver.arrived.traces) == 2
    finally:
        export.shutdown()
        receiver.stop()


def test_an_abort_cuts_a_grpc_call_in_flight() -> None:
    receiver = GrpcOtlpReceiver()
    receiver.holding = True  # the endpoint takes the call and does not answer
    export = _export(endpoint=f"http://127.0.0.1:{receiver.port}", timeout_s=30)
    try:
        _abort_mid_call(export)
        assert receiver.arrived.attempts == 1
        assert export.spans is not None
        assert not export.spans.flush()  # aborted: nothing more is sent
        assert receiver.arrived.attempts == 1
    finally:
        export.shutdown()
        receiver.stop()


def _abort_mid_call(export: VerdictExport) -> None:
    """Queue one span and abort half a second into its flush, the endpoint holding the call:
    the flush ends within 3 s, unconfirmed, and the span stays queued (its session spooled)."""
    assert export.spans is not None
    export.spans.add([Span(name="verdict").SerializeToString()])
    abort = threading.Timer(0.5, export.abort)
    abort.start()
    try:
        started = time.monotonic()
        assert not export.spans.flush()
        assert time.monotonic() - started < 3
        assert export.spans.backlog == 1
    finally:
        abort.cancel()


@pytest.fixture(scope="module")
def results() -> list[SessionResult]:
    out = CollectingSink()
    folder = ROOT / "fixtures" / "strands"
    config = parse_config({"expectations_files": [str(folder / "expectations.yaml")]})
    run_offline(sorted(glob.glob(str(folder / "*.jsonl"))), Engine(config), out, skip_invalid=True)
    assert len(out.results) >= 2
    return out.results


def _with_verdicts(result: SessionResult, count: int, explanation: str) -> SessionResult:
    verdicts = tuple(
        dataclasses.replace(result.verdicts[i % len(result.verdicts)], explanation=explanation)
        for i in range(count)
    )
    return dataclasses.replace(result, verdicts=verdicts)


def test_a_session_with_many_verdicts_reaches_a_grpc_endpoint_with_the_default_limit(
    results: list[SessionResult],
) -> None:
    """3000 verdicts with 1.5 kB rationales are about 6 MB of log records: more than the 4 MiB
    a gRPC server (the Collector's receiver too) takes in one message by default. They arrive,
    in several requests, and the session after them too."""
    first, second = results[:2]
    receiver = GrpcOtlpReceiver()
    export = _export(endpoint=f"http://127.0.0.1:{receiver.port}", insecure=True, timeout_s=5)
    try:
        sink = export.sink()
        sink.emit(_with_verdicts(first, 3000, "x" * 1500))
        sink.emit(second)
        assert sink.flush(5.0)
        assert export.backlog == 0
        records = [r for request in receiver.arrived.logs for r in _records(request)]
        assert len(records) == 3000 + len(second.verdicts)
        assert len(receiver.arrived.logs) >= 2
        assert all(request.ByteSize() < 4 * 1024 * 1024 for request in receiver.arrived.logs)
    finally:
        export.shutdown()
        receiver.stop()


def test_many_large_evaluation_spans_reach_a_grpc_endpoint_with_the_default_limit(
    results: list[SessionResult],
) -> None:
    """40 sessions of 128 verdicts with 1.5 kB rationales: each evaluation span (an event per
    verdict) is about 200 kB, 40 of them about 8 MB, under the 512 spans of a request."""
    receiver = GrpcOtlpReceiver()
    export = _export(endpoint=f"http://127.0.0.1:{receiver.port}", insecure=True, timeout_s=5)
    try:
        sink = export.sink()
        big = _with_verdicts(results[0], 128, "y" * 1500)
        for _ in range(40):
            sink.emit(big)
        assert sink.flush(5.0)
        spans = [s for request in receiver.arrived.traces for s in _spans(request)]
        assert len(spans) == 40 and all(len(span.events) == 128 for span in spans)
    finally:
        export.shutdown()
        receiver.stop()


def test_an_item_too_large_for_the_endpoint_is_dropped_named_and_blocks_nothing(
    results: list[SessionResult], caplog: pytest.LogCaptureFixture
) -> None:
    """One verdict with a 5 MB rationale makes a span and a log record each over the
    endpoint's 4 MiB: each goes alone, is refused as too large, and is dropped with an error
    naming the session, instead of being retried for ever ahead of everything else."""
    huge = _with_verdicts(results[0], 1, "z" * 5_000_000)
    after = results[1]
    receiver = GrpcOtlpReceiver()
    export = _export(endpoint=f"http://127.0.0.1:{receiver.port}", insecure=True, timeout_s=5)
    try:
        sink = export.sink()
        with caplog.at_level(logging.WARNING, logger="spanjudge.sidecar"):
            sink.emit(huge)
            sink.emit(after)
            assert sink.flush(5.0)
        assert export.backlog == 0
        assert export.spans is not None and export.logs is not None
        assert export.spans.dropped == export.logs.dropped == 1
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 2
        assert all(huge.trajectory.session_id in e and "too large" in e for e in errors)
        arrived = [r for request in receiver.arrived.logs for r in _records(request)]
        assert len(arrived) == len(after.verdicts)  # the next session got through
    finally:
        export.shutdown()
        receiver.stop()


def _records(request: object) -> list[object]:
    return [r for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records]  # type: ignore[attr-defined]


def _spans(request: object) -> list[object]:
    return [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]  # type: ignore[attr-defined]


def test_a_configured_header_with_capitals_reaches_a_grpc_endpoint() -> None:
    """gRPC refuses metadata keys with capitals ("Invalid metadata"); HTTP takes any case."""
    receiver = GrpcOtlpReceiver()
    export = _export(
        endpoint=f"http://127.0.0.1:{receiver.port}", headers={"X-Tenant": "acme"}, timeout_s=2
    )
    try:
        _one_session(export)
        assert _flush(export)
        assert [h.get("x-tenant") for h in receiver.arrived.headers] == ["acme", "acme"]
    finally:
        export.shutdown()
        receiver.stop()


def test_an_http_redirect_is_not_a_confirmation(caplog: pytest.LogCaptureFixture) -> None:
    """A 3xx is not followed (nor is the body sent again): the items stay queued, and the
    health line says where the endpoint points."""

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(308)
            self.send_header("Location", "https://elsewhere.invalid/v1/traces")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    export = _export(
        endpoint=f"http://127.0.0.1:{server.server_address[1]}",
        protocol="http/protobuf",
        timeout_s=2,
    )
    try:
        assert export.spans is not None
        with caplog.at_level(logging.WARNING, logger="spanjudge"):
            export.spans.add([Span(name="verdict").SerializeToString()])
            assert not export.spans.flush()
        assert export.spans.backlog == 1
        said = " ".join(r.getMessage() for r in caplog.records)
        assert "redirected to https://elsewhere.invalid/v1/traces" in said
    finally:
        export.shutdown()
        server.shutdown()
        server.server_close()


def test_an_abort_cuts_an_http_call_in_flight() -> None:
    listener = socket.socket()  # takes the connection and never answers
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    held: list[tuple[socket.socket, object]] = []
    threading.Thread(target=lambda: held.append(listener.accept()), daemon=True).start()
    export = _export(
        endpoint=f"http://127.0.0.1:{listener.getsockname()[1]}",
        protocol="http/protobuf",
        timeout_s=8,
    )
    try:
        _abort_mid_call(export)
    finally:
        export.shutdown()
        for connection, _ in held:
            connection.close()
        listener.close()


def test_an_empty_request_is_not_sent() -> None:
    receiver = GrpcOtlpReceiver()
    export = _export(endpoint=f"http://127.0.0.1:{receiver.port}", timeout_s=2)
    try:
        assert export.spans is not None
        export.spans.add([])  # a session whose encoding added nothing
        assert export.spans.flush()
        assert receiver.arrived.attempts == 0
    finally:
        export.shutdown()
        receiver.stop()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_permanent_refusal_says_retrying_will_not_help(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    if protocol == "grpc":
        receiver: GrpcOtlpReceiver | HttpOtlpReceiver = GrpcOtlpReceiver()
        receiver.failures = [(grpc.StatusCode.INVALID_ARGUMENT, ())]
    else:
        receiver = HttpOtlpReceiver()
        receiver.statuses = [400]
    export = _export(endpoint=f"http://127.0.0.1:{receiver.port}", protocol=protocol, timeout_s=2)
    try:
        assert export.spans is not None
        with caplog.at_level(logging.WARNING, logger="spanjudge"):
            export.spans.add([Span(name="verdict").SerializeToString()])
            assert not export.spans.flush()
        assert export.spans.backlog == 1  # still queued
        said = [r.getMessage() for r in caplog.records if "failing" in r.getMessage()]
        assert len(said) == 1 and "retrying will not help" in said[0], said
    finally:
        export.shutdown()
        receiver.stop()


def test_export_calls_are_made_with_instrumentation_suppressed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under `opentelemetry-instrument`, the requests instrumentation skips a call made while
    instrumentation is suppressed; otherwise each export POST would make a span of its own."""
    from opentelemetry.instrumentation.utils import is_instrumentation_enabled
    from requests.adapters import HTTPAdapter

    seen: list[bool] = []
    send = HTTPAdapter.send

    def watched(self: HTTPAdapter, *args: object, **kwargs: object) -> object:
        seen.append(not is_instrumentation_enabled())  # what the instrumentations ask
        return send(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(HTTPAdapter, "send", watched)
    receiver = HttpOtlpReceiver()
    export = _export(endpoint=f"http://127.0.0.1:{receiver.port}", protocol="http/protobuf")
    try:
        _one_session(export)
        assert _flush(export)
        assert seen == [True, True]
    finally:
        export.shutdown()
        receiver.stop()


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION"]
)
def test_deflate_over_grpc_is_refused_at_start(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "deflate")
    problems: list[str] = []
    parse_serve({"export": {"endpoint": "http://collector:4317"}}, "serve", problems)
    assert len(problems) == 1 and problems[0].startswith(f"env {variable}: deflate"), problems
    problems.clear()  # HTTP takes it
    parse_serve(
        {"export": {"endpoint": "http://collector:4318", "protocol": "http/protobuf"}},
        "serve",
        problems,
    )
    assert problems == []


def test_a_missing_certificate_from_the_environment_is_named_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(tmp_path / "missing-ca.pem"))
    problems: list[str] = []
    parse_serve({"export": {"endpoint": "https://collector:4317"}}, "serve", problems)
    assert problems == [
        f"env OTEL_EXPORTER_OTLP_CERTIFICATE: no such file {str(tmp_path / 'missing-ca.pem')!r}"
    ]


def test_a_session_split_across_requests_is_confirmed_only_once_all_arrived(
    results: list[SessionResult],
) -> None:
    """The worker releases a session from the spool only when the flush says True: with its
    log records in several requests, a refusal of the second keeps the flush unconfirmed."""
    receiver = HttpOtlpReceiver()
    receiver.statuses = [200, 200, 400]  # the span, the first records, then a refusal
    export = _export(
        endpoint=f"http://127.0.0.1:{receiver.port}", protocol="http/protobuf", timeout_s=5
    )
    try:
        sink = export.sink()
        sink.emit(_with_verdicts(results[0], 3000, "x" * 1500))
        assert not sink.flush(5.0)
        assert export.logs is not None and 0 < export.logs.backlog < 3000
        assert sink.flush(5.0)  # what waited goes next time
        records = [
            r
            for request in receiver.arrived.logs[:1] + receiver.arrived.logs[2:]
            for r in _records(request)
        ]
        assert len(records) == 3000
    finally:
        export.shutdown()
        receiver.stop()


def test_requests_split_at_the_size_bound_are_what_protobuf_writes(
    results: list[SessionResult],
) -> None:
    """A session's log records over the byte bound go in several requests: each is, byte for
    byte, what protobuf writes for its resource, scope and items (the envelopes' lengths
    right), under the bound, and the items arrive in order, as they were encoded. The span's
    request too."""
    receiver = GrpcOtlpReceiver()
    resource = Resource.create(
        {"service.name": "split-test"}, schema_url="https://opentelemetry.io/schemas/1.26.0"
    )
    export = build_verdict_export(
        ExportConfig(
            enabled=True, endpoint=f"http://127.0.0.1:{receiver.port}", insecure=True, timeout_s=5
        ),
        resource,
    )
    assert export.spans is not None and export.logs is not None
    sent = {"traces": _kept(export.spans), "logs": _kept(export.logs)}
    resource_pb = ResourcePb(
        attributes=[
            KeyValue(key=key, value=AnyValue(string_value=str(value)))
            for key, value in resource.attributes.items()
        ]
    )
    scope = InstrumentationScope(name="spanjudge", version=__version__)
    try:
        encoded = export.encoder.encode(_with_verdicts(results[0], 3000, "x" * 1500))
        export.spans.add([encoded.span], "split")
        export.logs.add(encoded.log_records, "split")
        assert export.spans.flush() and export.logs.flush()
        assert len(sent["logs"]) >= 2 and len(sent["traces"]) == 1
        records = []
        for raw, arrived in zip(sent["logs"], receiver.arrived.logs, strict=True):
            items = list(arrived.resource_logs[0].scope_logs[0].log_records)
            expected = ExportLogsServiceRequest(
                resource_logs=[
                    ResourceLogs(
                        resource=resource_pb,
                        scope_logs=[ScopeLogs(scope=scope, log_records=items)],
                        schema_url=resource.schema_url,
                    )
                ]
            )
            assert raw == expected.SerializeToString()
            assert len(raw) <= MAX_REQUEST_BYTES
            records += [record.SerializeToString() for record in items]
        assert records == encoded.log_records
        (trace_raw,), (trace_arrived,) = sent["traces"], receiver.arrived.traces
        (span,) = trace_arrived.resource_spans[0].scope_spans[0].spans
        assert span.SerializeToString() == encoded.span
        assert (
            trace_raw
            == trace_service_pb2.ExportTraceServiceRequest(
                resource_spans=[
                    ResourceSpans(
                        resource=resource_pb,
                        scope_spans=[ScopeSpans(scope=scope, spans=[span])],
                        schema_url=resource.schema_url,
                    )
                ]
            ).SerializeToString()
        )
    finally:
        export.shutdown()
        receiver.stop()


def _kept(queue: ConfirmingExport) -> list[bytes]:
    """The requests ``queue`` sends from now on, as they are sent."""
    kept: list[bytes] = []
    send = queue.sender.send

    def keeping(request: bytes, timeout_s: float) -> Sent:
        kept.append(request)
        return send(request, timeout_s)

    queue.sender.send = keeping  # type: ignore[method-assign]
    return kept
