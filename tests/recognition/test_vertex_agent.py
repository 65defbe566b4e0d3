"""Google ADK 1.x `gcp.vertex.agent.*` attributes (fixtures/adk_legacy, ADK 1.30.0's own spans)."""

from __future__ import annotations

from spanjudge.recognition.genai import GenAIRecogniser, last_user_text, output, tool_requests
from spanjudge.recognition.vertex_agent import tool_io
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from tests.conftest import FIXTURES


def _session(session_id: str) -> list[SpanRecord]:
    spans = [
        s for c in read_input(str(FIXTURES / "adk_legacy" / "adk_legacy.jsonl")) for s in c.spans
    ]
    traces = {s.trace_id for s in spans if s.attributes.get("gen_ai.conversation.id") == session_id}
    return [s for s in spans if s.trace_id in traces]


def test_a_load_whose_arguments_are_only_in_gcp_vertex_agent_attributes_is_read() -> None:
    spans = _session("adk-legacy-required-skill-followed")
    span = next(s for s in spans if s.attributes.get("gen_ai.tool.name") == "load_skill")
    assert "gen_ai.tool.call.arguments" not in span.attributes
    (step,) = GenAIRecogniser().recognise(span) or []
    assert (step.kind, step.skill, step.skill_status) == ("skill_load", "csv-report", "loaded")
    assert step.skill_body and step.skill_body.startswith("# CSV report")


def test_request_and_answer_come_from_the_call_llm_json() -> None:
    calls = [s for s in _session("adk-legacy-skill-never-loaded-fluent") if s.name == "call_llm"]
    (call,) = calls
    assert last_user_text(call) == (
        "Please summarise data/sales.csv into a report with the totals per region."
    )
    text, reason, asked = output(call)
    assert text is not None and text.startswith("The grand total is 310")
    assert (reason, asked) == ("stop", False)
    assert tool_requests(call) == ()


def test_a_placeholder_response_says_nothing() -> None:
    span = SpanRecord(
        trace_id="0" * 31 + "1",
        span_id="0" * 15 + "1",
        parent_span_id=None,
        name="execute_tool get_weather",
        start_unix_nano=1,
        end_unix_nano=2,
        attributes={
            "gcp.vertex.agent.tool_call_args": "{}",
            "gcp.vertex.agent.tool_response": '{"result": "<not specified>"}',
        },
    )
    assert tool_io(span) == ({}, None, False)
