"""Verdict export errors on a real sidecar: an exporter that raises a bug goes through the one
internal-error guard (logged once, counted in `spanjudge.internal_errors`, its batch kept and
sent later); an exporter raising a network error is the endpoint failing, not a bug: warned
about once, not counted, never raised even under the test suite, and the verdicts still arrive."""

from __future__ import annotations

import glob
import logging
import re
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge import CollectingSink
from spanjudge.config import parse_config
from spanjudge.emit import otlp
from spanjudge.engine import Engine
from spanjudge.guard import contained
from spanjudge.offline import run_offline
from spanjudge.sidecar.config import ExportConfig
from spanjudge.sidecar.export import build_verdict_export
from spanjudge.sidecar.server import Sidecar
from tests.sidecar.conftest import MakeSidecar
from tests.sidecar.helpers import ROOT, VerdictServer, synthetic_session, wait_for
from tests.support.otlp_receivers import GrpcOtlpReceiver

pytestmark = pytest.mark.slow
SESSIONS = ("exp-a", "exp-b")


def _start(make_sidecar: MakeSidecar, verdicts: VerdictServer) -> Sidecar:
    return make_sidecar(
        sessions={"idle_timeout_s": 60, "end_grace_s": 0.1},
        metrics_endpoint="127.0.0.1:0",
        export={"enabled": True, "endpoint": verdicts.endpoint, "insecure": True},
    )


def _failing(sidecar: Sidecar, error: Callable[[], Exception], times: int) -> list[int]:
    """The sidecar's evaluation span sender raises ``error()`` on its next ``times`` calls."""
    assert sidecar.export.spans is not None
    sender = sidecar.export.spans.sender
    real = sender.send
    calls = [0]

    def send(request: Any, timeout_s: float) -> Any:
        calls[0] += 1
        if calls[0] <= times:
            raise error()
        return real(request, timeout_s)

    sender.send = send  # type: ignore[method-assign]
    return calls


def _send(sidecar: Sidecar) -> None:
    assert sidecar.grpc is not None
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True)
    for session in SESSIONS:
        assert exporter.export(synthetic_session(session)) == SpanExportResult.SUCCESS
    exporter.shutdown()


def _internal_errors(sidecar: Sidecar, where: str) -> float:
    assert sidecar.endpoints is not None
    url = f"http://{sidecar.endpoints.metrics}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    pattern = rf'^spanjudge_internal_errors_total{{[^}}]*where="{where}"[^}}]*}} (\S+)$'
    return sum(float(v) for v in re.findall(pattern, text, re.M))


def _delivered(verdicts: VerdictServer) -> bool:
    return set(SESSIONS) <= set(verdicts.received.sessions())


def test_an_exporter_bug_is_guarded_counted_and_loses_nothing(
    make_sidecar: MakeSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    verdicts = VerdictServer()
    sidecar = _start(make_sidecar, verdicts)
    try:
        calls = _failing(sidecar, lambda: TypeError("exporter bug"), times=3)
        caplog.set_level(logging.WARNING, logger="spanjudge.sidecar")
        with contained():
            _send(sidecar)
            assert wait_for(lambda: _delivered(verdicts), 20)
        assert calls[0] > 3
        logged = [r for r in caplog.records if "verdict export" in r.getMessage()]
        assert len(logged) == 1  # once, with its traceback
        assert logged[0].exc_info is not None and "exporter bug" in str(logged[0].exc_info[1])
        assert _internal_errors(sidecar, "verdict export") == 3  # every occurrence counted
        assert wait_for(lambda: sidecar.spool.requests == 0, 10)  # confirmed, released
    finally:
        sidecar.stop()  # before its endpoint goes
        verdicts.stop()


def test_an_endpoint_failure_is_no_internal_error(
    make_sidecar: MakeSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    verdicts = VerdictServer()
    sidecar = _start(make_sidecar, verdicts)
    try:
        # not contained: were this treated as a bug, the test suite's guards would raise it
        calls = _failing(sidecar, lambda: ConnectionError("connection refused"), times=4)
        caplog.set_level(logging.WARNING, logger="spanjudge.sidecar")
        _send(sidecar)
        assert wait_for(lambda: _delivered(verdicts), 20)
        assert calls[0] > 4
        assert sidecar.worker.crashed is None
        assert not [r for r in caplog.records if r.name.startswith("spanjudge") and r.levelno >= 40]
        warned = [r for r in caplog.records if "connection refused" in r.getMessage()]
        assert len(warned) == 1  # once for the outage, not once a retry
        assert _internal_errors(sidecar, "verdict export") == 0
        assert sidecar.worker.guard.errors == 0 and sidecar.worker.pipeline.errors == 0
    finally:
        sidecar.stop()  # before its endpoint goes
        verdicts.stop()


def test_a_call_cut_by_the_shutdown_abort_is_no_bug() -> None:
    """At the shutdown deadline the worker aborts the export; a call in flight then fails
    (gRPC: ValueError "Cannot invoke RPC on closed channel!"). That is the abort, not a bug:
    not raised even under the test suite, not counted, and the verdicts stay unconfirmed."""
    bugs: list[str] = []
    export = build_verdict_export(
        ExportConfig(enabled=True, endpoint="http://127.0.0.1:9", insecure=True),
        Resource.create({}),
        bugs.append,
    )
    assert export.spans is not None
    spans = export.spans

    def aborted(request: Any, timeout_s: float) -> Any:
        export.abort()  # the deadline passes while this call is on the wire
        raise ValueError("Cannot invoke RPC on closed channel!")

    spans.sender.send = aborted  # type: ignore[method-assign]
    spans.add([Span(name="spanjudge.evaluate").SerializeToString()])
    assert spans.flush() is False
    assert bugs == []
    assert spans.backlog == 1  # kept: the spool still holds its session


def test_a_session_whose_encoding_fails_sends_none_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug while a session's verdicts are encoded (handed to the pipeline's guard) leaves
    nothing of that session in the export: no span without its events, no stray records."""
    out = CollectingSink()
    folder = ROOT / "fixtures" / "strands"
    config = parse_config({"expectations_files": [str(folder / "expectations.yaml")]})
    run_offline(sorted(glob.glob(str(folder / "*.jsonl"))), Engine(config), out, skip_invalid=True)
    broken, whole = out.results[0], out.results[1]
    assert len(broken.verdicts) > 2
    receiver = GrpcOtlpReceiver()
    export = build_verdict_export(
        ExportConfig(enabled=True, endpoint=f"http://127.0.0.1:{receiver.port}", insecure=True),
        Resource.create({}),
    )
    real = otlp._shape_of
    calls = [0]

    def failing_third(*args: Any) -> Any:
        calls[0] += 1
        if calls[0] == 3:
            raise TypeError("encoder bug")
        return real(*args)

    try:
        sink = export.sink()
        monkeypatch.setattr(otlp, "_shape_of", failing_third)
        with pytest.raises(TypeError):
            sink.emit(broken)
        monkeypatch.undo()
        assert export.backlog == 0
        sink.emit(whole)
        assert sink.flush(10.0)
        sessions = {
            kv.value.string_value
            for request in receiver.arrived.traces
            for span in request.resource_spans[0].scope_spans[0].spans
            for kv in span.attributes
            if kv.key == "session.id"
        }
        assert sessions == {whole.trajectory.session_id}
        records = [
            record for request in receiver.arrived.logs
            for record in request.resource_logs[0].scope_logs[0].log_records
        ]  # fmt: skip
        assert len(records) == len(whole.verdicts)
    finally:
        export.shutdown()
        receiver.stop()
