"""A slow LLM judge on one session holds up no other: the processor emits a
session's verdicts, exported through a real SDK provider, while another session's judgment is
still out; at shutdown a judgment still out is `judge_timeout`, emitted once, never lost."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge import semconv
from spanjudge.config import parse_config
from spanjudge.demo.agent import SCENARIOS, ScriptedAgent
from spanjudge.emit.otel import OtelVerdictSink
from spanjudge.engine import Engine
from spanjudge.processor import SpanJudgeProcessor
from tests.judges.gated import AsksJudge, GatedJudge

CSV, INCIDENT, _ = SCENARIOS


def _engine(gate: GatedJudge) -> Engine:
    """The default evaluators (deterministic ones and heuristic-judged ones) plus one that asks
    ``gate``, an LLM-like judge on its own pool."""
    engine = Engine(parse_config({"sessions": {"end_grace_s": 0.05}}))
    engine.evaluators.append(AsksJudge())
    default = engine.judge_for
    engine.judge_for = lambda name: gate if name == "asks_judge" else default(name)
    return engine


def _setup(
    gate: GatedJudge, **kwargs: Any
) -> tuple[SpanJudgeProcessor, InMemorySpanExporter, ScriptedAgent]:
    provider = TracerProvider()
    spans = InMemorySpanExporter()
    processor = SpanJudgeProcessor(
        engine=_engine(gate),
        tracer_provider=provider,
        sinks=[OtelVerdictSink(provider)],
        tick_interval_s=0.02,
        shutdown_on_exit=False,
        **kwargs,
    )
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return processor, spans, ScriptedAgent(provider)


def _evaluations(spans: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {
        str((s.attributes or {})[semconv.SESSION_ID]): s
        for s in spans.get_finished_spans()
        if s.name == semconv.SPAN_EVALUATE
    }


def _verdicts(span: ReadableSpan) -> dict[str, dict[str, Any]]:
    return {
        str((e.attributes or {})[semconv.GEN_AI_EVALUATION_NAME]): dict(e.attributes or {})
        for e in span.events
    }


def _wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_a_session_is_exported_while_another_sessions_judge_is_still_running() -> None:
    gate = GatedJudge(CSV.session_id)
    processor, spans, agent = _setup(gate)
    try:
        agent.run(CSV, end_session=True)
        assert gate.holding.wait(10)  # the CSV session's judgment is out, held
        agent.run(INCIDENT, end_session=True)
        assert _wait_for(lambda: INCIDENT.session_id in _evaluations(spans))
        # The incident session went out whole (its own judgment answered at once) while the
        # CSV session's judge still held its judgment and the CSV session was not exported.
        assert gate.answered == [INCIDENT.session_id]
        assert CSV.session_id not in _evaluations(spans)
        incident = _verdicts(_evaluations(spans)[INCIDENT.session_id])
        assert incident["asks_judge"][semconv.SJ_OUTCOME] == "pass"
        assert incident["skill_loaded"][semconv.SJ_OUTCOME] in ("pass", "fail")
    finally:
        gate.release.set()
    assert _wait_for(lambda: CSV.session_id in _evaluations(spans))
    csv = _verdicts(_evaluations(spans)[CSV.session_id])
    assert csv["asks_judge"][semconv.SJ_OUTCOME] == "pass"  # its late judgment is used
    processor.shutdown()
    evaluations = [s for s in spans.get_finished_spans() if s.name == semconv.SPAN_EVALUATE]
    assert sorted(str((s.attributes or {})[semconv.SESSION_ID]) for s in evaluations) == sorted(
        [CSV.session_id, INCIDENT.session_id]
    )  # each exactly once


def test_a_judgment_still_out_at_shutdown_is_judge_timeout_and_the_session_is_exported() -> None:
    gate = GatedJudge(CSV.session_id, deadline_s=120)
    processor, spans, agent = _setup(gate, shutdown_timeout_s=1.0)
    try:
        agent.run(CSV, end_session=True)
        assert gate.holding.wait(10)
        started = time.monotonic()
        processor.shutdown()
        took_s = time.monotonic() - started
    finally:
        gate.release.set()
    assert took_s < 5  # within the shutdown budget, not the judge's 120 s deadline
    (evaluation,) = [s for s in spans.get_finished_spans() if s.name == semconv.SPAN_EVALUATE]
    verdicts = _verdicts(evaluation)
    late = verdicts["asks_judge"]
    assert (late[semconv.SJ_OUTCOME], late[semconv.SJ_REASON]) == ("not_evaluated", "judge_timeout")
    assert "before the flush or shutdown" in str(late[semconv.GEN_AI_EVALUATION_EXPLANATION])
    assert verdicts["skill_loaded"][semconv.SJ_OUTCOME] in ("pass", "fail")
