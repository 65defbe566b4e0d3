"""The pipeline's one close path and its record of evaluated sessions, as the sidecar's spool
sees them: a session closed at shutdown is released once (never emitted again after a restart),
and a session whose evaluation raised stays spooled."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import Tracer

from spanjudge import CollectingSink, semconv
from spanjudge.config import Config
from spanjudge.engine import Engine, PendingResult
from spanjudge.sessions.store import ClosedSession
from spanjudge.sidecar.config import InputConfig
from spanjudge.sidecar.intake import FORMAT_PROTOBUF, decode_body
from spanjudge.sidecar.spool import Spool
from spanjudge.sidecar.worker import Worker
from spanjudge.spans.otlp_json import sdk_spans_to_request
from tests.conftest import recorded


def _session(session_id: str) -> bytes:
    """One agent turn with one tool call, ended with `spanjudge.session.end`, as OTLP bytes."""

    def body(tracer: Tracer) -> None:
        attrs: dict[str, Any] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
            semconv.SESSION_ID: session_id,
            semconv.SJ_SESSION_END: True,
        }
        tool = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: "read_file",
            semconv.SESSION_ID: session_id,
        }
        with (
            tracer.start_as_current_span("invoke_agent a", attributes=attrs),
            tracer.start_as_current_span("execute_tool read_file", attributes=tool),
        ):
            pass

    return bytes(sdk_spans_to_request(recorded(body)).SerializeToString())


def _worker(spool_path: Path, engine: Engine, sink: CollectingSink) -> Worker:
    config = engine.config
    return Worker(
        engine,
        [sink],
        Spool(str(spool_path), max_bytes=64 * 1024 * 1024),
        policy=config.policy,  # end_grace_s 2 s: the session is still in its grace at stop
        limits=config.limits,
        checks=InputConfig(),
        tick_interval_s=0.01,
    )


def _submit(worker: Worker, body: bytes) -> None:
    config = worker.pipeline.engine.config
    decoded = decode_body(body, FORMAT_PROTOBUF, config.limits, InputConfig())
    worker.submit(body, FORMAT_PROTOBUF, decoded.records)


def test_a_session_in_its_end_grace_at_shutdown_is_emitted_once(tmp_path: Path) -> None:
    first = CollectingSink()
    worker = _worker(tmp_path / "spool.db", Engine(Config()), first)
    worker.start()
    _submit(worker, _session("graceful"))
    worker.stop(evaluate_open=True, deadline=time.monotonic() + 30)
    assert [r.trajectory.session_id for r in first.results] == ["graceful"]
    assert first.results[0].trajectory.complete  # its own close (end marker) had fired

    again = CollectingSink()
    restarted = _worker(tmp_path / "spool.db", Engine(Config()), again)
    assert restarted.replay() == 0  # released from the spool: nothing is owed
    restarted.start()
    restarted.stop(evaluate_open=True, deadline=time.monotonic() + 30)
    assert again.results == []


class _Failing(Engine):
    def begin(self, closed: ClosedSession, trajectory: Any = None, **kwargs: Any) -> PendingResult:
        if closed.key == "broken":
            raise RuntimeError("an engine bug")
        return super().begin(closed, trajectory, **kwargs)


@pytest.mark.usefixtures("contained_errors")  # fails on purpose
def test_a_session_whose_evaluation_raised_stays_spooled(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = CollectingSink()
    worker = _worker(tmp_path / "spool.db", _Failing(Config()), sink)
    worker.start()
    _submit(worker, _session("broken"))
    _submit(worker, _session("fine"))
    worker.stop(evaluate_open=True, deadline=time.monotonic() + 30)
    assert [r.trajectory.session_id for r in sink.results] == ["fine"]
    assert worker.pipeline.errors == 1
    assert "spanjudge evaluate failed" in caplog.text

    restarted = _worker(tmp_path / "spool.db", Engine(Config()), CollectingSink())
    assert restarted.replay() == 2  # the broken session's two spans are still owed
