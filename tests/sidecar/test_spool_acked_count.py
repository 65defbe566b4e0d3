"""The spool's count of acknowledged, unfinished requests, across a killed process and a real
SQLite file: no warning when nothing was lost, the right count when the spool went missing."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from spanjudge.sidecar.config import ServeConfig, SpoolConfig
from spanjudge.sidecar.recovery import open_spool

# Five requests of one session each; two sessions evaluated; then the process dies unclosed.
_WRITER = """
import os, sys
from spanjudge.sessions.revisions import Completion
from spanjudge.sidecar.spool import Spool
spool = Spool(sys.argv[1], max_bytes=1 << 30, synchronous=sys.argv[2])
ids = [spool.append(b"x" * 100, "protobuf", [f"s:session-{i}"]) for i in range(5)]
spool.complete([
    Completion(key=f"session-{i}", revision=1, groups=(f"s:session-{i}",), upto=ids[i])
    for i in range(2)
])
os._exit(0)
"""


def _killed_writer(path: Path, synchronous: str) -> None:
    subprocess.run([sys.executable, "-c", _WRITER, str(path), synchronous], check=True)


def _open(path: Path, caplog: pytest.LogCaptureFixture) -> int:
    serve = ServeConfig(spool=SpoolConfig(path=str(path)))
    with caplog.at_level(logging.INFO, logger="spanjudge.sidecar"):
        spool = open_spool(serve, None)
    try:
        return spool.requests
    finally:
        spool.close()


@pytest.mark.parametrize("synchronous", ["normal", "full"])
def test_a_killed_process_loses_nothing_and_no_loss_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, synchronous: str
) -> None:
    path = tmp_path / "spool.db"
    _killed_writer(path, synchronous)
    assert _open(path, caplog) == 3
    assert "did not come back" not in caplog.text
    assert "recovered 3 request(s)" in caplog.text


def test_a_deleted_spool_reports_the_requests_it_held(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "spool.db"
    _killed_writer(path, "normal")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    assert _open(path, caplog) == 0
    [warning] = [r for r in caplog.records if "did not come back" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "3 acknowledged request(s) did not come back" in warning.getMessage()
    caplog.clear()
    assert _open(path, caplog) == 0  # said once: the next start has nothing more to report
    assert "did not come back" not in caplog.text
