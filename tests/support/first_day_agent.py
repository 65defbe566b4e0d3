"""A framework's fixture scenarios run in process the way the README sets spanjudge up.

    python tests/support/first_day_agent.py FRAMEWORK

`configure_opentelemetry()` with no configuration file and no `OTEL_*` variables, then the
framework's own fixture generator (`fixtures/generate/`: the real framework, its real
instrumentation, the generator's scripted model and scenarios) runs every scenario. spanjudge
prints what it judged on stderr, as a user sees it. Once the agent is done and every turn's grace
period is over, the line `MARK` goes to stderr and the providers are shut down; the sessions the
generator ran go to stdout as JSON (a session keyed by nothing but its trace is null).

Run by tests/test_first_day.py with the generators' folder and `src/` on PYTHONPATH.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from spanjudge import configure_opentelemetry
from spanjudge.sessions.store import ClosePolicy

MARK = "-- the agent is done; shutting down --"


def genai_manual() -> list[str | None]:
    import genai_manual_fixtures as gen
    from opentelemetry import trace

    tracer = trace.get_tracer("genai-manual-agent")
    sessions: list[str | None] = []
    for spec in gen.SCENARIOS:
        gen.LOG.clear()
        gen.FILES.clear()
        session_id = f"genai-manual-{spec['scenario'].replace('_', '-')}"
        agent = gen.Agent(tracer, spec, session_id)
        turns = spec["turns"]
        for i, (user_text, steps) in enumerate(turns):
            agent.turn(user_text, steps, last=i == len(turns) - 1)
        sessions.append(None if spec["key"] == "trace_id" else session_id)
    return sessions


def strands() -> list[str | None]:
    import strands_fixtures as gen

    return [
        gen.run_session(sc, "default", "in-process")[1]["session_id"]
        for sc in (*gen.STANDARD, *gen.TRAJECTORY)
    ]


def langgraph() -> list[str | None]:
    import langgraph_fixtures as gen
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument()  # the global provider, as its docs show
    sessions: list[str | None] = []
    for scenario, (script, _) in gen.SCENARIOS.items():
        sid = gen.session_id(scenario)
        gen.run_scenario(sid, script)
        sessions.append(sid)
    return sessions


def deepagents() -> list[str | None]:
    import deepagents_fixtures as gen
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    LangChainInstrumentor().instrument()  # the global provider, as its docs show
    exporter = InMemorySpanExporter()  # the generator reads the turns' spans back from it
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[attr-defined]
    return [gen.run(sc, exporter, gen.SeededIds())[1]["session_id"] for sc in gen.SCENARIOS]


def pydantic_ai() -> list[str | None]:
    import pydantic_ai_fixtures as gen

    return [gen.run_session(sc)[1]["session_id"] for sc in gen.scenarios()]


def smolagents() -> list[str | None]:
    import smolagents_fixtures as gen

    return [gen.run_session(sc)[1]["session_id"] for sc in gen.SCENARIOS]


def haystack() -> list[str | None]:
    import haystack_fixtures as gen
    from haystack import tracing
    from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = trace.get_tracer_provider()
    # the user's own processor puts session.id on each agent run (Haystack sets none)
    stamper, exporter = gen.SessionStamper(), InMemorySpanExporter()
    provider.add_span_processor(stamper)  # type: ignore[attr-defined]
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[attr-defined]
    tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))
    sessions: list[str | None] = []
    for spec in [*gen.native_scenarios(), *gen.world.custom_loader_scenarios()]:
        sid = f"haystack-{spec['scenario'].replace('_', '-')}"
        gen.run_session(spec, exporter, stamper, sid)
        sessions.append(sid)
    return sessions


def agent_framework() -> list[str | None]:
    import asyncio

    import agent_framework_fixtures as gen
    from agent_framework.observability import enable_instrumentation
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = trace.get_tracer_provider()
    # the user's own processor puts session.id on the agent's spans
    stamper, exporter = gen.SessionStamper(), InMemorySpanExporter()
    provider.add_span_processor(stamper)  # type: ignore[attr-defined]
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[attr-defined]
    enable_instrumentation(enable_sensitive_data=True)
    sessions: list[str | None] = []
    for spec in [*gen.native_scenarios(), *gen.attempt_scenarios()]:
        sid = f"maf-{spec['scenario'].replace('_', '-')}"
        asyncio.run(gen.run_session(spec, exporter, stamper, sid))
        sessions.append(sid)
    return sessions


def _openai_agents(instrumentation: str) -> Callable[[], list[str | None]]:
    def run() -> list[str | None]:
        import openai_agents_fixtures as gen

        gen.instrument(instrumentation)
        gen.steady_shell_output(gen.SEEDS[instrumentation])
        sets = {
            "eager": gen.sandbox_scenarios(lazy=False),
            "lazy": gen.sandbox_scenarios(lazy=True),
            "custom_loader": gen.custom_loader_scenarios(),
        }
        return [
            gen.run_session(sc, instrumentation, mode, "in-process")[1]["session_id"]
            for mode, scenarios in sets.items()
            for sc in scenarios
        ]

    return run


def _mcp(instrumentation: str) -> Callable[[], list[str | None]]:
    def run() -> list[str | None]:
        import tempfile
        from pathlib import Path

        import mcp_fixtures as gen

        gen.oaf.instrument(instrumentation)
        with tempfile.TemporaryDirectory() as work:  # the MCP server's call log
            return [
                gen.run_session(sc, instrumentation, Path(work))[1]["session_id"]
                for sc in gen.SCENARIOS
            ]

    return run


RUNNERS: dict[str, Callable[[], list[str | None]]] = {
    "genai_manual": genai_manual,
    "strands": strands,
    "langgraph": langgraph,
    "deepagents": deepagents,
    "pydantic_ai": pydantic_ai,
    "smolagents": smolagents,
    "haystack": haystack,
    "agent_framework": agent_framework,
    "openai_agents_openinference": _openai_agents("openinference"),
    "openai_agents_openllmetry": _openai_agents("openllmetry"),
    "mcp_openinference": _mcp("openinference"),
    "mcp_openllmetry": _mcp("openllmetry"),
}


def main() -> None:
    run = RUNNERS[sys.argv[1]]
    otel = configure_opentelemetry()  # as the README: no file, no OTLP endpoint
    sessions = run()
    # Each turn is judged when its root span ends, after a grace period: wait that out, so that
    # what is printed after MARK is only what the shutdown had left to do.
    time.sleep(ClosePolicy().turn_grace_s + 1.5)
    print(MARK, file=sys.stderr, flush=True)
    otel.shutdown()
    print(json.dumps(sessions))


if __name__ == "__main__":
    main()
