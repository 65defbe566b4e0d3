"""A hand-instrumented agent (plain OpenTelemetry GenAI spans) judged in-process by spanjudge.

No framework, no network: the "model" is a fixed script. What matters is the setup: the
processor is added to the agent's TracerProvider before the exporter, verdicts come back as a
`spanjudge.evaluate` span with `gen_ai.evaluation.result` events, as log records and as metrics.

    python examples/plain_otel_agent.py

Set ``OTEL_EXPORTER_OTLP_ENDPOINT`` to export spans, verdict logs and metrics over OTLP instead
of printing them.
"""

from __future__ import annotations

import json
import os
import sys

from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, ConsoleLogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from spanjudge.config import load_config
from spanjudge.emit.metrics import score_views
from spanjudge.processor import SpanJudgeProcessor


def exporters() -> tuple[object, object, object]:
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(), OTLPLogExporter(), OTLPMetricExporter()
    return ConsoleSpanExporter(), ConsoleLogRecordExporter(), ConsoleMetricExporter()


def main() -> int:
    import argparse

    argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Environment: OTEL_EXPORTER_OTLP_ENDPOINT (export over OTLP instead of printing), "
        "SPANJUDGE_CONFIG (a spanjudge YAML configuration).",
    ).parse_args()
    span_exporter, log_exporter, metric_exporter = exporters()
    resource = Resource.create({"service.name": "plain-otel-agent"})
    tracer_provider = TracerProvider(resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
    meter_provider = MeterProvider(
        resource=resource,
        metric_readers=[PeriodicExportingMetricReader(metric_exporter)],
        views=score_views(),  # spanjudge.score buckets 0, .25, .5, .75, 1
    )
    # spanjudge first: verdicts emitted while the provider shuts down still reach the exporter.
    tracer_provider.add_span_processor(
        SpanJudgeProcessor(
            load_config(os.environ.get("SPANJUDGE_CONFIG")),
            tracer_provider=tracer_provider,
            logger_provider=logger_provider,
            meter_provider=meter_provider,
        )
    )
    tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(tracer_provider)

    answer = run_agent(trace.get_tracer("plain-otel-agent"))
    print(f"agent: {answer}", file=sys.stderr)

    tracer_provider.shutdown()  # evaluates what is still open, then exports
    logger_provider.shutdown()
    meter_provider.shutdown()
    return 0


def run_agent(tracer: trace.Tracer) -> str:
    """One turn: load the required skill, call a tool, answer. Spans per GenAI semconv."""
    session = {"session.id": "plain-otel-1"}
    request = "Summarise data/sales.csv with the totals per region."
    answer = "The grand total is 2500."
    with tracer.start_as_current_span(
        "invoke_agent sales-assistant",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "sales-assistant",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": request}]}]
            ),
            "spanjudge.expected_skills": ["csv-report"],
            "spanjudge.session.end": True,  # one-turn session: close it when the turn ends
            **session,
        },
    ) as turn:
        for call_id, (tool, args, result) in enumerate(
            [
                ("skills", {"skill_name": "csv-report"}, "# CSV report\n1. Read the CSV."),
                ("read_csv", {"path": "data/sales.csv"}, "region,amount\nnorth,1200\n"),
            ]
        ):
            with tracer.start_as_current_span(
                f"execute_tool {tool}",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.id": f"call_{call_id}",
                    "gen_ai.tool.call.arguments": json.dumps(args),
                    "gen_ai.tool.call.result": result,
                    "gen_ai.tool.status": "success",
                    **session,
                },
            ):
                pass
        turn.set_attribute(
            "gen_ai.output.messages",
            json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": answer}],
                        "finish_reason": "stop",
                    }
                ]
            ),
        )
    return answer


if __name__ == "__main__":
    sys.exit(main())
