"""A spool damaged while `spanjudge serve` was down: a torn write-ahead log, a truncated or
deleted file, a corrupt one. Each start says what was recovered and what was lost; a corrupt
spool stops the start with the fix, or is moved aside with `spool.recreate: true`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
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


def _config(tmp: Path, idle_timeout_s: float, **spool: Any) -> dict[str, Any]:
    return serve_config(
        tmp, sessions={"idle_timeout_s": idle_timeout_s}, spool=spool, tick_interval_s=0.1
    )


def _killed_with_two_requests(tmp: Path) -> Path:
    """A sidecar that acknowledged two open sessions, one request each, then was killed -9."""
    sidecar = SidecarProcess(tmp, _config(tmp, 600)).start()
    exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
    for session in ("first", "second"):
        assert exporter.export(synthetic_session(session, end=False)) == SpanExportResult.SUCCESS
    exporter.shutdown()
    sidecar.kill9()
    wal = tmp / "spool.db-wal"
    assert wal.stat().st_size > 0  # the requests are in the log, as after any crash
    return tmp / "spool.db"


def _restart(tmp: Path, verdicts: VerdictServer, **spool: Any) -> SidecarProcess:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": verdicts.endpoint, "OTEL_EXPORTER_OTLP_INSECURE": "true"}
    return SidecarProcess(tmp, _config(tmp, 0.5, **spool), env).start()


def test_torn_log_recovers_what_was_committed_and_says_so(
    tmp_path: Path, verdicts: VerdictServer
) -> None:
    spool = _killed_with_two_requests(tmp_path)
    wal = Path(str(spool) + "-wal")
    with wal.open("r+b") as handle:  # the last frame half written, as after a power loss
        handle.truncate(wal.stat().st_size - 100)
    sidecar = _restart(tmp_path, verdicts)
    try:
        assert wait_for(lambda: "first" in verdicts.received.sessions(), 20)
        log = sidecar.log.read_text()
        assert "ends in a partly written frame" in log
        assert "recovered 1 request(s)" in log
    finally:
        assert sidecar.terminate() == 0
    assert "second" not in verdicts.received.sessions()


def test_empty_spool_file_is_reported(tmp_path: Path, verdicts: VerdictServer) -> None:
    spool = _killed_with_two_requests(tmp_path)
    Path(str(spool) + "-wal").unlink()
    Path(str(spool) + "-shm").unlink(missing_ok=True)
    spool.write_bytes(b"")
    sidecar = _restart(tmp_path, verdicts)
    assert sidecar.terminate() == 0
    assert f"the spool '{spool}' is empty (0 bytes)" in sidecar.log.read_text()


def test_deleted_spool_with_its_log_left_is_reported(
    tmp_path: Path, verdicts: VerdictServer
) -> None:
    spool = _killed_with_two_requests(tmp_path)
    spool.unlink()
    sidecar = _restart(tmp_path, verdicts)
    assert sidecar.terminate() == 0
    log = sidecar.log.read_text()
    assert f"the spool '{spool}' is missing but its write-ahead log" in log
    assert "The spans in it are lost" in log
    assert list(tmp_path.glob("spool.db.corrupt-*-wal"))  # moved aside, not deleted


def _serve(tmp: Path, **spool: Any) -> subprocess.CompletedProcess[str]:
    config = tmp / "spanjudge.yaml"
    config.write_text(yaml.safe_dump(_config(tmp, 600, **spool)))
    return subprocess.run(
        [sys.executable, "-m", "spanjudge.sidecar", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_corrupt_spool_stops_the_start_or_is_moved_aside(
    tmp_path: Path, verdicts: VerdictServer
) -> None:
    spool = _killed_with_two_requests(tmp_path)
    sidecar = _restart(tmp_path, verdicts)  # checkpoints the log into the file on its way out
    assert sidecar.terminate() == 0
    data = bytearray(spool.read_bytes())
    assert len(data) > 4096 * 2
    data[4096:8192] = b"\xa5" * 4096  # a damaged page after the header
    spool.write_bytes(bytes(data))
    result = _serve(tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"the spool '{spool}' is damaged" in result.stderr
    assert "serve.spool.recreate: true" in result.stderr
    assert "Traceback" not in result.stderr
    assert spool.read_bytes() == bytes(data)  # left as it was
    sidecar = _restart(tmp_path, verdicts, recreate=True)
    assert sidecar.terminate() == 0
    assert "serve.spool.recreate: moved the spool" in sidecar.log.read_text()
    [moved] = tmp_path.glob("spool.db.corrupt-*[0-9]Z")
    assert moved.read_bytes() == bytes(data)
