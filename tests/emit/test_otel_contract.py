"""The emitted evaluation spans, span events and log records of the committed fixtures' sessions
against the contract (ARCHITECTURE.md section 8), every field derived here from the session's
result: whatever builds them, per verdict or per session, emits these."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge import CollectingSink
from spanjudge.config import parse_config
from spanjudge.emit.otel import OtelVerdictSink
from spanjudge.engine import Engine
from spanjudge.offline import run_offline
from spanjudge.values import SessionResult, Verdict

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results() -> list[SessionResult]:
    out = CollectingSink()
    for folder in ("claude_code", "strands", "genai_manual", "langgraph"):
        config = parse_config(
            {"expectations_files": [str(ROOT / "fixtures" / folder / "expectations.yaml")]}
        )
        files = sorted(glob.glob(str(ROOT / "fixtures" / folder / "*.jsonl")))
        run_offline(files, Engine(config), out, skip_invalid=True)
    assert len(out.results) > 20
    return out.results


def _expected_attributes(verdict: Verdict, session_id: str, revision: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.evaluation.name": verdict.evaluator,
        "gen_ai.evaluation.score.label": verdict.label,
        "gen_ai.evaluation.explanation": verdict.explanation,
        "spanjudge.outcome": verdict.outcome,
        "spanjudge.judge": verdict.judge,
        "spanjudge.verdict.id": verdict.stable_id(session_id, revision),
    }
    if verdict.score is not None:
        attrs["gen_ai.evaluation.score.value"] = float(verdict.score)
    if verdict.reason:
        attrs["spanjudge.reason"] = verdict.reason
    if verdict.target.skill:
        attrs["gen_ai.skill.name"] = verdict.target.skill
    if verdict.error_type:
        attrs["error.type"] = verdict.error_type
    return attrs


def _ids(trace_id: int, span_id: int) -> tuple[str, str]:
    return f"{trace_id:032x}", f"{span_id:016x}"


def test_each_session_emits_its_span_events_and_log_records_as_the_contract_says(
    results: list[SessionResult],
) -> None:
    span_out, log_out = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_out))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_out))
    sink = OtelVerdictSink(tracer_provider, logger_provider)
    for result in results:
        sink.emit(result)
    spans = list(span_out.get_finished_spans())
    records = [r.log_record for r in log_out.get_finished_logs()]
    assert len(spans) == len(results)
    assert len(records) == sum(len(r.verdicts) for r in results)
    checked_targets = 0
    for result, span in zip(results, spans, strict=True):
        trajectory = result.trajectory
        session, revision = trajectory.session_id, trajectory.revision
        assert span.name == "spanjudge.evaluate"
        expected_span_attrs: dict[str, Any] = {
            "session.id": session,
            "spanjudge.revision": revision,
            "spanjudge.session.complete": trajectory.complete,
        }
        if trajectory.agent_name:
            expected_span_attrs["gen_ai.agent.name"] = trajectory.agent_name
        assert dict(span.attributes or {}) == expected_span_attrs
        # in the last turn's trace, under its root span, linked to the other turns
        turns = [(t.trace_id, t.span_id) for t in trajectory.turns]
        assert span.context is not None and span.parent is not None
        parent = _ids(span.context.trace_id, span.parent.span_id)
        if turns:
            assert parent == turns[-1]
        assert [_ids(k.context.trace_id, k.context.span_id) for k in span.links] == turns[:-1]
        # one event per verdict, in order, and one log record per verdict, in order
        events = list(span.events)
        mine = records[: len(result.verdicts)]
        records = records[len(result.verdicts) :]
        steps = {s.span_id: s.trace_id for s in trajectory.steps}
        for verdict, event, record in zip(result.verdicts, events, mine, strict=True):
            attrs = _expected_attributes(verdict, session, revision)
            assert event.name == "gen_ai.evaluation.result"
            assert dict(event.attributes or {}) == attrs
            assert event.timestamp == span.end_time
            assert record.event_name == "gen_ai.evaluation.result"
            assert dict(record.attributes or {}) == {
                **attrs,
                "session.id": session,
                "spanjudge.revision": revision,
            }
            assert record.timestamp == record.observed_timestamp == span.end_time
            failed = verdict.outcome == "fail"
            assert record.severity_text == ("WARN" if failed else "INFO")
            # the evaluated span: the verdict's target span, else its turn, else the last turn
            target = verdict.target
            if target.span_id and target.span_id in steps:
                about = (steps[target.span_id], target.span_id)
                checked_targets += 1
            elif target.turn is not None and 0 <= target.turn < len(turns):
                about = turns[target.turn]
            else:
                about = parent
            assert record.trace_id is not None and record.span_id is not None
            assert _ids(record.trace_id, record.span_id) == about
    assert checked_targets > 0  # some verdicts are about a span other than the last turn
