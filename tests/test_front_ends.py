"""One intake for every front end (ARCHITECTURE.md section 1): the same traces give the same
sessions and statistics through the in-process processor, the sidecar's worker and
`spanjudge eval`, including a file that holds spanjudge's own evaluation spans.

The traces come from the bundled scripted agent run through a real `SpanJudgeProcessor` on a
real SDK `TracerProvider`; the exporter behind the processor records the agent's spans and the
`spanjudge.evaluate` spans the processor emitted, as a Collector `file` exporter would."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge import CollectingSink, semconv
from spanjudge.config import Config
from spanjudge.demo.agent import SCENARIOS, ScriptedAgent
from spanjudge.emit.otel import OtelVerdictSink
from spanjudge.emit.summary import Summary
from spanjudge.engine import Engine
from spanjudge.offline import run_offline
from spanjudge.processor import SpanJudgeProcessor
from spanjudge.sidecar.config import InputConfig
from spanjudge.sidecar.intake import FORMAT_PROTOBUF, decode_body
from spanjudge.sidecar.spool import Spool
from spanjudge.sidecar.worker import Worker
from spanjudge.spans.otlp_json import sdk_spans_to_request
from spanjudge.values import SessionResult
from tests.conftest import write_jsonl


def _processor_run() -> tuple[list[SessionResult], list[ReadableSpan]]:
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    collected = CollectingSink()
    processor = SpanJudgeProcessor(
        tracer_provider=provider,
        sinks=[OtelVerdictSink(tracer_provider=provider), collected],
        shutdown_on_exit=False,
    )
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exported))
    agent = ScriptedAgent(provider)
    for scenario in SCENARIOS:
        agent.run(scenario, end_session=True)
    assert processor.force_flush(30_000)
    provider.shutdown()
    return collected.results, list(exported.get_finished_spans())


def _sidecar_run(spans: list[ReadableSpan], spool_path: Path) -> list[SessionResult]:
    config = Config()
    collected = CollectingSink()
    worker = Worker(
        Engine(config),
        [collected],
        Spool(str(spool_path), max_bytes=64 * 1024 * 1024),
        policy=config.policy,
        limits=config.limits,
        checks=InputConfig(),
        tick_interval_s=0.01,
    )
    body = sdk_spans_to_request(spans).SerializeToString()
    decoded = decode_body(body, FORMAT_PROTOBUF, config.limits, InputConfig())
    worker.start()
    worker.submit(body, FORMAT_PROTOBUF, decoded.records)
    worker.stop(evaluate_open=True, deadline=time.monotonic() + 30)
    assert worker.unconfirmed_sessions == 0
    return collected.results


def _offline_run(path: Path) -> list[SessionResult]:
    writer = CollectingSink()
    run_offline([str(path)], Engine(Config()), writer)
    return writer.results


def _view(results: list[SessionResult]) -> dict[str, Any]:
    """What a user compares: per session its completeness, statistics and verdicts."""
    return {
        r.trajectory.session_id: {
            "complete": r.trajectory.complete,
            "revision": r.trajectory.revision,
            "stats": r.trajectory.stats,
            "verdicts": [(v.evaluator, v.outcome, v.reason, v.score, v.target) for v in r.verdicts],
            "coverage": r.coverage,
        }
        for r in results
    }


def _summary(results: list[SessionResult]) -> dict[str, Any]:
    summary = Summary()
    for result in results:
        summary.add(result)
    return summary.to_json()


def _agent_duration_s(spans: list[ReadableSpan], session_id: str) -> float:
    """The oracle: first start to last end over the agent's own spans of the session."""
    mine = [s for s in spans if s.name != semconv.SPAN_EVALUATE and _session_of(s) == session_id]
    assert mine
    return (max(s.end_time or 0 for s in mine) - min(s.start_time or 0 for s in mine)) / 1e9


def _session_of(span: ReadableSpan) -> str | None:
    value = (span.attributes or {}).get(semconv.SESSION_ID)
    return str(value) if value is not None else None


def test_processor_sidecar_and_offline_agree_on_a_file_with_evaluation_spans(
    tmp_path: Path,
) -> None:
    online, exported = _processor_run()
    evaluation_spans = [s for s in exported if s.name == semconv.SPAN_EVALUATE]
    assert len(evaluation_spans) == len(SCENARIOS)  # the file holds spanjudge's own spans
    path = write_jsonl(tmp_path / "traces.jsonl", exported)

    offline = _offline_run(path)
    sidecar = _sidecar_run(exported, tmp_path / "spool.db")

    assert sorted(_view(online)) == sorted(s.session_id for s in SCENARIOS)
    assert _view(offline) == _view(online)
    assert _view(sidecar) == _view(online)
    assert _summary(offline) == _summary(online) == _summary(sidecar)


def test_offline_duration_is_the_agents_not_the_evaluation_spans(tmp_path: Path) -> None:
    """The defect: `spanjudge eval` of a file holding `spanjudge.evaluate` spans counted them
    into the sessions, so duration_s ran until spanjudge's own evaluation."""
    _, exported = _processor_run()
    path = write_jsonl(tmp_path / "traces.jsonl", exported)
    for result in _offline_run(path):
        session_id = result.trajectory.session_id
        expected = _agent_duration_s(exported, session_id)
        assert abs(result.trajectory.stats.duration_s - expected) < 1e-6, session_id
