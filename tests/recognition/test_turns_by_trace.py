"""A session whose requests each run under a root span the conventions do not name as an agent
turn (Spring AI's `chat_client` observation says `gen_ai.operation.name` `framework`), with no
message content recorded, still has one turn per request: a trace is one request, so a model
call under another trace's root than the turn's begins the next turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.rewritten import file_requests, report_of, spans

CONTENT = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")


def _framework_roots_without_content(requests: list[dict[str, Any]]) -> None:
    for request in requests:
        for span in spans(request):
            span["attributes"] = [a for a in span["attributes"] if a["key"] not in CONTENT]
            for a in span["attributes"]:
                if a["key"] == "gen_ai.operation.name" and a["value"] == {
                    "stringValue": "invoke_agent"
                }:
                    a["value"] = {"stringValue": "framework"}


def _turn_of_each_call(session: dict[str, Any]) -> list[tuple[str, int]]:
    return [
        (s["name"], s["turn"])
        for s in session["steps"]
        if s["kind"] in ("tool_call", "skill_load", "model_call")
    ]


def test_each_trace_of_a_session_is_a_turn_when_no_request_is_recorded(tmp_path: Path) -> None:
    requests = file_requests("genai_manual", "genai_manual.jsonl")
    before = {s["session_id"]: s for s in report_of(requests, tmp_path)["sessions"]}
    _framework_roots_without_content(requests)
    after = {s["session_id"]: s for s in report_of(requests, tmp_path)["sessions"]}
    assert after.keys() == before.keys()
    assert before["genai-manual-multi-turn"]["stats"]["turns"] == 3
    for session_id, was in before.items():
        now = after[session_id]
        assert not any(s["kind"] == "agent_turn" and s.get("text") for s in now["steps"])
        assert now["stats"]["turns"] == was["stats"]["turns"], session_id
        assert _turn_of_each_call(now) == _turn_of_each_call(was), session_id
