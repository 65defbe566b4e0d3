"""Ordinary traces that look like the shapes the rules for sessions traced at the model client,
for failures read from structure and for catalogues beside a loader look for, and whose
verdict inputs must not move: turns, tool calls, errors, the catalogue."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spanjudge.engine import Engine
from spanjudge.sessions.store import ClosedSession
from spanjudge.spans.record import SpanEvent, SpanRecord
from spanjudge.trajectory.model import Trajectory

S = 1_000_000_000
T0 = 1_700_000_000 * S


def _chat(
    n: int,
    at: int,
    inputs: list[Any],
    outputs: list[Any],
    *,
    system: str | None = None,
    tools: list[Any] | None = None,
    parent: str | None = None,
) -> SpanRecord:
    """A model call as the GenAI conventions record it."""
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "session.id": "s",
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps(outputs),
    }
    if system:
        attrs["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": system}])
    if tools:
        attrs["gen_ai.tool.definitions"] = json.dumps(tools)
    return SpanRecord(
        trace_id=f"{1:032x}",
        span_id=f"{n:016x}",
        parent_span_id=parent,
        name="chat m",
        start_unix_nano=T0 + at * S,
        end_unix_nano=T0 + at * S + S // 2,
        attributes=attrs,
    )


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def _asks(call_id: str, name: str, args: dict[str, Any]) -> list[Any]:
    part = {"type": "tool_call", "id": call_id, "name": name, "arguments": args}
    return [{"role": "assistant", "parts": [part], "finish_reason": "tool_call"}]


def _says(text: str) -> list[Any]:
    part = {"type": "text", "content": text}
    return [{"role": "assistant", "parts": [part], "finish_reason": "stop"}]


def _result(call_id: str, text: str) -> dict[str, Any]:
    part = {"type": "tool_call_response", "id": call_id, "response": text}
    return {"role": "tool", "parts": [part]}


def _trajectory(spans: list[SpanRecord]) -> Trajectory:
    closed = ClosedSession(
        key="s", key_source="session.id", revision=1, reason="end_of_input", spans=tuple(spans)
    )
    return Engine().trajectory(closed)


def test_a_short_follow_up_found_inside_an_earlier_tool_argument_opens_a_turn() -> None:
    """ "yes" is part of the argument "yesterday" of a call answered long before: the user's
    follow-up, not the task of an agent run as a tool."""
    ask = "What was the weather in Paris?"
    args = {"city": "Paris", "day": "yesterday"}
    spans = [
        _chat(1, 0, [_user(ask)], _asks("c1", "get_weather", args)),
        _chat(2, 1, [_user(ask), _result("c1", "Sunny")], _says("Sunny. Tomorrow too?")),
        _chat(3, 10, [_user("yes")], _says("Tomorrow: rain.")),
    ]
    assert [t.request for t in _trajectory(spans).turns] == [ask, "yes"]


def test_the_same_request_twice_is_two_turns() -> None:
    """The user typed "continue" again after the model's answer: a second turn."""
    first = [_user("continue")]
    spans = [
        _chat(1, 0, first, _says("Chapter 1")),
        _chat(2, 10, [*first, _says("Chapter 1")[0], _user("continue")], _says("Chapter 2")),
    ]
    assert len(_trajectory(spans).turns) == 2


_PLAN_TOOL = [{"type": "function", "name": "update_plan", "description": "Rewrite the plan"}]


@pytest.mark.parametrize("tools", [None, _PLAN_TOOL], ids=["no tools recorded", "same tools"])
def test_state_atop_the_same_agents_instructions_is_no_handoff(tools: list[Any] | None) -> None:
    """The agent's instructions open with its plan, which the tool it calls rewrites: the
    same agent goes on; its call counts."""
    role = "You are a finance assistant."
    before = f"Current plan: collect the quarterly sales figures first.\n{role}"
    after = f"Current plan: write the summary of the figures found.\n{role}"
    spans = [
        _chat(
            1,
            0,
            [_user("Summarise Q3")],
            _asks("c1", "update_plan", {"plan": "write it"}),
            system=before,
            tools=tools,
        ),
        _chat(
            2,
            1,
            [_user("Summarise Q3"), _result("c1", "plan updated")],
            _says("Up 4%."),
            system=after,
            tools=tools,
        ),
    ]
    assert _trajectory(spans).stats.tool_calls == 1


def _untraced_result(content: Any) -> Trajectory:
    """A session traced at the model client: the call's result is what the agent sent back
    in a chat completions tool message."""
    ask = "Which CI jobs failed?"
    spans = [
        _chat(1, 0, [_user(ask)], _asks("c1", "list_jobs", {"day": "today"})),
        _chat(
            2,
            1,
            [_user(ask), {"role": "tool", "tool_call_id": "c1", "content": content}],
            _says("build and lint."),
        ),
    ]
    return _trajectory(spans)


@pytest.mark.parametrize(
    "payload",
    [
        [{"job": "build", "status": "failed"}, {"job": "lint", "status": "failed"}],
        [{"type": "error_rate", "value": 0.01}],
    ],
    ids=["jobs that failed", "an error rate"],
)
def test_records_in_a_result_that_say_failed_or_error_are_data(payload: Any) -> None:
    found = _untraced_result(json.dumps(payload))
    assert (found.stats.tool_calls, found.stats.errors) == (1, 0)


