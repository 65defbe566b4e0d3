"""A small agent on the official OpenAI client, instrumented by the official OpenTelemetry OpenAI
instrumentation (`opentelemetry-instrumentation-openai-v2`), against the fixtures' scripted
OpenAI-compatible model server (`fixtures/generate/scripted_world.py`).

The agent traces its own turn and tool calls by hand under the GenAI conventions; the model calls
are the instrumentation's. With ``content="span_only"`` the instrumentation records the messages
on its chat spans; with ``"event_only"`` it records them only as
`gen_ai.client.inference.operation.details` log records through the Logs API
(`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`, whose values this package version reads
case-insensitively: `no_content`, `span_only`, `event_only`, `span_and_event`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fixtures.generate import scripted_world as world

SESSION_ID = "openai-agent-session"
SKILL = "csv-report"
TOOL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "read_csv": world.read_csv,
    "calculate": world.calculate,
    "write_file": world.write_file,
}


def load_skill(name: str) -> str:
    """Load a skill's instructions by name."""
    return world.skill_text(name)


def _catalogue() -> str:
    entries = []
    for name in world.SKILL_NAMES:
        text = world.skill_text(name)
        description = next(
            ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("description:")
        )
        entries.append(
            f"<skill><name>{name}</name><description>{description}</description></skill>"
        )
    return "<available_skills>\n" + "\n".join(entries) + "\n</available_skills>"


SYSTEM = (
    "You are a reporting assistant. Load a skill with load_skill before following it.\n"
    + _catalogue()
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": function.__doc__ or name,
            "parameters": {"type": "object", "properties": {}, "additionalProperties": True},
        },
    }
    for name, function in {**TOOL_FUNCTIONS, "load_skill": load_skill}.items()
]
# The scripted model: load the skill, follow it, answer.
SCRIPT = world.csv_followed(world.C("load_skill", name=SKILL))
# What every session of the agent (session ids "openai-agent-...") is required to do.
EXPECTATIONS = {"sessions": {"openai-agent-*": {"skills": [SKILL], "success": {"contains": "280"}}}}


@contextmanager
def instrumented(content: str, tracer_provider: Any, logger_provider: Any) -> Iterator[None]:
    """The OpenAI instrumentation on, recording message content as ``content`` says."""
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    saved = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = content
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        if saved is None:
            os.environ.pop("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", None)
        else:
            os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = saved


def run(
    content: str, tracer_provider: Any, logger_provider: Any, session_id: str = SESSION_ID
) -> str | None:
    """One session of the agent against a fresh scripted model; returns its answer."""
    import openai

    world.reset()
    with (
        world.scripted_server(SCRIPT) as server,
        instrumented(content, tracer_provider, logger_provider),
    ):
        client = openai.OpenAI(base_url=server.base_url, api_key="scripted", max_retries=0)
        tracer = tracer_provider.get_tracer("openai-agent")
        return _turn(client, tracer, world.CSV_ASK, session_id)


def _turn(client: Any, tracer: Any, ask: str, session_id: str) -> str | None:
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "reporter",
        "session.id": session_id,
        "spanjudge.expected_skills": [SKILL],
        "spanjudge.session.end": True,
    }
    with tracer.start_as_current_span("invoke_agent reporter", attributes=attributes):
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": ask},
        ]
        for _ in range(len(SCRIPT)):
            response = client.chat.completions.create(
                model="scripted-gpt", messages=messages, tools=TOOLS
            )
            message = response.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return str(message.content)
            for call in message.tool_calls:
                messages.append(_call_tool(tracer, call, session_id))
    return None


def _call_tool(tracer: Any, call: Any, session_id: str) -> dict[str, Any]:
    name, arguments = call.function.name, call.function.arguments
    with tracer.start_as_current_span(
        f"execute_tool {name}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.call.arguments": arguments,
            "session.id": session_id,
        },
    ) as span:
        function = load_skill if name == "load_skill" else TOOL_FUNCTIONS[name]
        result = function(**json.loads(arguments))
        text = result if isinstance(result, str) else json.dumps(result)
        span.set_attribute("gen_ai.tool.call.result", text)
    return {"role": "tool", "tool_call_id": call.id, "content": text}
