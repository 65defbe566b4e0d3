"""A spool whose write-ahead log or file was damaged after a kill -9: SQLite gives back fewer
requests without a word, so the restart must say how many acknowledged requests did not come
back, and exactly that many sessions must be missing from the verdicts."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.sidecar.spool import read_acknowledged
from tests.sidecar.helpers import (
    SidecarProcess,
    VerdictServer,
    serve_config,
    synthetic_session,
    wait_for,
)

pytestmark = pytest.mark.slow

SESSIONS = 300
_LOST = re.compile(
    r"(\d+) acknowledged request\(s\) did not come back: (\d+) were stored and not yet evaluated"
)


def _config(tmp: Path, idle_timeout_s: float) -> dict[str, Any]:
    # per_turn off: a turn would close 2 s after its root span ended, and sessions evaluated
    # before the kill would lower the count acknowledged and owed, and with it what is missing
    sessions = {"idle_timeout_s": idle_timeout_s, "per_turn": False}
    return serve_config(tmp, sessions=sessions, workers=2, tick_interval_s=0.1)


def _killed_with_open_sessions(tmp: Path) -> Path:
    """A sidecar that acknowledged SESSIONS open sessions, one small request each, then was
    killed -9: the spool is part file, part write-ahead log."""
    sidecar = SidecarProcess(tmp, _config(tmp, 600)).start(60)
    exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
    for i in range(SESSIONS):
        spans = synthetic_session(f"open-{i}", tools=1, end=False)
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    exporter.shutdown()
    sidecar.kill9()
    spool = tmp / "spool.db"
    assert read_acknowledged(str(spool)) == SESSIONS  # every one open and owed when killed
    assert Path(str(spool) + "-wal").stat().st_size > 0
    return spool


def _restart_and_count(tmp: Path, verdicts: VerdictServer) -> tuple[int, int]:
    """Restart with a short idle timeout; returns (the lost count the warning gives, sessions
    that got a verdict), once every session that came back was evaluated."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": verdicts.endpoint, "OTEL_EXPORTER_OTLP_INSECURE": "true"}
    sidecar = SidecarProcess(tmp, _config(tmp, 0.5), env).start(60)
    try:
        warnings = [
            line for line in sidecar.log.read_text().splitlines() if "did not come back" in line
        ]
        assert len(warnings) == 1, sidecar.log.read_text()
        assert "WARNING" in warnings[0]
        found = _LOST.search(warnings[0])
        assert found is not None, warnings[0]
        lost, stored = int(found[1]), int(found[2])
        assert stored == SESSIONS
        assert lost > 0
        back = SESSIONS - lost
        wait_for(lambda: len(verdicts.received.sessions()) >= back, 180)
        wait_for(lambda: False, 2)  # time for a verdict that should not exist to arrive
        evaluated = {s for s in verdicts.received.sessions() if s.startswith("open-")}
    finally:
        assert sidecar.terminate(60) == 0
    return lost, len(evaluated)


def test_deleted_log_reports_the_requests_it_held(tmp_path: Path, verdicts: VerdictServer) -> None:
    spool = _killed_with_open_sessions(tmp_path)
    Path(str(spool) + "-wal").unlink()
    Path(str(spool) + "-shm").unlink(missing_ok=True)
    lost, evaluated = _restart_and_count(tmp_path, verdicts)
    assert evaluated == SESSIONS - lost


def test_random_bytes_in_the_log_are_reported_with_what_they_cost(
    tmp_path: Path, verdicts: VerdictServer
) -> None:
    spool = _killed_with_open_sessions(tmp_path)
    wal = Path(str(spool) + "-wal")
    size = wal.stat().st_size
    assert size > 3 * 4096
    with wal.open("r+b") as handle:  # 4 KB of noise among the log's first frames
        handle.seek(32 + 3 * (4096 + 24))
        handle.write(random.Random(7).randbytes(4096))
    lost, evaluated = _restart_and_count(tmp_path, verdicts)
    assert evaluated == SESSIONS - lost


def test_truncated_file_reports_every_request_lost(tmp_path: Path, verdicts: VerdictServer) -> None:
    spool = _killed_with_open_sessions(tmp_path)
    spool.write_bytes(b"")
    lost, evaluated = _restart_and_count(tmp_path, verdicts)
    log = (tmp_path / "sidecar.log").read_text()
    assert "is replayed" not in log  # it is not: nothing of it came back
    assert evaluated == SESSIONS - lost