def test_a_content_part_marked_as_an_error_is_a_failed_call() -> None:
    """The part of the tool message that holds the result marks it failed: the call failed."""
    found = _untraced_result([{"type": "text", "text": "disk full", "is_error": True}])
    assert (found.stats.tool_calls, found.stats.errors) == (1, 1)


ROOT = f"{100:016x}"


def _tool_span(result: Any, events: tuple[SpanEvent, ...] = ()) -> SpanRecord:
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "check_link",
        "gen_ai.tool.call.id": "c1",
        "session.id": "s",
        "gen_ai.tool.call.arguments": json.dumps({"url": "https://example.com/old"}),
        "gen_ai.tool.call.result": json.dumps(result),
    }
    return SpanRecord(
        trace_id=f"{1:032x}",
        span_id=f"{2:016x}",
        parent_span_id=ROOT,
        name="execute_tool check_link",
        start_unix_nano=T0 + S,
        end_unix_nano=T0 + S + S // 4,
        events=events,
        attributes=attrs,
    )


def _with_tool(tool: SpanRecord) -> Trajectory:
    """An agent span, the model call asking for the tool, the tool span, the answer."""
    agent = SpanRecord(
        trace_id=f"{1:032x}",
        span_id=ROOT,
        parent_span_id=None,
        name="invoke_agent a",
        start_unix_nano=T0,
        end_unix_nano=T0 + 10 * S,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "session.id": "s",
            "gen_ai.agent.name": "a",
        },
    )
    ask = "Is https://example.com/old still up?"
    asks = _asks("c1", "check_link", {"url": "https://example.com/old"})
    return _trajectory(
        [
            agent,
            _chat(1, 0, [_user(ask)], asks, parent=ROOT),
            tool,
            _chat(3, 2, [_user(ask), _result("c1", "x")], _says("No: 404."), parent=ROOT),
        ]
    )


def test_an_http_status_reported_as_data_is_no_failed_call() -> None:
    """A link checker that ran fine reports the status the link answered."""
    found = _with_tool(_tool_span({"url": "https://example.com/old", "status": 404}))
    assert (found.stats.tool_calls, found.stats.errors) == (1, 0)


def test_an_http_error_envelope_is_a_failed_call() -> None:
    found = _with_tool(_tool_span({"status": 404, "error": "Not Found"}))
    assert (found.stats.tool_calls, found.stats.errors) == (1, 1)


def test_a_handled_exception_on_a_tool_span_with_no_status_is_no_failure() -> None:
    """The SDK sets the error status itself when an exception escapes a span; one recorded
    under a status left unset was caught by the tool (a retry that then succeeded)."""
    handled = SpanEvent(
        name="exception",
        time_unix_nano=T0 + S,
        attributes={
            "exception.type": "TimeoutError",
            "exception.message": "first attempt timed out; retried",
        },
    )
    found = _with_tool(_tool_span({"reachable": False}, (handled,)))
    assert (found.stats.tool_calls, found.stats.errors) == (1, 0)


_LOADER = {
    "type": "function",
    "name": "load_skill",
    "description": "Load a skill by name",
    "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
}


def _catalogue(system: str, tools: list[Any]) -> list[str]:
    span = _chat(1, 0, [_user("Fix the bug")], _says("Done."), system=system, tools=tools)
    return [e.name for e in _trajectory([span]).catalogue]


def _tool(name: str, description: str) -> dict[str, Any]:
    return {"type": "function", "name": name, "description": description}


def test_a_tool_list_with_namespaced_tool_names_is_no_catalogue() -> None:
    system = (
        "You are a coding assistant.\n\n## Tools\n\n"
        "- read_file: Read a file.\n- write_file: Write a file.\n"
    )
    tools = [_LOADER, *(_tool(f"mcp__fs__{n}", "A file tool") for n in ("read_file", "write_file"))]
    assert _catalogue(system, tools) == []


def test_a_list_of_agents_offered_as_tools_beside_a_loader_is_no_catalogue() -> None:
    system = (
        "You lead a team.\nDelegate to one of them:\n"
        "- researcher: finds sources\n- writer: drafts the text\n"
    )
    tools = [_LOADER, _tool("researcher", "Ask the researcher"), _tool("writer", "Ask the writer")]
    assert _catalogue(system, tools) == []


def test_a_list_beside_a_tool_that_gets_device_capabilities_is_no_catalogue() -> None:
    system = (
        "You are support.\nAnswer in one of these tones:\n"
        "- formal: for business\n- casual: for consumers\n"
    )
    device = _tool("device_info", "Get the device's capabilities for a serial number")
    assert _catalogue(system, [device]) == []


def test_a_list_beside_a_loader_of_playbooks_is_the_catalogue() -> None:
    system = (
        "You are the operations assistant.\nWhat you can do:\n"
        "- csv-report: Summarise a CSV file\n- incident-triage: Triage an incident\n"
    )
    loader = _tool("fetch_playbook", "Fetch the team playbook for a kind of task.")
    assert _catalogue(system, [loader, _tool("read_csv", "Read a CSV file")]) == [
        "csv-report",
        "incident-triage",
    ]
