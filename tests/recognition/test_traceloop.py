"""OpenLLMetry legacy spans (fixtures/openllmetry: traceloop-sdk and its openai instrumentation
0.52.6): indexed `gen_ai.prompt.N` / `gen_ai.completion.N` messages and decorator spans."""

from __future__ import annotations

from spanjudge.recognition.genai import (
    GenAIRecogniser,
    last_user_text,
    messages,
    output,
    tool_requests,
)
from spanjudge.recognition.traceloop import TraceloopRecogniser
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from tests.conftest import FIXTURES


def _session(session_id: str) -> list[SpanRecord]:
    path = FIXTURES / "openllmetry" / "openllmetry.jsonl"
    spans = [s for c in read_input(str(path)) for s in c.spans]
    traces = {s.trace_id for s in spans if s.attributes.get("session.id") == session_id}
    return [s for s in spans if s.trace_id in traces]


def test_indexed_prompts_and_completions_read_as_messages() -> None:
    chats = [s for s in _session("openllmetry-required-skill-followed") if s.name == "openai.chat"]
    first, second = chats[0], chats[1]
    assert "gen_ai.input.messages" not in first.attributes
    assert last_user_text(first) == (
        "Please summarise data/sales.csv into a report with the totals per region."
    )
    (request,) = tool_requests(first)
    assert (request.name, request.call_id, request.arguments) == (
        "load_skill",
        "call_001",
        {"skill_name": "csv-report"},
    )
    assert output(first)[2] is True  # asked for a tool: never an answer
    # the tool result the second call replays is a tool_call_response part
    (reply,) = [m for m in messages(second, "gen_ai.input.messages") if m["role"] == "tool"]
    assert reply["parts"][0]["type"] == "tool_call_response"
    assert reply["parts"][0]["response"].startswith("---\nname: csv-report")
    (step,) = GenAIRecogniser().recognise(first) or []
    assert [e.name for e in step.catalogue] == ["csv-report", "release-notes", "incident-triage"]


def test_decorated_tools_are_calls_with_their_keyword_arguments() -> None:
    spans = _session("openllmetry-load-failed-unknown-skill")
    load = next(s for s in spans if s.name == "load_skill.tool")
    (step,) = TraceloopRecogniser().recognise(load) or []
    assert step.arguments == {"skill_name": "csv-reports"}
    assert (step.kind, step.skill, step.skill_status) == ("skill_load", "csv-reports", "failed")


def test_the_workflow_is_the_turn_and_its_text_output_the_answer() -> None:
    spans = _session("openllmetry-skill-never-loaded-fluent")
    workflow = next(s for s in spans if s.name == "shop_ops_agent.workflow")
    turn, answer = TraceloopRecogniser().recognise(workflow) or []
    assert (turn.kind, answer.kind) == ("agent_turn", "final_answer")
    assert answer.text is not None and answer.text.startswith("The grand total is 310")
