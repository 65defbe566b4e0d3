"""A hand-instrumented agent (plain OpenTelemetry GenAI spans) judged in-process by spanjudge.

No framework, no network: the "model" is a fixed script. What matters is the setup, one call:
`configure_opentelemetry` builds the providers from the standard `OTEL_*` variables and adds
the processor before the exporter. Verdicts come back as a `spanjudge.evaluate` span with
`gen_ai.evaluation.result` events, as log records and as metrics.

    python examples/plain_otel_agent.py

With ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, spans, verdict logs and metrics are exported over OTLP;
without it nothing is exported and spanjudge prints one line per session on stderr (its console
sink; ``SPANJUDGE_CONSOLE=1`` prints it in both cases). ``SPANJUDGE_CONFIG`` names the
configuration (default: examples/spanjudge.yaml beside this file).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource

from spanjudge import configure_opentelemetry

HERE = Path(__file__).resolve().parent


def main() -> int:
    import argparse

    argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Environment: OTEL_EXPORTER_OTLP_ENDPOINT (export over OTLP), "
        "SPANJUDGE_CONSOLE (1: print verdicts even then), "
        "SPANJUDGE_CONFIG (a spanjudge YAML configuration).",
    ).parse_args()
    otel = configure_opentelemetry(
        os.environ.get("SPANJUDGE_CONFIG", str(HERE / "spanjudge.yaml")),
        resource=Resource.create({"service.name": "plain-otel-agent"}),
    )
    answer = run_agent(trace.get_tracer("plain-otel-agent"))
    print(f"agent: {answer}")
    otel.shutdown()  # evaluates what is still open, then exports
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
