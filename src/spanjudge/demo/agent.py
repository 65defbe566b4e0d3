"""A scripted example agent, instrumented with plain OpenTelemetry GenAI spans.

No network and no model: each scenario is a fixed script of model replies and tool calls, and
the spans follow the GenAI semantic conventions in their attributes-only spelling
(`invoke_agent` turn span, `chat` model spans, `execute_tool` tool spans; skills are loaded with
a `skills` tool, as the Strands AgentSkills plugin does). The demo, the examples, the tests and
the benchmark all drive this agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from spanjudge import semconv

AGENT_NAME = "ops-assistant"
MODEL = "scripted-model-1"
SCOPE = "spanjudge_demo.agent"  # the agent's own instrumentation scope (not `spanjudge`)

SKILLS: Mapping[str, tuple[str, str]] = {
    "csv-report": (
        "Summarise a CSV file of sales figures into a markdown report with totals per region.",
        "# CSV report\n\n1. Read the CSV file with `read_csv`.\n2. Compute the totals with "
        "`calculate`.\n3. Answer with the grand total.",
    ),
    "incident-triage": (
        "Triage a production incident from its alerts and logs and open a ticket.",
        "# Incident triage\n\n1. Fetch the firing alerts with `get_alerts`.\n2. Search the logs "
        "with `search_logs`.\n3. Open a ticket with `create_ticket`.\n4. Answer with the ticket "
        "id and the probable cause.",
    ),
}
SYSTEM_PROMPT = (
    "You are an operations assistant. Use the tools you are given.\n<available_skills>\n"
    + "".join(
        f"<skill>\n<name>{name}</name>\n<description>{desc}</description>\n</skill>\n"
        for name, (desc, _) in SKILLS.items()
    )
    + "</available_skills>"
)


def _skills_tool(args: Mapping[str, Any]) -> str:
    name = str(args.get("skill_name", ""))
    if name not in SKILLS:
        return f"Skill '{name}' not found"
    return SKILLS[name][1]


TOOLS: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    "skills": _skills_tool,
    "read_csv": lambda a: "region,amount\nnorth,1200\nsouth,800\neast,500\n",
    "calculate": lambda a: "2500",
    "get_alerts": lambda a: json.dumps([{"alert": "HighErrorRate", "service": a.get("service")}]),
    "search_logs": lambda a: "09:11:58 ERROR db pool exhausted (max=20)",
    "get_weather": lambda a: "Sunny, 21 C",
    "read_file": lambda a: f"# {a.get('path')}\n\n1. Do the task step by step.",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """One session: a request, the tool calls the scripted model makes, then its answer."""

    session_id: str
    request: str
    calls: Sequence[tuple[str, Mapping[str, Any]]]
    answer: str
    expected_skills: Sequence[str] = ()
    title: str = ""
    extra_attributes: Mapping[str, Any] = field(default_factory=dict)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        title="required skill loaded and followed",
        session_id="demo-csv-report",
        request="Summarise data/sales.csv with the totals per region.",
        expected_skills=("csv-report",),
        calls=(
            ("skills", {"skill_name": "csv-report"}),
            ("read_csv", {"path": "data/sales.csv"}),
            ("calculate", {"expression": "1200 + 800 + 500"}),
        ),
        answer="The grand total is 2500 (north 1200, south 800, east 500).",
    ),
    Scenario(
        title="required skill never loaded, fluent answer anyway",
        session_id="demo-incident",
        request="Checkout is failing in production. Triage the incident and open a ticket.",
        expected_skills=("incident-triage",),
        calls=(("search_logs", {"query": "checkout error"}),),
        answer=(
            "The checkout failures are caused by database pool exhaustion (max=20). "
            "I recommend raising the pool size; the incident is under control."
        ),
    ),
    Scenario(
        title="no expectation: nothing to check for skills",
        session_id="demo-weather",
        request="What is the weather in Paris?",
        calls=(("get_weather", {"city": "Paris"}),),
        answer="It is sunny in Paris, 21 C.",
    ),
)


def _messages(role: str, parts: list[dict[str, Any]], finish: str | None = None) -> str:
    message: dict[str, Any] = {"role": role, "parts": parts}
    if finish:
        message["finish_reason"] = finish
    return json.dumps([message])


class ScriptedAgent:
    """Runs scenarios as agent turns on ``tracer_provider`` (the global one when None)."""

    def __init__(self, tracer_provider: Any = None) -> None:
        provider = tracer_provider or trace.get_tracer_provider()
        self.tracer = provider.get_tracer(SCOPE)
        self._call_ids = 0

    def run(self, scenario: Scenario, *, end_session: bool = False) -> str:
        """One turn of ``scenario``'s session; returns the final answer."""
        session = {semconv.SESSION_ID: scenario.session_id}
        turn_attrs: dict[str, Any] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_INVOKE_AGENT,
            semconv.GEN_AI_AGENT_NAME: AGENT_NAME,
            semconv.GEN_AI_REQUEST_MODEL: MODEL,
            semconv.GEN_AI_INPUT_MESSAGES: _messages(
                "user", [{"type": "text", "content": scenario.request}]
            ),
            **session,
            **scenario.extra_attributes,
        }
        if scenario.expected_skills:
            turn_attrs[semconv.SJ_EXPECTED_SKILLS] = list(scenario.expected_skills)
        if end_session:
            turn_attrs[semconv.SJ_SESSION_END] = True
        with self.tracer.start_as_current_span(
            f"invoke_agent {AGENT_NAME}", attributes=turn_attrs
        ) as turn:
            tokens_in = tokens_out = 0
            for index, (tool_name, args) in enumerate(scenario.calls):
                self._call_ids += 1
                call_id = f"call_{self._call_ids:04d}"
                part = {"type": "tool_call", "name": tool_name, "id": call_id, "arguments": args}
                tokens_in, tokens_out = self._chat(
                    scenario, index, [part], "tool_use", tokens_in, tokens_out
                )
                self._tool(tool_name, call_id, args, session)
            part = {"type": "text", "content": scenario.answer}
            tokens_in, tokens_out = self._chat(
                scenario, len(scenario.calls), [part], "end_turn", tokens_in, tokens_out
            )
            turn.set_attribute(
                semconv.GEN_AI_OUTPUT_MESSAGES, _messages("assistant", [part], "end_turn")
            )
            turn.set_attribute(semconv.GEN_AI_USAGE_INPUT_TOKENS, tokens_in)
            turn.set_attribute(semconv.GEN_AI_USAGE_OUTPUT_TOKENS, tokens_out)
        return scenario.answer

    def _chat(
        self,
        scenario: Scenario,
        index: int,
        parts: list[dict[str, Any]],
        finish: str,
        tokens_in: int,
        tokens_out: int,
    ) -> tuple[int, int]:
        usage_in, usage_out = 150 + 40 * index, 20 + 6 * index
        attrs: dict[str, Any] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
            semconv.GEN_AI_REQUEST_MODEL: MODEL,
            semconv.SESSION_ID: scenario.session_id,
            semconv.GEN_AI_SYSTEM_INSTRUCTIONS: json.dumps(
                [{"type": "text", "content": SYSTEM_PROMPT}]
            ),
            semconv.GEN_AI_INPUT_MESSAGES: _messages(
                "user", [{"type": "text", "content": scenario.request}]
            ),
            semconv.GEN_AI_OUTPUT_MESSAGES: _messages("assistant", parts, finish),
            semconv.GEN_AI_RESPONSE_FINISH_REASONS: [finish],
            semconv.GEN_AI_USAGE_INPUT_TOKENS: usage_in,
            semconv.GEN_AI_USAGE_OUTPUT_TOKENS: usage_out,
        }
        with self.tracer.start_as_current_span(f"chat {MODEL}", attributes=attrs):
            pass
        return tokens_in + usage_in, tokens_out + usage_out

    def _tool(
        self, name: str, call_id: str, args: Mapping[str, Any], session: Mapping[str, str]
    ) -> None:
        attrs: dict[str, Any] = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: name,
            semconv.GEN_AI_TOOL_CALL_ID: call_id,
            semconv.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(args),
            **session,
        }
        with self.tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs) as span:
            try:
                result = TOOLS[name](args)
            except Exception as exc:
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                span.set_attribute(semconv.GEN_AI_TOOL_STATUS, "error")
                return
            span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, result)
            span.set_attribute(semconv.GEN_AI_TOOL_STATUS, "success")
