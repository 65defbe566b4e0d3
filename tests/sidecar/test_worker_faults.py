"""The evaluation worker under faults: an evaluator raising SystemExit, a session whose evaluation
raises, a shutdown that times out, concurrent shutdown callers, and a session inside its end
grace at a SIGTERM with `on_shutdown: evaluate` (emitted once, never again after the restart)."""

from __future__ import annotations

import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from spanjudge.sidecar.server import Sidecar
from tests.sidecar.helpers import SidecarProcess, VerdictServer, synthetic_session, wait_for
from tests.sidecar.raw_requests import grpc_call, post
from tests.sidecar.workers_helpers import _Held, _Raising, _sidecar, _stuck_on_first

pytestmark = pytest.mark.slow


def _send(sidecar: Sidecar, *sessions: str) -> None:
    assert sidecar.grpc is not None
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{sidecar.grpc.port}", insecure=True)
    for session in sessions:
        assert exporter.export(synthetic_session(session)) == SpanExportResult.SUCCESS
    exporter.shutdown()


def _healthz(sidecar: Sidecar) -> int:
    assert sidecar.http is not None
    try:
        url = f"http://127.0.0.1:{sidecar.http.port}/healthz"
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.usefixtures("contained_errors")  # fails on purpose
def test_system_exit_from_an_evaluator_is_an_error_verdict(
    tmp_path: Path, verdicts: VerdictServer
) -> None:
    plugin = _Raising("exiting_plugin", SystemExit(3), {"exits"})
    sidecar = _sidecar(tmp_path, plugin, verdicts)
    try:
        _send(sidecar, "exits", "after")
        # the worker lived on: the next session was evaluated too
        assert wait_for(lambda: {"exits", "after"} <= set(verdicts.received.sessions()), 20)
        [event] = [
            e
            for e in verdicts.received.verdicts().values()
            if e["session.id"] == "exits" and e["gen_ai.evaluation.name"] == "exiting_plugin"
        ]
        assert event["spanjudge.outcome"] == "not_evaluated"
        assert event["error.type"] == "SystemExit"
        assert _healthz(sidecar) == 200
        assert wait_for(lambda: sidecar.spool.requests == 0)
    finally:
        sidecar.stop()


@pytest.mark.usefixtures("contained_errors")  # fails on purpose
def test_a_session_whose_evaluation_raises_stays_spooled(
    tmp_path: Path, verdicts: VerdictServer
) -> None:
    sidecar = _sidecar(tmp_path, None, verdicts)
    original = sidecar.engine.begin

    def begin(closed: Any, trajectory: Any = None, **kwargs: Any) -> Any:
        if closed.key == "breaks":
            raise RuntimeError("recognition bug")
        return original(closed, trajectory, **kwargs)

    sidecar.engine.begin = begin  # type: ignore[method-assign]
    try:
        _send(sidecar, "breaks", "fine")
        assert wait_for(lambda: "fine" in verdicts.received.sessions(), 20)
        time.sleep(0.5)
        assert "breaks" not in verdicts.received.sessions()
        # not recorded as evaluated: its request is still in the spool for a retry
        assert sidecar.spool.revision("breaks") == 0
        assert sidecar.spool.requests == 1
        assert sidecar.worker.pipeline.errors == 1  # counted (spanjudge.internal_errors)
    finally:
        sidecar.stop()
    # the next start evaluates it (the fault gone), once
    again = _sidecar(tmp_path, None, verdicts)
    try:
        assert wait_for(lambda: "breaks" in verdicts.received.sessions(), 20)
        assert verdicts.received.sessions()["breaks"] == {1}
    finally:
        again.stop()


