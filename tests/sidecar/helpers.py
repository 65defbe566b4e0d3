"""Real parts for sidecar tests: a `spanjudge serve` subprocess, a verdict-receiving OTLP server,
SDK spans rebuilt from fixture records, synthetic sessions, and certificates made on the fly."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import yaml
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from spanjudge.spans.record import SpanRecord

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
_KINDS = {
    "internal": SpanKind.INTERNAL,
    "unspecified": SpanKind.INTERNAL,
    "server": SpanKind.SERVER,
    "client": SpanKind.CLIENT,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}
_STATUS = {"unset": StatusCode.UNSET, "ok": StatusCode.OK, "error": StatusCode.ERROR}


def _ctx(trace_id: str, span_id: str) -> SpanContext:
    return SpanContext(int(trace_id, 16), int(span_id, 16), False, TraceFlags(1))


def to_sdk(records: Iterable[SpanRecord]) -> list[ReadableSpan]:
    """SDK spans equal to the records, so the real OTLP exporters can send fixture traces."""
    out = []
    for r in records:
        out.append(
            ReadableSpan(
                name=r.name,
                context=_ctx(r.trace_id, r.span_id),
                parent=_ctx(r.trace_id, r.parent_span_id) if r.parent_span_id else None,
                resource=Resource(dict(r.resource)),  # type: ignore[arg-type]
                attributes=dict(r.attributes),  # type: ignore[arg-type]
                events=[
                    Event(e.name, dict(e.attributes), e.time_unix_nano)  # type: ignore[arg-type]
                    for e in r.events
                ],
                links=[Link(_ctx(link.trace_id, link.span_id)) for link in r.links],
                kind=_KINDS[r.kind],
                status=Status(_STATUS[r.status], r.status_message),
                start_time=r.start_unix_nano,
                end_time=r.end_unix_nano,
                instrumentation_scope=InstrumentationScope(r.scope_name or "", r.scope_version),
            )
        )
    return out


def synthetic_session(
    session_id: str,
    *,
    tools: int = 2,
    end: bool = True,
    agent: str = "bench-agent",
    expected_skills: tuple[str, ...] = (),
) -> list[ReadableSpan]:
    """One agent turn with tool calls, ended with `spanjudge.session.end` when ``end``; the
    agent may name skills it is expected to load (`spanjudge.expected_skills`)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent-test")
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "session.id": session_id,
    }
    if expected_skills:
        attrs["spanjudge.expected_skills"] = list(expected_skills)
    if end:
        attrs["spanjudge.session.end"] = True
    with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attrs):
        for i in range(tools):
            with tracer.start_as_current_span(
                "execute_tool read_file",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "read_file",
                    "gen_ai.tool.call.id": f"call-{i}",
                    "gen_ai.tool.call.arguments": json.dumps({"path": f"f{i}.txt"}),
                    "session.id": session_id,
                },
            ):
                pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


# --- the verdict receiver ---


@dataclass
class Received:
    """Verdicts the sidecar exported: evaluation spans and log records."""

    eval_spans: list[dict[str, Any]] = field(default_factory=list)
    log_records: list[dict[str, Any]] = field(default_factory=list)
    metric_names: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def log_ids(self) -> dict[str, set[str]]:
        """Session id -> the verdict ids that arrived as log records."""
        with self.lock:
            out: dict[str, set[str]] = {}
            for record in self.log_records:
                out.setdefault(record["session.id"], set()).add(record["spanjudge.verdict.id"])
            return out

    def span_ids(self) -> dict[str, set[str]]:
        """Session id -> the verdict ids that arrived as evaluation span events."""
        with self.lock:
            out: dict[str, set[str]] = {}
            for span in self.eval_spans:
                ids = out.setdefault(span["attrs"]["session.id"], set())
                ids.update(event["spanjudge.verdict.id"] for event in span["events"])
            return out

    def verdicts(self) -> dict[str, dict[str, Any]]:
        """Verdict events by stable id (duplicates after a crash collapse here)."""
        with self.lock:
            out = {}
            for span in self.eval_spans:
                for event in span["events"]:
                    out[event["spanjudge.verdict.id"]] = {**event, **span["attrs"]}
            return out

    def sessions(self) -> dict[str, set[int]]:
        """Session id -> the revisions evaluated."""
        with self.lock:
            out: dict[str, set[int]] = {}
            for span in self.eval_spans:
                attrs = span["attrs"]
                out.setdefault(attrs["session.id"], set()).add(attrs["spanjudge.revision"])
            return out


def _value(v: Any) -> Any:
    which = v.WhichOneof("value")
    return getattr(v, which) if which else None


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request: Any, context: Any) -> Any:
        with self.received.lock:
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        if span.name != "spanjudge.evaluate":
                            continue
                        self.received.eval_spans.append(
                            {
                                "attrs": {kv.key: _value(kv.value) for kv in span.attributes},
                                "events": [
                                    {kv.key: _value(kv.value) for kv in e.attributes}
                                    for e in span.events
                                ],
                                "parent": span.parent_span_id.hex(),
                                "trace": span.trace_id.hex(),
                            }
                        )
        return trace_service_pb2.ExportTraceServiceResponse()


