"""Small GenAI-semconv agents written with a real SDK tracer, for evidence-rule tests.

Each test drives `agent_run` with the calls its agent made; the spans are what any GenAI
instrumentation writes (`invoke_agent` > `chat` / `execute_tool`), so what the tests assert
is what a user of spanjudge would see in the report.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Status, StatusCode, Tracer

from spanjudge.config import parse_config
from spanjudge.engine import Engine
from spanjudge.sessions.store import ClosedSession
from spanjudge.spans.sdk import span_from_sdk
from spanjudge.trajectory.model import Trajectory
from tests.conftest import recorded

SKILL_MD = (
    "---\nname: csv-report\ndescription: Summarise a CSV file.\n---\n"
    "# CSV report\n\n1. Read the CSV with `read_csv`.\n2. Answer with the grand total.\n"
)


@dataclass
class Call:
    """One tool call the agent made: name, arguments, result, and how the span ended."""

    tool: str
    args: Any
    result: Any = None
    error: str | None = None
    call_id: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Say:
    """One model call: its text and the tool calls it asked for."""

    text: str | None = None
    asks: Sequence[tuple[str, str, Any]] = ()  # (call id, tool, arguments)
    finish: str = "stop"
    tokens: tuple[int, int] = (10, 5)
    system: str | None = None


def chat_span(tracer: Tracer, say: Say, request: str) -> None:
    parts: list[dict[str, Any]] = []
    if say.text is not None:
        parts.append({"type": "text", "content": say.text})
    for call_id, tool, args in say.asks:
        parts.append({"type": "tool_call", "id": call_id, "name": tool, "arguments": args})
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.usage.input_tokens": say.tokens[0],
        "gen_ai.usage.output_tokens": say.tokens[1],
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": request}]}]
        ),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": parts, "finish_reason": say.finish}]
        ),
    }
    if say.system:
        attrs["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": say.system}])
    with tracer.start_as_current_span("chat m", attributes=attrs):
        pass


def tool_span(tracer: Tracer, call: Call) -> None:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.call.arguments": json.dumps(call.args),
        **call.attrs,
    }
    if call.call_id:
        attrs["gen_ai.tool.call.id"] = call.call_id
    if call.result is not None:
        result = call.result if isinstance(call.result, str) else json.dumps(call.result)
        attrs["gen_ai.tool.call.result"] = result
    with tracer.start_as_current_span(f"execute_tool {call.tool}", attributes=attrs) as span:
        if call.error:
            span.set_status(Status(StatusCode.ERROR, call.error))


def agent_run(
    tracer: Tracer,
    request: str,
    actions: Sequence[Say | Call],
    *,
    failed: bool = False,
) -> None:
    """One turn: an `invoke_agent` span with the model and tool calls under it, in order."""
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
    with tracer.start_as_current_span("invoke_agent a", attributes=attrs) as agent:
        for action in actions:
            if isinstance(action, Say):
                chat_span(tracer, action, request)
            else:
                tool_span(tracer, action)
        if failed:
            agent.set_status(Status(StatusCode.ERROR, "MaxTurnsExceeded"))


def trajectory_of(
    body: Callable[[Tracer], Any], config: dict[str, Any] | None = None
) -> Trajectory:
    """Record ``body`` with a real tracer and assemble the session as the engine does."""
    spans = tuple(span_from_sdk(s) for s in recorded(body))
    closed = ClosedSession(
        key="s", key_source="test", revision=1, reason="end_of_input", spans=spans
    )
    return Engine(parse_config(config or {})).trajectory(closed)


def loads(trajectory: Trajectory) -> list[tuple[str, str]]:
    return [(x.skill, x.status) for x in trajectory.skill_loads]
