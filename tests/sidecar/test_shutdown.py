"""SIGTERM: stop accepting, then evaluate open sessions (marked incomplete) or keep them spooled
for the next start, and flush the exporters before exiting 0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.sidecar.helpers import SidecarProcess, VerdictServer, synthetic_session, wait_for

pytestmark = pytest.mark.slow


def _config(tmp: Path, on_shutdown: str, idle_timeout_s: float) -> dict[str, Any]:
    return {
        "sessions": {"idle_timeout_s": idle_timeout_s},
        "serve": {
            "grpc_endpoint": "127.0.0.1:0",
            "http_endpoint": None,
            "metrics_endpoint": None,
            "on_shutdown": on_shutdown,
            "shutdown_timeout_s": 10,
            "spool": {"path": str(tmp / "spool.db")},
        },
    }


def _send(sidecar: SidecarProcess, session_id: str) -> None:
    exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
    assert exporter.export(synthetic_session(session_id, end=False)) == SpanExportResult.SUCCESS
    exporter.shutdown()


@pytest.fixture
def verdicts() -> Any:
    server = VerdictServer()
    yield server
    server.stop()


def _env(verdicts: VerdictServer) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": verdicts.endpoint, "OTEL_EXPORTER_OTLP_INSECURE": "true"}


def test_sigterm_evaluates_open_sessions_as_incomplete(
    tmp_path: Path, verdicts: VerdictServer
) -> None:
    sidecar = SidecarProcess(tmp_path, _config(tmp_path, "evaluate", 600), _env(verdicts)).start()
    _send(sidecar, "open-at-shutdown")
    assert sidecar.terminate() == 0
    # flushed before exit: nothing to wait for
    [span] = verdicts.received.eval_spans
    assert span["attrs"]["session.id"] == "open-at-shutdown"
    assert span["attrs"]["spanjudge.session.complete"] is False


def test_sigterm_keeps_open_sessions_spooled_for_the_next_start(
    tmp_path: Path, verdicts: VerdictServer
) -> None:
    config = _config(tmp_path, "spool", 1.5)
    sidecar = SidecarProcess(tmp_path, config, _env(verdicts)).start()
    _send(sidecar, "resumed")
    assert sidecar.terminate() == 0
    assert verdicts.received.eval_spans == []
    again = SidecarProcess(tmp_path, config, _env(verdicts)).start()
    try:
        assert wait_for(lambda: "resumed" in verdicts.received.sessions(), 15)
        assert verdicts.received.sessions() == {"resumed": {1}}
        [span] = verdicts.received.eval_spans
        assert span["attrs"]["spanjudge.session.complete"] is True  # closed by idle, complete
    finally:
        assert again.terminate() == 0