def test_timed_out_shutdown_stops_the_worker_and_callers_wait(
    tmp_path: Path, verdicts: VerdictServer
) -> None:
    held = _Held("slow")
    sidecar = _sidecar(tmp_path, held, verdicts, shutdown_timeout_s=2)
    _send(sidecar, "slow-session")
    assert wait_for(lambda: sidecar.worker.pending_spans == 0, 10)
    time.sleep(0.3)  # the worker is inside the slow evaluation
    finished: list[float] = []

    def stop() -> None:
        sidecar.stop()
        finished.append(time.monotonic())

    callers = [threading.Thread(target=stop) for _ in range(2)]
    started = time.monotonic()
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(20)
    # both returned, and only once the shutdown had done its work (the same deadline)
    assert len(finished) == 2
    assert all(1.0 < t - started < 10 for t in finished), [t - started for t in finished]
    held.release.set()
    # the worker does not carry on behind the shutdown: it ends without touching the spool
    assert wait_for(lambda: not sidecar.worker.running, 10)
    assert "slow-session" not in verdicts.received.sessions()


def test_session_in_its_end_grace_at_shutdown_is_emitted_once(
    tmp_path: Path, verdicts: VerdictServer
) -> None:
    config = {
        "sessions": {"idle_timeout_s": 600, "end_grace_s": 60},
        "serve": {
            "grpc_endpoint": "127.0.0.1:0",
            "http_endpoint": None,
            "metrics_endpoint": None,
            "on_shutdown": "evaluate",
            "shutdown_timeout_s": 10,
            "spool": {"path": str(tmp_path / "spool.db")},
        },
    }
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": verdicts.endpoint, "OTEL_EXPORTER_OTLP_INSECURE": "true"}
    sidecar = SidecarProcess(tmp_path, config, env).start()
    exporter = OTLPSpanExporter(endpoint=sidecar.endpoints["grpc"], insecure=True)
    assert exporter.export(synthetic_session("in-grace")) == SpanExportResult.SUCCESS
    exporter.shutdown()
    assert sidecar.terminate() == 0
    assert len(verdicts.received.eval_spans) == 1  # evaluated at shutdown, complete
    assert verdicts.received.eval_spans[0]["attrs"]["spanjudge.session.complete"] is True
    again = SidecarProcess(tmp_path, config, env).start()
    time.sleep(1.5)  # replay and a few ticks
    assert again.terminate() == 0
    assert len(verdicts.received.eval_spans) == 1  # not emitted a second time


def test_evaluation_falling_behind_refuses_by_age(tmp_path: Path, verdicts: VerdictServer) -> None:
    held = _Held("slow")
    # span count, spool size and export backlog far from their bounds: only age can refuse
    sidecar = _sidecar(
        tmp_path,
        held,
        verdicts,
        max_pending_age_s=1,
        max_pending_spans=1_000_000,
    )
    try:
        exporter = _stuck_on_first(sidecar)
        assert exporter.export(synthetic_session("queued")) == SpanExportResult.SUCCESS
        time.sleep(1.5)
        # few spans are waiting, but the oldest has waited past the bound: retryable refusal
        assert sidecar.worker.pending_spans <= 10
        body = encode_spans(synthetic_session("refused")).SerializeToString()
        code, details = grpc_call(sidecar, body)
        assert code == grpc.StatusCode.UNAVAILABLE
        assert "behind the accepted requests" in details
        status, headers, text = post(sidecar, body)
        assert status == 503 and int(headers["Retry-After"]) >= 1
        assert b"behind the accepted requests" in text
        assert exporter.export(synthetic_session("refused")) == SpanExportResult.FAILURE
        assert sidecar.handler.counts.get("unavailable", 0) >= 3
        assert set(verdicts.received.sessions()) <= {"first"}  # nothing of "refused" taken
        held.release.set()
        assert wait_for(lambda: sidecar.worker.pending_spans == 0, 10)
        assert exporter.export(synthetic_session("refused")) == SpanExportResult.SUCCESS
        sessions = {"first", "queued", "refused"}
        assert wait_for(lambda: sessions <= set(verdicts.received.sessions()), 20)
        exporter.shutdown()
    finally:
        held.release.set()
        sidecar.stop()
