"""A Strands Agents agent judged in-process by spanjudge.

Scripted model by default (no network, no credentials); pass ``--real`` to use Strands' default
model provider (Amazon Bedrock, with your usual AWS credentials and ``STRANDS_MODEL_ID``).

    pip install '.[strands]'                    # from the spanjudge checkout: spanjudge + Strands
    python examples/strands_agent.py            # scripted model, prints the verdicts
    python examples/strands_agent.py --json     # machine-readable summary (used by the tests)

Set ``OTEL_EXPORTER_OTLP_ENDPOINT`` to also export the agent spans and the verdicts over OTLP.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanjudge import SpanJudgeProcessor, score_views

SKILLS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "skills"
SESSION_ID = "strands-example-1"

# 1. Providers, with spanjudge added BEFORE the exporting processor, set as the globals before
#    Strands creates its tracer.
spans = InMemorySpanExporter()
logs = InMemoryLogRecordExporter()
metrics_reader = InMemoryMetricReader()
tracer_provider = TracerProvider()
logger_provider = LoggerProvider()
logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
meter_provider = MeterProvider(metric_readers=[metrics_reader], views=score_views())
processor = SpanJudgeProcessor(
    tracer_provider=tracer_provider, logger_provider=logger_provider, meter_provider=meter_provider
)
tracer_provider.add_span_processor(processor)
tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(tracer_provider)

try:  # after the provider is global, on purpose
    from strands import Agent, tool
    from strands.models.model import Model
    from strands.vended_plugins.skills import AgentSkills
except ImportError:  # pragma: no cover - depends on the environment
    sys.exit("this example needs Strands Agents: pip install '.[strands]' (in the checkout)")


@tool
def read_csv(path: str) -> str:
    """Read a CSV file and return its text.

    Args:
        path: Path of the CSV file.
    """
    return "region,amount\nnorth,1200\nsouth,800\neast,500\n"


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression such as "1200 + 800".

    Args:
        expression: The expression.
    """
    return {"1200 + 800 + 500": "2500", "1200 / 2500": "0.48"}.get(expression, "unknown")


class ScriptedModel(Model):
    """Replays fixed replies: text, or tool calls. Never touches the network."""

    def __init__(self, replies: list[tuple[str | None, list[tuple[str, dict[str, Any]]]]]) -> None:
        self.replies = list(replies)
        self.config: dict[str, Any] = {"model_id": "scripted-model-1"}
        self.calls = 0

    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    def get_config(self) -> Any:
        return self.config

    async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError
        yield  # pragma: no cover

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        text, calls = self.replies.pop(0)
        yield {"messageStart": {"role": "assistant"}}
        if text is not None:
            yield {"contentBlockDelta": {"delta": {"text": text}}}
            yield {"contentBlockStop": {}}
        for name, args in calls:
            self.calls += 1
            use = {"name": name, "toolUseId": f"tooluse_{self.calls:03d}"}
            yield {"contentBlockStart": {"start": {"toolUse": use}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use" if calls else "end_turn"}}
        usage = {"inputTokens": 120, "outputTokens": 20, "totalTokens": 140}
        yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 40}}}


SCRIPT: list[tuple[str | None, list[tuple[str, dict[str, Any]]]]] = [
    (None, [("skills", {"skill_name": "csv-report"})]),
    (None, [("read_csv", {"path": "data/sales.csv"})]),
    (None, [("calculate", {"expression": "1200 + 800 + 500"})]),
    ("The grand total is 2500 (north 1200, south 800, east 500).", []),
    (None, [("calculate", {"expression": "1200 / 2500"})]),
    ("North is 48% of the total.", []),
]
REQUESTS = (
    "Summarise data/sales.csv with the totals per region.",
    "What share of the total is north?",
)


def run(real_model: bool) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "session.id": SESSION_ID,
        "spanjudge.expected_skills": ["csv-report"],
    }
    agent = Agent(
        model=None if real_model else ScriptedModel(SCRIPT),
        name="sales-assistant",
        system_prompt="You are a sales assistant. Use the tools and skills you are given.",
        tools=[read_csv, calculate],
        plugins=[AgentSkills(skills=str(SKILLS_DIR))],
        trace_attributes=attributes,
        callback_handler=None,
    )
    answers = []
    for i, request in enumerate(REQUESTS):
        if i == len(REQUESTS) - 1:
            # Mark the last turn: the session closes as complete, without waiting for idle.
            agent.trace_attributes["spanjudge.session.end"] = True
        answers.append(str(agent(request)).strip())
    processor.force_flush(30_000)
    finished = spans.get_finished_spans()
    turns = [
        s for s in finished if (s.attributes or {}).get("gen_ai.operation.name") == "invoke_agent"
    ]
    evaluations = [s for s in finished if s.name == "spanjudge.evaluate"]
    return {
        "answers": answers,
        "turns": [
            {"trace_id": f"{s.context.trace_id:032x}", "span_id": f"{s.context.span_id:016x}"}
            for s in sorted(turns, key=lambda s: s.start_time or 0)
        ],
        "evaluations": [
            {
                "trace_id": f"{s.context.trace_id:032x}",
                "parent_span_id": f"{s.parent.span_id:016x}" if s.parent else None,
                "scope": s.instrumentation_scope.name if s.instrumentation_scope else None,
                "links": [f"{link.context.span_id:016x}" for link in s.links],
                "attributes": dict(s.attributes or {}),
                "events": [{"name": e.name, **dict(e.attributes or {})} for e in s.events],
            }
            for s in evaluations
        ],
        "logs": [
            {
                "event_name": r.log_record.event_name,
                "trace_id": f"{r.log_record.trace_id or 0:032x}",
                "span_id": f"{r.log_record.span_id or 0:016x}",
                **dict(r.log_record.attributes or {}),
            }
            for r in logs.get_finished_logs()
        ],
        "spans": {f"{s.context.span_id:016x}": s.name for s in finished},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", action="store_true", help="use Strands' default model provider")
    parser.add_argument("--json", action="store_true", help="print a JSON summary")
    args = parser.parse_args(argv)
    summary = run(args.real)
    tracer_provider.shutdown()
    if args.json:
        json.dump(summary, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return 0
    for answer in summary["answers"]:
        print(f"agent: {answer}")
    for evaluation in summary["evaluations"]:
        print(f"\nsession {evaluation['attributes'].get('session.id')}:")
        for event in evaluation["events"]:
            score = event.get("gen_ai.evaluation.score.value")
            print(
                f"  {event['spanjudge.outcome']:<14} {event['gen_ai.evaluation.name']:<22}"
                f" {'-' if score is None else f'{score:.2f}':>5}  "
                f"{event.get('gen_ai.evaluation.explanation', '')[:90]}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
