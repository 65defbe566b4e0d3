"""The evaluation span, its events and the verdict log records (ARCHITECTURE.md section 8),
from a real run of the scripted GenAI-instrumented agent through `SpanJudgeProcessor` on real SDK
providers."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge import CollectingSink
from spanjudge.demo.agent import SCENARIOS, ScriptedAgent
from spanjudge.emit.otel import OtelVerdictSink
from spanjudge.processor import SpanJudgeProcessor
from spanjudge.values import SessionResult, Target, Verdict, verdict_ids

CSV, INCIDENT, _WEATHER = SCENARIOS


def _run(*turns: tuple[Any, bool]) -> tuple[list[ReadableSpan], list[Any], list[SessionResult]]:
    spans = InMemorySpanExporter()
    logs = InMemoryLogRecordExporter()
    tracer_provider = TracerProvider()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    collect = CollectingSink()
    processor = SpanJudgeProcessor(
        tracer_provider=tracer_provider,
        sinks=[OtelVerdictSink(tracer_provider, logger_provider), collect],
    )
    tracer_provider.add_span_processor(processor)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    agent = ScriptedAgent(tracer_provider)
    for scenario, end in turns:
        agent.run(scenario, end_session=end)
    assert processor.force_flush(10_000)
    tracer_provider.shutdown()
    return list(spans.get_finished_spans()), list(logs.get_finished_logs()), collect.results


def _hex(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


def test_evaluation_span_parent_links_and_events() -> None:
    # One session, two turns (two traces): the second turn ends the session.
    second = replace(CSV, calls=(("calculate", {"expression": "1200 / 2500"}),), answer="48%")
    spans, _, results = _run((CSV, False), (second, True))
    turns = sorted(
        (s for s in spans if s.name.startswith("invoke_agent")), key=lambda s: s.start_time or 0
    )
    assert len(turns) == 2 and _hex(turns[0])[0] != _hex(turns[1])[0]
    evaluations = [s for s in spans if s.name == "spanjudge.evaluate"]
    assert len(evaluations) == 1
    evaluation = evaluations[0]
    assert evaluation.instrumentation_scope is not None
    assert evaluation.instrumentation_scope.name == "spanjudge"
    # In the last turn's trace, parented to its root span, linked to the first turn.
    assert evaluation.context is not None and evaluation.parent is not None
    assert f"{evaluation.context.trace_id:032x}" == _hex(turns[1])[0]
    assert f"{evaluation.parent.span_id:016x}" == _hex(turns[1])[1]
    assert [
        (f"{lk.context.trace_id:032x}", f"{lk.context.span_id:016x}") for lk in evaluation.links
    ] == [_hex(turns[0])]
    attrs = dict(evaluation.attributes or {})
    assert attrs["session.id"] == CSV.session_id
    assert attrs["spanjudge.revision"] == 1
    assert attrs["spanjudge.session.complete"] is True
    # One event per verdict, all named gen_ai.evaluation.result, with unique verdict ids.
    (result,) = results
    assert len(evaluation.events) == len(result.verdicts)
    assert {e.name for e in evaluation.events} == {"gen_ai.evaluation.result"}
    ids = [dict(e.attributes or {})["spanjudge.verdict.id"] for e in evaluation.events]
    assert len(set(ids)) == len(ids)
    loaded = [
        dict(e.attributes or {})
        for e in evaluation.events
        if (e.attributes or {}).get("gen_ai.evaluation.name") == "skill_loaded"
    ]
    assert loaded == [
        {
            "gen_ai.evaluation.name": "skill_loaded",
            "gen_ai.evaluation.score.value": 1.0,
            "gen_ai.evaluation.score.label": "loaded",
            "gen_ai.evaluation.explanation": loaded[0]["gen_ai.evaluation.explanation"],
            "spanjudge.outcome": "pass",
            "spanjudge.judge": "rule",
            "gen_ai.skill.name": "csv-report",
            "spanjudge.verdict.id": loaded[0]["spanjudge.verdict.id"],
        }
    ]
    assert "csv-report" in str(loaded[0]["gen_ai.evaluation.explanation"])


def test_log_records_carry_the_evaluated_span_ids() -> None:
    spans, logs, results = _run((CSV, True), (INCIDENT, True))
    by_id = {_hex(s)[1]: s for s in spans}
    (skill_span,) = [s for s in spans if s.name == "execute_tool skills"]
    incident_turn = next(
        s
        for s in spans
        if s.name.startswith("invoke_agent")
        and (s.attributes or {}).get("session.id") == INCIDENT.session_id
    )
    assert len(logs) == sum(len(r.verdicts) for r in results)
    records = [r.log_record for r in logs]
    assert {r.event_name for r in records} == {"gen_ai.evaluation.result"}
    for record in records:
        # Every log record points at a real span of the agent, never at spanjudge's own.
        assert record.span_id and f"{record.span_id:016x}" in by_id
        assert by_id[f"{record.span_id:016x}"].name != "spanjudge.evaluate"
    passed = next(
        r
        for r in records
        if (r.attributes or {}).get("gen_ai.evaluation.name") == "skill_loaded"
        and (r.attributes or {}).get("spanjudge.outcome") == "pass"
    )
    # The skill_loaded pass is about the skill-load span: its trace and span id.
    assert (f"{passed.trace_id:032x}", f"{passed.span_id:016x}") == _hex(skill_span)
    failed = next(
        r
        for r in records
        if (r.attributes or {}).get("gen_ai.evaluation.name") == "skill_loaded"
        and (r.attributes or {}).get("spanjudge.outcome") == "fail"
    )
    # No load span to point at: the verdict is about the session's (last) turn.
    assert (f"{failed.trace_id:032x}", f"{failed.span_id:016x}") == _hex(incident_turn)
    attrs = dict(failed.attributes or {})
    assert attrs["gen_ai.skill.name"] == "incident-triage"
    assert attrs["gen_ai.evaluation.score.value"] == 0.0
    assert attrs["session.id"] == INCIDENT.session_id
    assert failed.severity_text == "WARN"


def test_emitters_fall_back_to_the_global_providers() -> None:
    # Global providers can be set once per process: run it in a fresh interpreter.
    script = textwrap.dedent(
        """
        import json
        from opentelemetry import _logs, trace
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import (
            InMemoryLogRecordExporter, SimpleLogRecordProcessor
        )
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from spanjudge.demo.agent import SCENARIOS, ScriptedAgent
        from spanjudge.processor import SpanJudgeProcessor

        processor = SpanJudgeProcessor()  # created before the globals are set
        spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
        provider = TracerProvider()
        provider.add_span_processor(processor)
        provider.add_span_processor(SimpleSpanProcessor(spans))
        trace.set_tracer_provider(provider)
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
        _logs.set_logger_provider(logger_provider)
        ScriptedAgent().run(SCENARIOS[0], end_session=True)
        processor.force_flush(10000)
        print(json.dumps({
            "evaluations": sum(s.name == "spanjudge.evaluate" for s in spans.get_finished_spans()),
            "logs": len(logs.get_finished_logs()),
        }))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["evaluations"] == 1
    assert counts["logs"] >= 1


