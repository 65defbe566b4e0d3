"""`SpanJudgeProcessor` lifecycle and containment, on real SDK providers with the scripted agent."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge import CollectingSink
from spanjudge.config import Config, load_config, parse_config
from spanjudge.demo.agent import SCENARIOS, ScriptedAgent
from spanjudge.emit.otel import OtelVerdictSink
from spanjudge.engine import Engine
from spanjudge.errors import ConfigError
from spanjudge.evaluators.base import EvaluationContext
from spanjudge.processor import SpanJudgeProcessor
from spanjudge.values import SessionResult, Verdict
from tests.conftest import unavailable
from tests.sidecar.helpers import VerdictServer

ROOT = Path(__file__).resolve().parents[1]
CSV, INCIDENT, WEATHER = SCENARIOS


@dataclass
class Rig:
    processor: SpanJudgeProcessor
    provider: TracerProvider
    spans: InMemorySpanExporter
    collect: CollectingSink
    reader: InMemoryMetricReader
    agent: ScriptedAgent

    def metric(self, name: str) -> dict[frozenset[Any], Any]:
        data = self.reader.get_metrics_data()
        out: dict[frozenset[Any], Any] = {}
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == name:
                        for p in m.data.data_points:
                            out[frozenset(dict(p.attributes).items())] = p.value
        return out


def rig(config: Config | None = None, *, sinks: Sequence[Any] = (), **kwargs: Any) -> Rig:
    provider = TracerProvider()
    spans = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    collect = CollectingSink()
    processor = SpanJudgeProcessor(
        config,
        tracer_provider=provider,
        meter_provider=MeterProvider(metric_readers=[reader]),
        sinks=[OtelVerdictSink(provider), *sinks, collect],
        **kwargs,
    )
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return Rig(processor, provider, spans, collect, reader, ScriptedAgent(provider))


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


# --- lifecycle ---


def test_shutdown_without_spans_is_clean_and_idempotent() -> None:
    r = rig()
    r.processor.shutdown()
    assert not r.processor._worker.is_alive()
    r.processor.shutdown()  # second call: no error, nothing to do
    assert r.collect.results == []


def test_flush_and_spans_after_shutdown_are_refused_quietly() -> None:
    r = rig(parse_config({"sessions": {"mode": "session"}}))
    r.agent.run(CSV)  # no end marker, no close per turn: the session is still open at shutdown
    r.processor.shutdown()
    # Shutdown evaluated the open session and marked it incomplete.
    assert r.collect.session_ids() == [CSV.session_id]
    (result,) = r.collect.results
    assert result.trajectory.complete is False and result.trajectory.close_reason == "shutdown"
    (evaluation,) = [s for s in r.spans.get_finished_spans() if s.name == "spanjudge.evaluate"]
    assert (evaluation.attributes or {})["spanjudge.session.complete"] is False
    assert r.processor.force_flush(1000) is False
    r.agent.run(INCIDENT, end_session=True)  # the agent still runs; nothing is queued
    assert r.processor.force_flush(1000) is False
    assert r.collect.session_ids() == [CSV.session_id]
    # ...but what ended after shutdown is counted as dropped, not lost quietly
    dropped = r.metric("spanjudge.spans.dropped")
    assert dropped[frozenset({("reason", "after_shutdown")})] > 0


def test_queue_full_drops_and_counts_without_blocking() -> None:
    # A worker that only wakes on demand, a queue of 5: the 16 spans of the demo overflow it.
    r = rig(max_queue_size=5, max_batch_size=10_000, tick_interval_s=3600)
    for scenario in SCENARIOS:
        r.agent.run(scenario, end_session=True)
    assert r.processor.dropped_spans == 16 - 5
    assert r.processor.force_flush(10_000)
    assert r.metric("spanjudge.spans.dropped") == {frozenset({("reason", "queue_full")}): 11}
    assert r.metric("spanjudge.spans.received") == {frozenset(): 5}
    r.processor.shutdown()


def test_per_turn_and_idle_close_policies() -> None:
    per_turn = parse_config({"sessions": {"mode": "turn", "turn_grace_s": 0}})
    r = rig(per_turn, tick_interval_s=0.02)
    r.agent.run(CSV)  # no end marker, no flush: the ended root turn span closes it
    assert wait_for(lambda: len(r.collect.results) == 1)
    assert r.collect.results[0].trajectory.close_reason == "turn"
    assert r.collect.results[0].trajectory.complete is True
    r.processor.shutdown()

    idle = parse_config({"sessions": {"idle_timeout_s": 0.1}})
    r = rig(idle, tick_interval_s=0.02)
    r.agent.run(WEATHER)
    assert wait_for(lambda: len(r.collect.results) == 1)
    assert r.collect.results[0].trajectory.close_reason == "idle"
    r.processor.shutdown()


def test_each_turn_is_evaluated_when_its_root_span_ends_with_no_configuration() -> None:
    # No end marker (OpenInference sets none) and no sessions section: each turn is judged
    # soon after it ends, the second as a new revision, and nothing waits for shutdown.
    r = rig(parse_config({"sessions": {"turn_grace_s": 0}}), tick_interval_s=0.02)
    r.agent.run(CSV)
    assert wait_for(lambda: len(r.collect.results) == 1)
    r.agent.run(CSV)
    assert wait_for(lambda: len(r.collect.results) == 2)
    r.processor.shutdown()
    seen = [
        (t.session_id, t.revision, t.close_reason, t.complete)
        for t in (result.trajectory for result in r.collect.results)
    ]
    assert seen == [
        (CSV.session_id, 1, "turn", True),
        (CSV.session_id, 2, "turn", True),
    ]


def test_a_configuration_path_is_taken_as_configure_opentelemetry_takes_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "spanjudge.yaml"
    path.write_text("evaluators:\n  cost: {budget: {tool_calls: 0}}\n")
    r = rig(load_config(str(path)))
    r.agent.run(CSV, end_session=True)
    assert r.processor.force_flush(10_000)
    r.processor.shutdown()
    from_config = r.collect.results
    r = rig(str(path))  # type: ignore[arg-type]
    r.agent.run(CSV, end_session=True)
    assert r.processor.force_flush(10_000)
    r.processor.shutdown()
    (result,) = r.collect.results
    assert [v.outcome for v in result.verdicts if v.evaluator == "cost"] == ["fail"]
    assert [v.outcome for v in result.verdicts] == [v.outcome for v in from_config[0].verdicts]
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        SpanJudgeProcessor(str(tmp_path / "missing.yaml"), shutdown_on_exit=False)


def test_end_marker_closes_complete_on_flush() -> None:
    r = rig()
    r.agent.run(INCIDENT, end_session=True)
    assert r.processor.force_flush(10_000)
    (result,) = r.collect.results
    assert result.trajectory.close_reason == "end_marker" and result.trajectory.complete
    skill = [v for v in result.verdicts if v.evaluator == "skill_loaded"]
    assert [(v.outcome, v.target.skill) for v in skill] == [("fail", "incident-triage")]
    r.processor.shutdown()


def test_lone_surrogates_in_sdk_strings_are_exported_as_replacement_characters() -> None:
    # Python strings may hold lone surrogates (a file name read with `surrogateescape`), and the
    # SDK passes them on; they have no UTF-8 form, so no OTLP exporter could send them.
    verdicts = VerdictServer()
    r = rig()
    exporter = GrpcSpanExporter(endpoint=verdicts.endpoint, insecure=True)
    r.provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        attributes = {
            "session.id": "s-\ud800",
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "shop\udc00",
            "spanjudge.session.end": True,
        }
        tracer = r.provider.get_tracer("agent")
        with tracer.start_as_current_span("invoke_agent shop", attributes=attributes):
            pass
        assert r.processor.force_flush(10_000)
        assert wait_for(lambda: bool(verdicts.received.eval_spans))
        (span,) = verdicts.received.eval_spans
        assert span["attrs"]["session.id"] == "s-\ufffd"
        assert span["attrs"]["gen_ai.agent.name"] == "shop\ufffd"
        (result,) = r.collect.results
        assert len(span["events"]) == len(result.verdicts) > 0
    finally:
        r.processor.shutdown()
        r.provider.shutdown()
        verdicts.stop()


# --- containment ---


@dataclass(frozen=True)
class Raising:
    name: str = "always_raises"

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        raise ZeroDivisionError("boom")


@pytest.mark.usefixtures("contained_errors")  # fails on purpose
def test_evaluator_that_raises_becomes_an_error_verdict() -> None:
    r = rig(engine=Engine(evaluators=[Raising()]))
    answer = r.agent.run(CSV, end_session=True)
    assert answer == CSV.answer  # the agent is unaffected
    assert r.processor.force_flush(10_000)
    (result,) = r.collect.results
    (verdict,) = result.verdicts
    assert verdict.outcome == "not_evaluated" and verdict.error_type == "ZeroDivisionError"
    (evaluation,) = [s for s in r.spans.get_finished_spans() if s.name == "spanjudge.evaluate"]
    (event,) = evaluation.events
    assert (event.attributes or {})["error.type"] == "ZeroDivisionError"
    assert (event.attributes or {})["spanjudge.reason"] == "evaluator_error"
    r.processor.shutdown()


class BrokenSink:
    def emit(self, result: SessionResult) -> None:
        raise RuntimeError("sink down")

    def flush(self, timeout_s: float) -> bool:
        raise RuntimeError("sink down")

    def shutdown(self) -> None:
        raise RuntimeError("sink down")


@pytest.mark.usefixtures("contained_errors")  # fails on purpose
def test_broken_sink_and_bad_span_are_contained(caplog: pytest.LogCaptureFixture) -> None:
    r = rig(sinks=[BrokenSink()])
    r.processor.on_end(ReadableSpan(name="no context"))  # cannot be converted
    r.agent.run(CSV, end_session=True)
    r.agent.run(WEATHER, end_session=True)
    assert r.processor.force_flush(10_000) is False  # a sink failed to flush: say so
    assert sorted(r.collect.session_ids()) == sorted([CSV.session_id, WEATHER.session_id])
    assert r.metric("spanjudge.spans.dropped") == {frozenset({("reason", "invalid_span")}): 1}
    errors = r.metric("spanjudge.internal_errors")
    assert errors[frozenset({("where", "emit:BrokenSink")})] == 2
    # Logged once per kind of failure, not once per occurrence.
    assert sum("emit:BrokenSink" in rec.getMessage() for rec in caplog.records) == 1
    r.processor.shutdown()


class JudgeLike:
    """An evaluator that, like an LLM judge, makes its own traced call during evaluation."""

    name = "judge_like"

    def __init__(self, provider: TracerProvider) -> None:
        self.tracer = provider.get_tracer("spanjudge.judges.openai")
        self.suppressed: list[Any] = []

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        self.suppressed.append(otel_context.get_value(_SUPPRESS_INSTRUMENTATION_KEY))
        attrs = {"gen_ai.operation.name": "chat", "session.id": "judge-session"}
        with self.tracer.start_as_current_span("chat judge-model", attributes=attrs):
            pass
        return [
            Verdict(evaluator=self.name, outcome="pass", score=1.0, label="ok", explanation="ok")
        ]


def test_own_and_judge_spans_are_never_agent_activity() -> None:
    provider = TracerProvider()
    collect = CollectingSink()
    judge = JudgeLike(provider)
    processor = SpanJudgeProcessor(
        tracer_provider=provider,
        engine=Engine(evaluators=[judge]),
        sinks=[OtelVerdictSink(provider), collect],
    )
    provider.add_span_processor(processor)
    ScriptedAgent(provider).run(CSV, end_session=True)
    assert processor.force_flush(10_000)
    # The evaluation span and the judge's span went through the processor again: no new session.
    assert processor.force_flush(10_000)
    assert collect.session_ids() == [CSV.session_id]
    assert judge.suppressed == [True]  # instrumentation is suppressed around spanjudge's work
    processor.shutdown()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_worker_survives_fork() -> None:
    r = rig()
    r.agent.run(CSV)  # left open in the parent when it forks
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: its own worker, its own (empty) sessions
        code = 1
        try:
            os.close(read_fd)
            r.agent.run(WEATHER, end_session=True)
            ok = r.processor.force_flush(10_000)
            os.write(write_fd, json.dumps({"ok": ok, "sessions": r.collect.session_ids()}).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        child = json.loads(pipe.read() or "{}")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert child == {"ok": True, "sessions": [WEATHER.session_id]}
    assert r.processor.force_flush(10_000)
    assert r.collect.session_ids() == [CSV.session_id]  # the parent still evaluates its own
    r.processor.shutdown()


# --- a real framework ---


def test_strands_agent_with_the_processor() -> None:
    if importlib.util.find_spec("strands") is None:
        unavailable("strands", "strands-agents is not installed in this interpreter")
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "strands_agent.py"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    )
    summary = json.loads(out.stdout)
    assert summary["answers"] == [
        "The grand total is 2500 (north 1200, south 800, east 500).",
        "North is 48% of the total.",
    ]
    first, last = summary["turns"]
    (evaluation,) = summary["evaluations"]
    assert evaluation["scope"] == "spanjudge"
    assert evaluation["trace_id"] == last["trace_id"]
    assert evaluation["parent_span_id"] == last["span_id"]
    assert evaluation["links"] == [first["span_id"]]
    assert evaluation["attributes"]["spanjudge.session.complete"] is True
    loaded = [e for e in evaluation["events"] if e["gen_ai.evaluation.name"] == "skill_loaded"]
    assert [(e["spanjudge.outcome"], e["gen_ai.skill.name"]) for e in loaded] == [
        ("pass", "csv-report")
    ]
    (log,) = [r for r in summary["logs"] if r["gen_ai.evaluation.name"] == "skill_loaded"]
    assert summary["spans"][log["span_id"]] == "execute_tool skills"


def test_plain_otel_agent_with_the_processor() -> None:
    # The framework-free equivalent of the Strands test; always runs.
    r = rig()
    second = replace(CSV, calls=(), answer="Done.")
    r.agent.run(CSV)
    r.agent.run(second, end_session=True)
    assert r.processor.force_flush(10_000)
    turns = sorted(
        (s for s in r.spans.get_finished_spans() if s.name.startswith("invoke_agent")),
        key=lambda s: s.start_time or 0,
    )
    (evaluation,) = [s for s in r.spans.get_finished_spans() if s.name == "spanjudge.evaluate"]
    assert evaluation.parent is not None and turns[1].context is not None
    assert evaluation.parent.span_id == turns[1].context.span_id
    assert [link.context.span_id for link in evaluation.links] == [
        turns[0].context.span_id if turns[0].context else None
    ]
    assert len(evaluation.events) == len(r.collect.results[0].verdicts) > 0
    r.processor.shutdown()


def test_bad_construction_fails_at_once_with_the_fix() -> None:
    with pytest.raises(TypeError, match=r"pass a YAML path"):
        SpanJudgeProcessor({"sessions": {}}, shutdown_on_exit=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_queue_size must be an integer >= 1"):
        SpanJudgeProcessor(max_queue_size="10", shutdown_on_exit=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"tick_interval_s must be a number >= 0\.01"):
        SpanJudgeProcessor(tick_interval_s=0, shutdown_on_exit=False)


EXIT_SCRIPT = """
import sys
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    LogRecordExporter, LogRecordExportResult, SimpleLogRecordProcessor
)
from opentelemetry.sdk.trace import TracerProvider
from spanjudge.processor import SpanJudgeProcessor
from spanjudge.demo.agent import SCENARIOS, ScriptedAgent

class Printing(LogRecordExporter):
    def export(self, batch):
        for record in batch:
            print("LOG", record.log_record.attributes["gen_ai.evaluation.name"], flush=True)
        return LogRecordExportResult.SUCCESS
    def shutdown(self):
        pass
    def force_flush(self, timeout_millis=30000):
        return True

# The tracer provider first (the common order): at exit the SDK shuts providers down newest
# first, so the logger provider would be gone before the tracer provider's processors run.
tracer_provider = TracerProvider()
logger_provider = LoggerProvider()
logger_provider.add_log_record_processor(SimpleLogRecordProcessor(Printing()))
tracer_provider.add_span_processor(
    SpanJudgeProcessor(tracer_provider=tracer_provider, logger_provider=logger_provider)
)
ScriptedAgent(tracer_provider).run(SCENARIOS[0])
# no shutdown, no end marker: the session is still open when the script ends
"""


def test_open_sessions_are_evaluated_at_exit_before_the_providers_go(tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "agent.py"
    script.write_text(EXIT_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "LOG skill_loaded" in done.stdout
