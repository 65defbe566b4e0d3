"""Helpers shared by the `serve.workers` and worker-fault tests (moved out of test_workers.py,
test_workers_restart.py and test_worker_faults.py: a test module imports no other test module)."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.sidecar.config import parse_serve
from spanjudge.sidecar.server import Sidecar
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from spanjudge.values import Verdict
from tests.sidecar.helpers import (
    FIXTURES,
    Received,
    SidecarProcess,
    VerdictServer,
    _Logs,
    _Traces,
    _value,
    serve_config,
    synthetic_session,
    to_sdk,
    wait_for,
)

# fixtures whose traces carry key-less spans (joined to a session by their trace) and sessions
# that span several traces. No two share a trace id, as real traces never do: the scripted id
# generators gave four of haystack's traces the ids of genai_manual's, and which session such a
# span joins would depend on when it arrives.
MIXED = [
    FIXTURES / "adk" / "adk.jsonl",
    FIXTURES / "agent_framework" / "agent_framework.jsonl",
    FIXTURES / "mastra" / "mastra.jsonl",
    FIXTURES / "mcp" / "mcp_openinference.jsonl",
    FIXTURES / "genai_manual" / "genai_manual.jsonl",
    FIXTURES / "openllmetry" / "openllmetry.jsonl",
    FIXTURES / "strands" / "strands_default.jsonl",
]


def _config(
    tmp: Path, workers: int, *, sessions: dict[str, Any] | None = None, **serve: Any
) -> dict[str, Any]:
    """A serve config on free ports (HTTP too) with ``workers`` processes, spool in ``tmp``."""
    return serve_config(
        tmp, sessions=sessions, workers=workers, **{"http_endpoint": "127.0.0.1:0", **serve}
    )


def _env(verdicts: VerdictServer) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": verdicts.endpoint, "OTEL_EXPORTER_OTLP_INSECURE": "true"}


def _as_exported() -> list[SpanRecord]:
    """Every span of the mixed fixtures in the order an SDK exports them: by end time, so a
    trace's key-less children mostly arrive before the root that carries the session key."""
    spans: list[SpanRecord] = []
    files: dict[str, Path] = {}  # trace id -> the fixture it is in
    for path in MIXED:
        for chunk in read_input(str(path)):
            for span in chunk.spans:
                first = files.setdefault(span.trace_id, path)
                assert first == path, f"trace {span.trace_id} in {first} and {path}"
                spans.append(span)
    return sorted(spans, key=lambda s: s.end_unix_nano)


