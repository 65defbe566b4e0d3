"""`SpanJudgeProcessor` under faults: SystemExit from an evaluator, a shutdown that times out
while an evaluation hangs, and concurrent shutdown callers (real SDK providers, scripted agent)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from spanjudge import CollectingSink
from spanjudge.demo.agent import SCENARIOS, ScriptedAgent
from spanjudge.engine import Engine
from spanjudge.evaluators.base import EvaluationContext
from spanjudge.processor import SpanJudgeProcessor
from spanjudge.values import Verdict

CSV, INCIDENT, WEATHER = SCENARIOS


class Exiting:
    """A plugin evaluator that calls sys.exit on the first session it sees."""

    name = "exiting_plugin"

    def __init__(self) -> None:
        self.calls = 0

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        self.calls += 1
        if self.calls == 1:
            raise SystemExit(3)
        return [Verdict(evaluator=self.name, outcome="pass", score=1.0, label="ok", explanation="")]


class Hanging:
    """An evaluator that hangs until released (a judge call that never returns)."""

    name = "hanging"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        self.entered.set()
        self.release.wait(30)
        return [Verdict(evaluator=self.name, outcome="pass", score=1.0, label="ok", explanation="")]


def _processor(
    evaluator: Any, **kwargs: Any
) -> tuple[SpanJudgeProcessor, CollectingSink, ScriptedAgent]:
    provider = TracerProvider()
    collect = CollectingSink()
    processor = SpanJudgeProcessor(
        engine=Engine(evaluators=[evaluator]),
        sinks=[collect],
        tick_interval_s=0.05,
        shutdown_on_exit=False,
        **kwargs,
    )
    provider.add_span_processor(processor)
    return processor, collect, ScriptedAgent(provider)


@pytest.mark.usefixtures("contained_errors")  # fails on purpose
def test_system_exit_from_an_evaluator_is_an_error_verdict_and_the_worker_lives() -> None:
    processor, collect, agent = _processor(Exiting())
    agent.run(CSV, end_session=True)
    assert processor.force_flush(10_000)
    agent.run(INCIDENT, end_session=True)
    assert processor.force_flush(10_000)  # served: the worker is alive
    first, second = collect.results
    (verdict,) = first.verdicts
    assert verdict.outcome == "not_evaluated" and verdict.error_type == "SystemExit"
    assert second.verdicts[0].outcome == "pass"
    processor.shutdown()


def test_timed_out_shutdown_stops_the_worker_and_every_caller_waits() -> None:
    hanging = Hanging()
    processor, collect, agent = _processor(hanging, shutdown_timeout_s=1.0)
    agent.run(CSV, end_session=True)
    assert hanging.entered.wait(10)  # the worker hangs in this evaluation
    agent.run(INCIDENT, end_session=False)  # still open when the shutdown comes
    returned: list[float] = []
    started = time.monotonic()

    def stop() -> None:
        processor.shutdown()
        returned.append(time.monotonic() - started)

    callers = [threading.Thread(target=stop) for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(10)
    assert len(returned) == 2
    # the second caller waited for the first one's (timed-out) shutdown, not a moment less
    assert all(0.8 < t < 5 for t in returned), returned
    hanging.release.set()
    worker = processor._worker
    worker.join(10)
    assert not worker.is_alive()
    # nothing ran behind the shutdown that had returned: the open session was not evaluated
    sessions = [r.trajectory.session_id for r in collect.results]
    assert all(INCIDENT.session_id != s for s in sessions), sessions


class _ExitingSink(CollectingSink):
    """A plugin sink that calls sys.exit on the first result it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def emit(self, result: Any) -> None:
        self.calls += 1
        if self.calls == 1:
            raise SystemExit(3)
        super().emit(result)


@pytest.mark.usefixtures("contained_errors")  # fails on purpose
def test_system_exit_from_a_sink_at_a_flush_leaves_the_worker_alive() -> None:
    provider = TracerProvider()
    sink = _ExitingSink()
    processor = SpanJudgeProcessor(sinks=[sink], tick_interval_s=0.05, shutdown_on_exit=False)
    provider.add_span_processor(processor)
    agent = ScriptedAgent(provider)
    agent.run(CSV, end_session=False)  # closed by the flush, emitted there
    processor.force_flush(10_000)
    agent.run(INCIDENT, end_session=False)
    assert processor.force_flush(10_000)  # served: the worker lives on
    assert [r.trajectory.session_id for r in sink.results] == [INCIDENT.session_id]
    assert processor.pipeline.errors == 1  # counted (spanjudge.internal_errors), not silent
    processor.shutdown()
