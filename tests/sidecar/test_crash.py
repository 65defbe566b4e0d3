"""`kill -9` in the middle of a load, restart on the same spool: every session whose spans were
acknowledged is evaluated, once (verdict ids de-duplicate any re-emission), never twice over."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.sidecar.helpers import (
    SidecarProcess,
    VerdictServer,
    serve_config,
    synthetic_session,
    wait_for,
)

pytestmark = pytest.mark.slow
SESSIONS = 240


def _config(tmp: Path, grpc_endpoint: str, workers: int) -> dict[str, Any]:
    return serve_config(tmp, workers=workers, grpc_endpoint=grpc_endpoint)


@pytest.mark.parametrize("workers", [1, 2])
def test_kill9_mid_load_loses_nothing_and_evaluates_once(tmp_path: Path, workers: int) -> None:
    verdicts = VerdictServer()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": verdicts.endpoint, "OTEL_EXPORTER_OTLP_INSECURE": "true"}
    first = SidecarProcess(tmp_path, _config(tmp_path, "127.0.0.1:0", workers), env).start()
    endpoint = first.endpoints["grpc"]
    sessions = {f"crash-{i:04d}": synthetic_session(f"crash-{i:04d}") for i in range(SESSIONS)}
    acknowledged: list[str] = []
    failed: list[str] = []

    def send() -> None:
        exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=60)
        for session_id, spans in sessions.items():
            root = [s for s in spans if s.parent is None]
            children = [s for s in spans if s.parent is not None]
            # children first, the root (with the end marker) in a later request
            ok = exporter.export(children) == SpanExportResult.SUCCESS
            ok = exporter.export(root) == SpanExportResult.SUCCESS and ok
            (acknowledged if ok else failed).append(session_id)
        exporter.shutdown()

    sender = threading.Thread(target=send)
    sender.start()
    second: SidecarProcess | None = None
    try:
        assert wait_for(lambda: len(acknowledged) >= SESSIONS // 3, 60)
        first.kill9()
        second = SidecarProcess(tmp_path, _config(tmp_path, endpoint, workers), env).start()
        sender.join(120)
        assert not sender.is_alive()
        assert not failed, f"exports failed across the restart: {failed[:5]}"
        assert len(acknowledged) == SESSIONS

        def all_evaluated() -> bool:
            return set(verdicts.received.sessions()) >= set(acknowledged)

        assert wait_for(all_evaluated, 60), (
            f"missing: {sorted(set(acknowledged) - set(verdicts.received.sessions()))[:10]}"
        )
        revisions = verdicts.received.sessions()
        twice = {s: r for s, r in revisions.items() if r != {1}}
        assert not twice, f"sessions evaluated under more than one revision: {twice}"
        # after de-duplication by verdict id, each session has one verdict set
        per_session: dict[str, int] = {}
        for verdict in verdicts.received.verdicts().values():
            per_session[verdict["session.id"]] = per_session.get(verdict["session.id"], 0) + 1
        assert len(set(per_session.values())) == 1  # same evaluators ran for each session
        assert second.terminate() == 0
        # the crash really left open sessions behind, and the restart resumed them
        assert "resuming" in second.log.read_text()
    finally:
        for proc in (first, second):
            if proc is not None and proc.proc is not None and proc.proc.poll() is None:
                proc.kill9()
        verdicts.stop()
