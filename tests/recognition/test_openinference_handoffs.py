"""An OpenAI Agents handoff under OpenInference (fixtures/openai_agents_custom_loader/): the
`handoff to <agent>` TOOL span moved the conversation and ran no tool."""

from __future__ import annotations

import json

from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from tests.conftest import FIXTURES

FOLDER = FIXTURES / "openai_agents_custom_loader"
SESSION = "oa-custom-openinference-handoff"


def _spans() -> list[SpanRecord]:
    path = FOLDER / "custom_loader_openinference.jsonl"
    spans = [s for c in read_input(str(path)) for s in c.spans]
    return [s for s in spans if s.attributes.get("session.id") == SESSION]


def test_a_handoff_is_no_tool_call() -> None:
    spans = _spans()
    handoff = next(s for s in spans if s.name.startswith("handoff to "))
    assert handoff.attributes["openinference.span.kind"] == "TOOL"
    assert "tool.name" not in handoff.attributes
    steps = RecogniserRegistry.default().recognise_session(spans)
    calls = [(s.name, s.arguments) for s in steps if s.kind == "tool_call"]
    records = json.loads((FOLDER / "scenarios.json").read_text())["sessions"]
    record = next(r for r in records if r["session_id"] == SESSION)
    assert calls == [(c["tool"], c["args"]) for c in record["calls"]]
    # the agent handed to is still seen, and its answer is the run's
    assert "forecast-agent" in {s.agent_name for s in steps if s.kind == "agent_turn"}
    assert [s.text for s in steps if s.kind == "final_answer"] == [record["final_answer"]]