class _Logs(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request: Any, context: Any) -> Any:
        with self.received.lock:
            for rl in request.resource_logs:
                for sl in rl.scope_logs:
                    for record in sl.log_records:
                        self.received.log_records.append(
                            {kv.key: _value(kv.value) for kv in record.attributes}
                        )
        return logs_service_pb2.ExportLogsServiceResponse()


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request: Any, context: Any) -> Any:
        with self.received.lock:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    self.received.metric_names.update(m.name for m in sm.metrics)
        return metrics_service_pb2.ExportMetricsServiceResponse()


class VerdictServer:
    """A real OTLP/gRPC server (traces and logs) that records what the sidecar sends."""

    def __init__(self, port: int = 0, received: Received | None = None) -> None:
        """``port`` and ``received`` let a test bring a stopped endpoint back where it was."""
        self.received = received if received is not None else Received()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
            _Traces(self.received), self.server
        )
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_Logs(self.received), self.server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(
            _Metrics(self.received), self.server
        )
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.server.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(0).wait()


# --- the sidecar subprocess ---


def serve_config(
    tmp: Path,
    *,
    sessions: dict[str, Any] | None = None,
    workers: int | None = None,
    spool: dict[str, Any] | None = None,
    **serve: Any,
) -> dict[str, Any]:
    """A configuration for a test's `spanjudge serve`: OTLP/gRPC on a free port of 127.0.0.1,
    OTLP/HTTP and /metrics off, quick ticks, the spool in ``tmp``. ``serve`` keys replace these
    (``http_endpoint="127.0.0.1:0"`` turns HTTP on), ``spool`` keys are added to the spool's;
    ``workers`` left out is serve's default (the cores it may run on)."""
    settings: dict[str, Any] = {
        "grpc_endpoint": "127.0.0.1:0",
        "http_endpoint": None,
        "metrics_endpoint": None,
        "tick_interval_s": 0.05,
        "spool": {"path": str(tmp / "spool.db"), **(spool or {})},
    }
    if workers is not None:
        settings["workers"] = workers
    settings.update(serve)
    return {
        "sessions": sessions or {"idle_timeout_s": 120.0, "end_grace_s": 0.2},
        "serve": settings,
    }


class SidecarProcess:
    """`python -m spanjudge.sidecar` with a config file; ports come back through --ready-file.
    ``command`` runs another module's `-m` command line before serve's own arguments."""

    def __init__(
        self,
        tmp: Path,
        config: dict[str, Any],
        env: dict[str, str] | None = None,
        command: tuple[str, ...] = ("spanjudge.sidecar",),
    ):
        self.tmp = tmp
        self.command = command
        self.config_path = tmp / "spanjudge.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.ready = tmp / "ready.json"
        self.env = {**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.endpoints: dict[str, Any] = {}
        self.log = tmp / "sidecar.log"

    def start(self, timeout_s: float = 30.0) -> SidecarProcess:
        self.launch()
        return self.wait_ready(timeout_s)

    def launch(self) -> SidecarProcess:
        """Start the process, without waiting until it listens (`wait_ready`)."""
        self.ready.unlink(missing_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    *self.command,
                    "--config",
                    str(self.config_path),
                    "--ready-file",
                    str(self.ready),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        return self

    def wait_ready(self, timeout_s: float = 30.0) -> SidecarProcess:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while not self.ready.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"sidecar exited: {self.log.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"sidecar not ready: {self.log.read_text()}")
            time.sleep(0.05)
        self.endpoints = json.loads(self.ready.read_text())
        return self

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout_s: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout_s)

    def wait_exit(self, timeout_s: float = 30.0) -> int:
        """The exit status once serve exits by itself (after a signal it was sent)."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            # What the server said is the only clue to a shutdown that hangs (the test's
            # directory, with its log, is gone a few runs later): stacks first, then its log.
            self.proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(
                f"serve did not exit within {timeout_s:.0f}s of the signal to stop; its log:\n"
                + self.log.read_text(errors="replace")[-20_000:]
            ) from None


def wait_for(predicate: Any, timeout_s: float = 20.0, interval_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return bool(predicate())


# --- certificates ---


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_certs(directory: Path) -> Certs:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def key() -> Any:
        return ec.generate_private_key(ec.SECP256R1())

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = key()
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("spanjudge test CA"))
        .issuer_name(name("spanjudge test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(cn: str, usage: Any, san: bool) -> tuple[Any, Any]:
        k = key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(ca.subject)
            .public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if san:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        return builder.sign(ca_key, hashes.SHA256()), k

    server, server_key = leaf("localhost", ExtendedKeyUsageOID.SERVER_AUTH, True)
    client, client_key = leaf("agent", ExtendedKeyUsageOID.CLIENT_AUTH, False)

    def write(path: Path, obj: Any, private: bool = False) -> Path:
        if private:
            data = obj.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        else:
            data = obj.public_bytes(serialization.Encoding.PEM)
        path.write_bytes(data)
        return path

    return Certs(
        ca=write(directory / "ca.pem", ca),
        server_cert=write(directory / "server.pem", server),
        server_key=write(directory / "server.key", server_key, True),
        client_cert=write(directory / "client.pem", client),
        client_key=write(directory / "client.key", client_key, True),
    )