class _Counters(metrics_service_pb2_grpc.MetricsServiceServicer):
    """The latest cumulative value of every `spanjudge.*` counter series the sidecar sent."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, frozenset[tuple[str, Any]]], float] = {}

    def Export(self, request: Any, context: Any) -> Any:
        for rm in request.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.WhichOneof("data") != "sum":
                        continue
                    for point in metric.sum.data_points:
                        attrs = frozenset((kv.key, _value(kv.value)) for kv in point.attributes)
                        value = point.as_int if point.HasField("as_int") else point.as_double
                        self.values[(metric.name, attrs)] = value
        return metrics_service_pb2.ExportMetricsServiceResponse()


class _Receiver(VerdictServer):
    """The helpers' verdict receiver, with the counters of the metrics export kept too."""

    def __init__(self) -> None:
        self.received = Received()
        self.counters = _Counters()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
            _Traces(self.received), self.server
        )
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_Logs(self.received), self.server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(self.counters, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()


def _verdicts(server: VerdictServer) -> dict[str, tuple[Any, ...]]:
    return {
        vid: (
            v["session.id"],
            v["spanjudge.revision"],
            v["gen_ai.evaluation.name"],
            v["spanjudge.outcome"],
            v.get("gen_ai.evaluation.score.value"),
            v.get("gen_ai.evaluation.score.label"),
        )
        for vid, v in server.received.verdicts().items()
    }


def _send(endpoint: str, spans: list[SpanRecord]) -> None:
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
    try:
        for i in range(0, len(spans), 3):  # small requests: a trace spans many of them
            assert exporter.export(to_sdk(spans[i : i + 3])) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()


def _stop(*processes: SidecarProcess | None) -> None:
    for proc in processes:
        if proc is not None and proc.proc is not None and proc.proc.poll() is None:
            proc.kill9()


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its reaper has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


class _Raising:
    """A third-party evaluator that raises what it is given for the sessions it names."""

    def __init__(self, name: str, error: BaseException, sessions: set[str]) -> None:
        self.name = name
        self.error = error
        self.sessions = sessions
        self.calls = 0

    def evaluate(self, ctx: Any) -> list[Verdict]:
        self.calls += 1
        if ctx.trajectory.session_id in self.sessions:
            raise self.error
        return [
            Verdict(evaluator=self.name, outcome="pass", score=1.0, label="ok", explanation="ok")
        ]


class _Held(_Raising):
    """An evaluator that holds each session until ``release`` is set (30 s at most): the
    worker is stuck inside an evaluation meanwhile."""

    def __init__(self, name: str) -> None:
        super().__init__(name, RuntimeError(), set())
        self.release = threading.Event()

    def evaluate(self, ctx: Any) -> list[Verdict]:
        self.release.wait(30)
        return super().evaluate(ctx)


def _sidecar(
    tmp: Path,
    engine_extra: Any,
    verdicts: VerdictServer,
    sessions: dict[str, Any] | None = None,
    **serve: Any,
) -> Sidecar:
    raw = {
        "grpc_endpoint": "127.0.0.1:0",
        "http_endpoint": "127.0.0.1:0",
        "metrics_endpoint": None,
        "tick_interval_s": 0.05,
        "export": {"enabled": True, "endpoint": verdicts.endpoint, "insecure": True},
        "spool": {"path": str(tmp / "spool.db")},
        **serve,
    }
    problems: list[str] = []
    serve_config = parse_serve(raw, "serve", problems)
    assert not problems
    config = parse_config({"sessions": sessions or {"idle_timeout_s": 60, "end_grace_s": 0.1}})
    engine = Engine(config)
    if engine_extra is not None:
        engine.evaluators.append(engine_extra)
    sidecar = Sidecar(config, serve_config, engine=engine)
    sidecar.start()
    return sidecar


def _stuck_on_first(sidecar: Sidecar) -> OTLPSpanExporter:
    """Send the session "first" to a sidecar whose evaluator holds each session (`_Held`), and
    wait until the worker took it: it is stuck evaluating "first", nothing more is taken. The
    exporter is the test's, to send more with."""
    assert sidecar.grpc is not None
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True, timeout=2)
    assert exporter.export(synthetic_session("first")) == SpanExportResult.SUCCESS
    assert wait_for(lambda: sidecar.worker.pending_spans == 0, 10)
    time.sleep(0.3)
    return exporter


def _stop_ends_at_the_deadline(
    sidecar: Sidecar, held: _Held, verdicts: VerdictServer, log: Any, session_id: str, step: str
) -> None:
    """`sidecar.stop()` (a 3 s shutdown budget) while ``held`` keeps an evaluation of
    ``session_id`` hanging: the stop returns within 5 s all the same, the log says the worker
    did not stop in time in ``step``, the session is not judged and its request stays spooled
    for the next start. ``log`` is the test's caplog."""
    stopper = threading.Thread(target=sidecar.stop, daemon=True)
    started = time.monotonic()
    try:
        stopper.start()
        stopper.join(15)
        took = time.monotonic() - started
        assert not stopper.is_alive() and took < 5, took
        assert step in log.text
        assert session_id not in verdicts.received.sessions()
        assert sidecar.spool.requests == 1  # kept for the next start
    finally:
        held.release.set()
        stopper.join(35)
