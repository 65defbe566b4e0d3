"""`serve.workers` across restarts and signals: a spool written with one number of evaluation
processes replays with another (each session judged once, as one process judges it), and a
SIGTERM that reaches every process of the server at once (systemd's default `KillMode`, Ctrl-C
in a terminal) still runs the configured shutdown in each one."""

from __future__ import annotations

import collections
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.spans.record import SpanRecord
from tests.sidecar.helpers import SidecarProcess, VerdictServer, synthetic_session, wait_for
from tests.sidecar.workers_helpers import (
    _alive,
    _as_exported,
    _config,
    _env,
    _Receiver,
    _send,
    _stop,
    _verdicts,
)

pytestmark = pytest.mark.slow


def _restart_config(tmp: Path, workers: int) -> dict[str, Any]:
    # Nothing closes by itself while the test runs: every session is open (or waiting out a
    # long end grace) when the server is killed, so all of it is in the spool.
    sessions = {"idle_timeout_s": 300.0, "end_grace_s": 300.0}
    return _config(tmp, workers, sessions=sessions, on_shutdown="evaluate")


def _judged(tmp: Path, before: int, after: int, spans: list[SpanRecord]) -> _Receiver:
    """Send ``spans`` to a server with ``before`` processes, kill -9 it, start one with
    ``after`` on the same spool and stop it: the shutdown judges what was replayed."""
    tmp.mkdir()
    verdicts = _Receiver()
    first = SidecarProcess(tmp, _restart_config(tmp, before), _env(verdicts)).start()
    second: SidecarProcess | None = None
    try:
        _send(first.endpoints["grpc"], spans)
        first.kill9()
        second = SidecarProcess(tmp, _restart_config(tmp, after), _env(verdicts)).start()
        assert second.terminate() == 0
    finally:
        _stop(first, second)
        verdicts.stop()
    return verdicts


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, ...]]:
    """The verdicts of one process before and after the restart, which every other number of
    processes must give (the same for each: computed once)."""
    return _verdicts(_judged(tmp_path_factory.mktemp("restart") / "same", 1, 1, _as_exported()))


@pytest.mark.parametrize(("before", "after"), [(2, 3), (2, 1), (1, 2)])
def test_a_spool_written_with_n_workers_replays_with_another_n(
    tmp_path: Path, before: int, after: int, reference: dict[str, tuple[Any, ...]]
) -> None:
    spans = _as_exported()
    assert len(reference) > 100
    changed = _judged(tmp_path / "changed", before, after, spans)
    # the same sessions with the same verdicts and ids: none split, none judged twice
    assert _verdicts(changed) == reference
    assert all(len(revisions) == 1 for revisions in changed.received.sessions().values())
    assert changed.received.log_ids() == changed.received.span_ids()


def test_sigterm_to_every_process_runs_the_shutdown_once(tmp_path: Path) -> None:
    """systemd stops a unit by sending SIGTERM to all its processes, a terminal's Ctrl-C
    sends SIGINT to the whole group: the evaluation processes leave the shutdown to `serve`."""
    verdicts = VerdictServer()
    sidecar = SidecarProcess(tmp_path, _restart_config(tmp_path, 2), _env(verdicts)).start()
    second: SidecarProcess | None = None
    try:
        exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
        sent = [f"open-{i:02d}" for i in range(40)]
        for session_id in sent:
            spans = synthetic_session(session_id, end=False)
            assert exporter.export(spans) == SpanExportResult.SUCCESS
        exporter.shutdown()
        pids = [sidecar.endpoints["pid"], *sidecar.endpoints["workers"]]
        assert len(pids) == 3
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
        assert sidecar.terminate() == 0
        # on_shutdown evaluate: every open session was judged at the shutdown
        assert set(verdicts.received.sessions()) == set(sent)
        log = sidecar.log.read_text()
        assert "Traceback" not in log and "stopped:" not in log, log
        # and a restart has nothing left to judge
        second = SidecarProcess(tmp_path, _restart_config(tmp_path, 2), _env(verdicts)).start()
        assert second.terminate() == 0
        counts = collections.Counter(s["attrs"]["session.id"] for s in verdicts.received.eval_spans)
        assert set(counts.values()) == {1}, counts
    finally:
        _stop(sidecar, second)
        verdicts.stop()


def test_kill9_of_the_server_leaves_no_evaluation_process_behind(tmp_path: Path) -> None:
    verdicts = VerdictServer()
    sidecar = SidecarProcess(tmp_path, _restart_config(tmp_path, 2), _env(verdicts)).start()
    try:
        exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
        for i in range(10):
            spans = synthetic_session(f"open-{i}", end=False)
            assert exporter.export(spans) == SpanExportResult.SUCCESS
        exporter.shutdown()
        children = sidecar.endpoints["workers"]
        assert len(children) == 2 and all(_alive(pid) for pid in children)
        sidecar.kill9()
        assert wait_for(lambda: not any(_alive(pid) for pid in children), 15), children
    finally:
        _stop(sidecar)
        verdicts.stop()


def _evaluations(verdicts: VerdictServer) -> collections.Counter[str]:
    """Evaluation spans received per session id."""
    with verdicts.received.lock:
        return collections.Counter(s["attrs"]["session.id"] for s in verdicts.received.eval_spans)


def _judge_again(
    tmp: Path, spool: dict[str, str], verdicts: VerdictServer, sessions: list[str]
) -> None:
    """A server with two processes on ``spool`` given one new, ended trace of each session,
    until it judged them all; then stopped."""
    tmp.mkdir()
    sidecar = SidecarProcess(tmp, _config(tmp, 2, spool=spool), _env(verdicts)).start()
    before = _evaluations(verdicts)

    def judged() -> bool:
        now = _evaluations(verdicts)
        return all(now[s] > before[s] for s in sessions)

    try:
        exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
        for session_id in sessions:
            assert exporter.export(synthetic_session(session_id)) == SpanExportResult.SUCCESS
        exporter.shutdown()
        assert wait_for(judged, 30), _evaluations(verdicts)
        assert sidecar.terminate() == 0
    finally:
        _stop(sidecar)  # not left running when an assertion failed


def test_a_session_judged_before_a_restart_reopens_at_the_next_revision(tmp_path: Path) -> None:
    """Sessions judged and confirmed by one run, then continued after a restart with two
    processes: each continuation is the next revision, never a verdict id given out before."""
    verdicts = VerdictServer()
    spool = {"path": str(tmp_path / "spool.db")}
    sessions = [f"again-{i:02d}" for i in range(12)]  # some owned by each process
    try:
        _judge_again(tmp_path / "first", spool, verdicts, sessions)
        _judge_again(tmp_path / "second", spool, verdicts, sessions)
        assert verdicts.received.sessions() == {s: {1, 2} for s in sessions}
        counts = collections.Counter(
            (s["attrs"]["session.id"], s["attrs"]["spanjudge.revision"])
            for s in verdicts.received.eval_spans
        )
        assert set(counts.values()) == {1}, counts
    finally:
        verdicts.stop()
