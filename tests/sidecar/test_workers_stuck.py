"""An evaluation process that stops answering (SIGSTOP: alive, silent): `/healthz` names it,
the other process's sessions keep being accepted and judged, and once silent past
`serve.worker_stuck_timeout` it is killed and replaced, and its sessions are judged from the
spool, each once."""

from __future__ import annotations

import collections
import os
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.sidecar.config import parse_serve
from spanjudge.sidecar.routing import owner
from tests.sidecar.helpers import SidecarProcess, synthetic_session, wait_for
from tests.sidecar.workers_helpers import _alive, _config, _env, _Receiver, _stop

_STUCK_TIMEOUT_S = 6.0


def _health(http: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{http}/healthz", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _sessions_of(process: int, prefix: str, n: int) -> list[str]:
    """``n`` session ids that the evaluation process ``process`` (of 2) owns."""
    found: list[str] = []
    i = 0
    while len(found) < n:
        candidate = f"{prefix}-{i}"
        if owner(candidate, 2) == process:
            found.append(candidate)
        i += 1
    return found


def _stopped(pid: int) -> bool:
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state == "T"


@pytest.mark.slow
def test_a_silent_process_is_reported_bypassed_and_replaced(tmp_path: Path) -> None:
    verdicts = _Receiver()
    config = _config(
        tmp_path,
        2,
        sessions={"idle_timeout_s": 120.0, "end_grace_s": 0.2},
        worker_stuck_timeout=f"{_STUCK_TIMEOUT_S:g}s",
        # far below the stuck bound: a silent process's backlog must not refuse the others
        max_pending_age="2s",
    )
    sidecar = SidecarProcess(tmp_path, config, _env(verdicts)).start()
    stuck_pid, other_pid = sidecar.endpoints["workers"]
    # 3 s per export, retries included: a refusal fails the export instead of waiting it out
    exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True, timeout=3)
    stuck_before = _sessions_of(0, "stuck-before", 3)
    stuck_during = _sessions_of(0, "stuck-during", 3)
    healthy = _sessions_of(1, "healthy", 5)
    try:
        assert _health(sidecar.endpoints["http"])[0] == 200
        os.kill(stuck_pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        # acknowledged while its process is silent but not yet found so
        for session_id in stuck_before:
            assert exporter.export(synthetic_session(session_id)) == SpanExportResult.SUCCESS

        assert wait_for(lambda: _health(sidecar.endpoints["http"])[0] == 503, 10)
        assert time.monotonic() - stopped_at < _STUCK_TIMEOUT_S
        status, body = _health(sidecar.endpoints["http"])
        assert status == 503 and f"pid {stuck_pid}" in body, body
        assert f"pid {other_pid}" not in body

        # past max_pending_age since the silent process's requests were accepted
        time.sleep(max(0.0, stopped_at + 2.5 - time.monotonic()))
        for session_id in [*healthy, *stuck_during]:
            assert exporter.export(synthetic_session(session_id)) == SpanExportResult.SUCCESS
        assert wait_for(lambda: set(healthy) <= set(verdicts.received.sessions()), 10)
        assert _stopped(stuck_pid)  # judged while the other process was still stuck
        assert not set(stuck_before) & set(verdicts.received.sessions())

        # past the bound: killed, replaced, and its sessions judged from the spool
        assert wait_for(lambda: not _alive(stuck_pid), _STUCK_TIMEOUT_S + 10)
        everything = {*stuck_before, *stuck_during, *healthy}
        assert wait_for(lambda: everything <= set(verdicts.received.sessions()), 30)
        assert _health(sidecar.endpoints["http"])[0] == 200
        assert _alive(other_pid)

        time.sleep(1.0)  # anything judged twice would have arrived by now
        received = verdicts.received
        with received.lock:
            spans = collections.Counter(s["attrs"]["session.id"] for s in received.eval_spans)
        assert spans == dict.fromkeys(everything, 1)
        assert received.log_ids() == received.span_ids()
        assert sidecar.terminate() == 0
    finally:
        exporter.shutdown()
        if sidecar.proc is not None and sidecar.proc.poll() is None:
            os.kill(stuck_pid, signal.SIGCONT)
        _stop(sidecar)
        verdicts.stop()
    log = sidecar.log.read_text()
    assert "has not answered" in log


@pytest.mark.slow
def test_a_process_that_answers_again_stays_unless_it_missed_requests(tmp_path: Path) -> None:
    """Silent for a while, then going on: kept when nothing was routed to it meanwhile;
    replaced at once (not at the bound) when requests for its sessions were only spooled."""
    verdicts = _Receiver()
    config = _config(
        tmp_path,
        2,
        sessions={"idle_timeout_s": 120.0, "end_grace_s": 0.2},
        worker_stuck_timeout="60s",
    )
    sidecar = SidecarProcess(tmp_path, config, _env(verdicts)).start()
    pid = sidecar.endpoints["workers"][0]
    http = sidecar.endpoints["http"]
    exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True, timeout=3)
    try:
        os.kill(pid, signal.SIGSTOP)
        assert wait_for(lambda: _health(http)[0] == 503, 10)
        os.kill(pid, signal.SIGCONT)
        assert wait_for(lambda: _health(http)[0] == 200, 5)
        missed = _sessions_of(0, "missed", 2)
        for session_id in missed:
            assert exporter.export(synthetic_session(session_id)) == SpanExportResult.SUCCESS
        assert wait_for(lambda: set(missed) <= set(verdicts.received.sessions()), 10)
        assert _alive(pid)
        # Its completions reach the spool after its export: a process stopped in between
        # would have these judged again, with the same ids (at least once, not this test's).
        time.sleep(1.0)

        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        assert wait_for(lambda: _health(http)[0] == 503, 10)
        late = _sessions_of(0, "late", 2)
        for session_id in late:
            assert exporter.export(synthetic_session(session_id)) == SpanExportResult.SUCCESS
        os.kill(pid, signal.SIGCONT)
        assert wait_for(lambda: not _alive(pid), 10)
        assert time.monotonic() - stopped_at < 30
        assert wait_for(lambda: set(late) <= set(verdicts.received.sessions()), 20)
        assert _health(http)[0] == 200
        time.sleep(1.0)  # anything judged twice would have arrived by now
        with verdicts.received.lock:
            spans = collections.Counter(
                s["attrs"]["session.id"] for s in verdicts.received.eval_spans
            )
        assert spans == dict.fromkeys([*missed, *late], 1)
        assert sidecar.terminate() == 0
    finally:
        exporter.shutdown()
        _stop(sidecar)
        verdicts.stop()


def test_the_stuck_bound_reads_as_a_duration_and_has_a_floor() -> None:
    problems: list[str] = []
    assert parse_serve({}, "serve", problems).worker_stuck_timeout_s == 60.0
    assert (
        parse_serve({"worker_stuck_timeout": "2m"}, "serve", problems).worker_stuck_timeout_s
        == 120.0
    )
    assert not problems
    parse_serve({"worker_stuck_timeout": "500ms"}, "serve", problems)
    assert problems == ["serve.worker_stuck_timeout: at least 2s"]
