"""`spanjudge demo`: a bundled scripted agent judged in-process by `SpanJudgeProcessor`.

Runs with no network and no model, on the embedded defaults (heuristic judges), and prints the
verdict table: one session passes, one fails (a required skill that never loaded, despite a
fluent answer), one is not evaluated, with its reason.
"""

from __future__ import annotations

import argparse
import logging
import sys

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge import semconv
from spanjudge.demo.agent import SCENARIOS, ScriptedAgent
from spanjudge.emit.collecting import CollectingSink
from spanjudge.emit.metrics import MetricsSink, score_views
from spanjudge.emit.otel import OtelVerdictSink
from spanjudge.emit.table import EXPLANATION_WIDTH, render_table, use_colour
from spanjudge.processor import SpanJudgeProcessor
from spanjudge.values import SessionResult

__all__ = ["CollectingSink", "main", "run_demo"]  # CollectingSink: where it was defined before


def run_demo(timeout_s: float = 30.0) -> tuple[list[SessionResult], dict[str, int]]:
    """Run every scenario through the processor; returns the results and emission counts."""
    spans = InMemorySpanExporter()
    logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    reader = InMemoryMetricReader()
    tracer_provider = TracerProvider()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    meter_provider = MeterProvider(metric_readers=[reader], views=score_views())
    collected = CollectingSink()
    processor = SpanJudgeProcessor(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        sinks=[
            OtelVerdictSink(tracer_provider=tracer_provider, logger_provider=logger_provider),
            MetricsSink(meter_provider=meter_provider),
            collected,
        ],
    )
    # spanjudge first, then the exporter: verdicts emitted at shutdown still get exported.
    tracer_provider.add_span_processor(processor)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    agent = ScriptedAgent(tracer_provider)
    for scenario in SCENARIOS:
        agent.run(scenario, end_session=True)
    processor.force_flush(int(timeout_s * 1000))
    tracer_provider.shutdown()
    logger_provider.shutdown()
    counts = {
        "evaluation_spans": sum(
            1 for s in spans.get_finished_spans() if s.name == semconv.SPAN_EVALUATE
        ),
        "log_records": len(logs.get_finished_logs()),
        "agent_spans": sum(
            1 for s in spans.get_finished_spans() if s.name != semconv.SPAN_EVALUATE
        ),
    }
    meter_provider.shutdown()
    order = {s.session_id: i for i, s in enumerate(SCENARIOS)}
    results = sorted(collected.results, key=lambda r: order.get(r.trajectory.session_id, 99))
    return results, counts


def main(argv: list[str] | None = None) -> int:
    """Entry point of `spanjudge demo`; exit code 0 when the demo ran."""
    parser = argparse.ArgumentParser(
        prog="spanjudge demo",
        description="Judge a bundled scripted agent in-process and print the verdicts.",
    )
    parser.add_argument(
        "--color",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="colour the outcomes (default: on a terminal, unless NO_COLOR is set or TERM=dumb)",
    )
    args = parser.parse_args(argv)
    log = logging.getLogger("spanjudge.cli")  # -v: INFO, -vv: DEBUG, as `eval -v` says what it ran
    log.info(
        "running %d scripted scenario(s) through SpanJudgeProcessor (in-memory exporters)",
        len(SCENARIOS),
    )
    results, counts = run_demo()
    for result in results:
        log.debug("session %s: %d verdict(s)", result.trajectory.session_id, len(result.verdicts))
    log.info(
        "%d session(s) judged; %d evaluation span(s), %d log record(s) emitted",
        len(results),
        counts["evaluation_spans"],
        counts["log_records"],
    )
    out = sys.stdout
    out.write("spanjudge demo: a scripted agent (no network, no model) judged in-process\n")
    for scenario in SCENARIOS:
        out.write(f"  {scenario.session_id:<18} {scenario.title}\n")
    out.write("\n")
    # As `spanjudge eval`: a terminal line is cut to fit, a file or a pipe gets it whole.
    width = EXPLANATION_WIDTH if out.isatty() else None
    out.write(render_table(results, colour=use_colour(args.color, out), width=width))
    out.write(
        f"\nemitted: {counts['evaluation_spans']} {semconv.SPAN_EVALUATE} span(s), "
        f"{counts['log_records']} {semconv.EV_EVALUATION_RESULT} log record(s), "
        f"from {counts['agent_spans']} agent span(s)\n"
    )
    return 0 if len(results) == len(SCENARIOS) else 1
