"""The sidecar's worker with a slow LLM judge on one session: another
session's verdicts are emitted and its spool rows released while that judgment is out; the slow
session's rows stay spooled until its own result is emitted and confirmed, and rows a session
re-opened with meanwhile are never released with the earlier revision."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry.trace import Tracer

from spanjudge import CollectingSink, semconv
from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.sidecar.config import InputConfig
from spanjudge.sidecar.intake import FORMAT_PROTOBUF, decode_body
from spanjudge.sidecar.spool import Spool
from spanjudge.sidecar.worker import Worker
from spanjudge.spans.otlp_json import sdk_spans_to_request
from tests.conftest import recorded
from tests.judges.gated import AsksJudge, GatedJudge

CONFIG = parse_config({"sessions": {"end_grace_s": 0.05}})


def _session(session_id: str, *, end: bool = True) -> bytes:
    """One agent turn with one tool call (ended with `spanjudge.session.end`), as OTLP bytes."""

    def body(tracer: Tracer) -> None:
        attrs: dict[str, Any] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
            semconv.SESSION_ID: session_id,
        }
        if end:
            attrs[semconv.SJ_SESSION_END] = True
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


def _worker(spool_path: Path, gate: GatedJudge | None, sink: CollectingSink) -> Worker:
    engine = Engine(CONFIG)
    if gate is not None:
        engine.evaluators.append(AsksJudge())
        default = engine.judge_for
        engine.judge_for = lambda name: gate if name == "asks_judge" else default(name)
    return Worker(
        engine,
        [sink],
        Spool(str(spool_path), max_bytes=64 * 1024 * 1024),
        policy=CONFIG.policy,
        limits=CONFIG.limits,
        checks=InputConfig(),
        tick_interval_s=0.01,
    )


def _submit(worker: Worker, body: bytes) -> None:
    decoded = decode_body(body, FORMAT_PROTOBUF, CONFIG.limits, InputConfig())
    worker.submit(body, FORMAT_PROTOBUF, decoded.records)


def _wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def _sessions(sink: CollectingSink) -> list[str]:
    return [r.trajectory.session_id for r in sink.results]


def _owed(spool_path: Path) -> int:
    """Spans a restarted sidecar would replay from the spool."""
    restarted = _worker(spool_path, None, CollectingSink())
    try:
        return restarted.replay()
    finally:
        restarted.spool.close()


def test_a_session_is_emitted_and_released_while_another_sessions_judge_runs(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool.db"
    gate = GatedJudge("slow")
    sink = CollectingSink()
    worker = _worker(spool, gate, sink)
    worker.start()
    try:
        _submit(worker, _session("slow"))
        assert gate.holding.wait(10)
        _submit(worker, _session("fast"))
        assert _wait_for(lambda: worker.evaluated_sessions == 1)
        # "fast" was emitted whole and released from the spool; "slow" waits for its judge
        assert _sessions(sink) == ["fast"]
        assert gate.answered == ["fast"]
        verdicts = {v.evaluator: v for v in sink.results[0].verdicts}
        assert verdicts["asks_judge"].outcome == "pass"
        assert {"skill_loaded", "trajectory_validity", "cost"} <= verdicts.keys()
        assert worker.pipeline.pending == 1
        # Meanwhile the slow session re-opens with a new span (not ended).
        _submit(worker, _session("slow", end=False))
        assert _wait_for(lambda: worker.pending_spans == 0 and len(worker.store.open) == 1)
    finally:
        gate.release.set()
    assert _wait_for(lambda: worker.evaluated_sessions == 2)
    assert _sessions(sink) == ["fast", "slow"]
    (slow,) = [r for r in sink.results if r.trajectory.session_id == "slow"]
    assert {v.evaluator: v for v in slow.verdicts}["asks_judge"].outcome == "pass"
    # Stopped without evaluating open sessions: the re-opened session's span stays spooled,
    # while both emitted sessions' spans were released.
    worker.stop(evaluate_open=False, deadline=time.monotonic() + 10)
    worker.spool.close()
    assert _sessions(sink) == ["fast", "slow"]  # nothing emitted twice
    assert _owed(spool) == 2  # the re-opened turn's two spans, nothing else


def test_a_judgment_out_at_stop_is_judge_timeout_emitted_once_and_released(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool.db"
    gate = GatedJudge("slow", deadline_s=120)
    sink = CollectingSink()
    worker = _worker(spool, gate, sink)
    worker.start()
    try:
        _submit(worker, _session("slow"))
        assert gate.holding.wait(10)
        started = time.monotonic()
        worker.stop(evaluate_open=True, deadline=time.monotonic() + 1.0)
        took_s = time.monotonic() - started
    finally:
        gate.release.set()
    worker.spool.close()
    assert took_s < 5  # the stop's budget, not the judge's 120 s deadline
    (result,) = sink.results
    late = {v.evaluator: v for v in result.verdicts}["asks_judge"]
    assert (late.outcome, late.reason) == ("not_evaluated", "judge_timeout")
    assert _owed(spool) == 0  # emitted and confirmed: released