def test_verdict_spans_that_go_nowhere_are_warned_about_once(caplog) -> None:  # type: ignore[no-untyped-def]
    from opentelemetry.trace import NoOpTracerProvider

    from spanjudge.demo import run_demo
    from spanjudge.emit.otel import OtelVerdictSink

    results, _ = run_demo()
    sink = OtelVerdictSink(tracer_provider=NoOpTracerProvider())
    with caplog.at_level("WARNING", logger="spanjudge"):
        for result in results:
            sink.emit(result)
    warnings = [r for r in caplog.records if "was not recorded" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.parametrize("sdk_logs", [True, False], ids=["sdk_logs", "no_logs"])
def test_the_no_tracer_warning_says_whether_log_records_still_carry_the_verdicts(  # type: ignore[no-untyped-def]
    caplog, sdk_logs
):
    # SpanJudgeProcessor(config) alone, before any provider is set: the warning must not promise
    # log records that the API's no-op LoggerProvider drops.
    from opentelemetry._logs import NoOpLoggerProvider
    from opentelemetry.trace import NoOpTracerProvider

    from spanjudge.demo import run_demo

    results, _ = run_demo()
    logs = LoggerProvider() if sdk_logs else NoOpLoggerProvider()
    sink = OtelVerdictSink(tracer_provider=NoOpTracerProvider(), logger_provider=logs)
    with caplog.at_level("WARNING", logger="spanjudge"):
        sink.emit(results[0])
    [warning] = [r.getMessage() for r in caplog.records if "was not recorded" in r.getMessage()]
    assert ("the log records still carry the verdicts" in warning) == sdk_logs, warning
    assert ("reach no exporter" in warning) != sdk_logs, warning


def test_verdict_ids_hash_the_session_revision_evaluator_and_target() -> None:
    """A verdict's id is the first 32 hex digits of the SHA-256 of its session id, revision,
    evaluator and target (skill, span id, tool call id, turn) joined by U+001F, whichever
    verdicts of the session are identified before it."""
    targets = [
        Target(),
        Target(skill="pdf", span_id="00f067aa0ba902b7", tool_call_id="call-1", turn=0),
        Target(span_id="00f067aa0ba902b7"),
        Target(turn=3),
    ]
    verdicts = [
        Verdict(evaluator=name, outcome="pass", score=1.0, label="ok", explanation="", target=t)
        for name in ("skill_loaded", "tool_selection")
        for t in targets
    ]
    ids = verdict_ids("sessión-1", 2)
    for verdict in verdicts:
        t = verdict.target
        turn = "" if t.turn is None else str(t.turn)
        fields = [t.skill or "", t.span_id or "", t.tool_call_id or "", turn]
        key = "\x1f".join(["sessión-1", "2", verdict.evaluator, *fields])
        expected = hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
        assert ids(verdict) == expected
        assert verdict.stable_id("sessión-1", 2) == expected
    assert ids(verdicts[0]) != verdict_ids("sessión-1", 3)(verdicts[0])
