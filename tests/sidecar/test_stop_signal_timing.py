"""A stop signal handled at the worst moment for serve's main thread still stops serve, and the
shutdown judges what was open (`sidecar.signals`). Python runs a signal handler between two
bytecodes of the main thread, also while it holds a lock: serve's old handler set the
`threading.Event` the main thread waited on, and `Event.wait` holds that Event's lock as it
wakes up; a SIGTERM handled then hung serve until SIGKILL (seen once in a loaded CI run of
test_workers_restart). `tests.sidecar.signal_at_wait` makes the signal arrive there every time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.sidecar.helpers import SidecarProcess, VerdictServer, synthetic_session, wait_for
from tests.sidecar.signal_at_wait import SENDS
from tests.sidecar.workers_helpers import _config, _env, _stop

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("signum", "workers"), [("SIGTERM", 2), ("SIGINT", 1)])
def test_a_stop_signal_right_after_the_main_thread_took_a_lock_stops_serve(
    tmp_path: Path, verdicts: VerdictServer, signum: str, workers: int
) -> None:
    sessions = {"idle_timeout_s": 300.0, "end_grace_s": 300.0}  # all open at the signal
    config = _config(tmp_path, workers, sessions=sessions, on_shutdown="evaluate")
    command = ("tests.sidecar.signal_at_wait", signum)
    sidecar = SidecarProcess(tmp_path, config, _env(verdicts), command=command).start()
    try:
        exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
        sent = {f"open-{i}" for i in range(6)}
        for session_id in sorted(sent):
            assert exporter.export(synthetic_session(session_id, end=False)) == (
                SpanExportResult.SUCCESS
            )
        exporter.shutdown()
        go = sidecar.ready.with_name(sidecar.ready.name + ".go")
        go.touch()  # serve signals itself at its main thread's next locks and waits
        marker = sidecar.ready.with_name(sidecar.ready.name + ".sent")
        assert wait_for(marker.exists, 10), sidecar.log.read_text()
        assert sidecar.wait_exit(30) == 0
        assert len(marker.read_text().split()) == SENDS  # every one was sent, and handled
        log = sidecar.log.read_text()
        assert "shutting down" in log and "Traceback" not in log, log
        # on_shutdown evaluate: the sessions open at the signal were judged by the shutdown
        assert set(verdicts.received.sessions()) == sent
    finally:
        _stop(sidecar)


def _starting_children(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """The evaluation processes ``pid`` spawned so far (not multiprocessing's resource tracker).
    A process or thread that ended while it is read is none (its /proc entries vanish)."""
    found = []
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return found
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile
            continue
        for child in children:
            try:
                cmdline = (proc / child / "cmdline").read_bytes()
            except (FileNotFoundError, ProcessLookupError):  # ended meanwhile
                continue
            if b"spawn_main" in cmdline:
                found.append(int(child))
    return found


def test_the_process_walk_takes_a_process_or_thread_gone_as_none(tmp_path: Path) -> None:
    """The walk above met a thread that had ended (`FileNotFoundError`): the test failed."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert _starting_children(ended.pid) == []
    # /proc as it reads while a thread of 100 ends: its task directory without children
    (tmp_path / "100" / "task" / "100").mkdir(parents=True)
    (tmp_path / "100" / "task" / "100" / "children").write_text("200 300 ")
    (tmp_path / "100" / "task" / "101").mkdir()  # ended: no children file any more
    (tmp_path / "200").mkdir()
    (tmp_path / "200" / "cmdline").write_bytes(
        b"python\0-c\0from multiprocessing.spawn import spawn_main"
    )
    assert _starting_children(100, tmp_path) == [200]  # 300 ended too


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_to_every_process_while_serve_starts(
    tmp_path: Path, verdicts: VerdictServer, signum: int
) -> None:
    """`systemctl stop` (SIGTERM to every process) or Ctrl-C (SIGINT to the group) while an
    evaluation process is still starting: serve starts, then stops cleanly (exit 0). It used to
    end that process midway through its start, and serve with "failed to start", status 1."""
    config = _config(tmp_path, 2)
    sidecar = SidecarProcess(tmp_path, config, _env(verdicts)).launch()
    try:
        assert sidecar.proc is not None
        assert wait_for(lambda: _starting_children(sidecar.proc.pid), 30, interval_s=0.001)
        for pid in [sidecar.proc.pid, *_starting_children(sidecar.proc.pid)]:
            os.kill(pid, signum)
        assert sidecar.wait_exit(60) == 0, sidecar.log.read_text()
        log = sidecar.log.read_text()
        assert "shutting down" in log and "Traceback" not in log, log
        assert "failed to start" not in log, log
    finally:
        _stop(sidecar)
