"""Tool calls that no tool span records, read from the model's messages: the call the model asked
for and the result the agent sent back (a tool message with the same call id).

Instrumentations that trace only the model client (an LLM SDK's instrumentation, with the tools
run by the agent's own code) record every tool call this way; a framework that validates
arguments before a tool runs leaves a rejected call this way too. Each case is a real fixture
session with its tool spans removed (and its messages in other spellings), compared with what
happened (the fixture set's scenarios.json).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.metamorphic.log_records import CONTENT_FORMS, in_content_form
from tests.support.rewritten import (
    drop_spans,
    file_requests,
    file_truth,
    report_of,
    session_requests,
    spans,
)

# Fixture files whose tool calls and loads the model's messages show in full (their tool spans
# add no failure that the results sent back do not say)
FILES = (
    ("genai_manual", "genai_manual.jsonl"),
    ("agent_framework", "agent_framework.jsonl"),
    ("strands", "strands_latest.jsonl"),
    ("strands", "strands_attributes_only.jsonl"),
    ("strands", "strands_default.jsonl"),
    ("deepagents", "deepagents.jsonl"),
    ("langgraph", "langgraph.jsonl"),
    ("openai_agents", "openai_agents_eager_openllmetry.jsonl"),
    ("openai_agents", "openai_agents_lazy_openinference.jsonl"),
    ("adk", "adk.jsonl"),
    ("mcp", "mcp_openllmetry.jsonl"),
    ("mcp", "mcp_openinference.jsonl"),
)


_TOOL_KIND = {"gen_ai.operation.name": "execute_tool", "openinference.span.kind": "TOOL"}


def _is_tool(span: dict[str, Any]) -> bool:
    return span["name"].startswith("execute_tool") or any(
        a["key"] in _TOOL_KIND and _TOOL_KIND[a["key"]] == a["value"].get("stringValue")
        for a in span.get("attributes", ())
    )


def _without_tool_spans(requests: list[dict[str, Any]]) -> None:
    """Every tool span removed, its children under its parent."""
    parents = {
        s["spanId"]: s.get("parentSpanId", "") for r in requests for s in spans(r) if _is_tool(s)
    }
    drop_spans(requests, lambda s: s["spanId"] in parents)
    for request in requests:
        for span in spans(request):
            parent = span.get("parentSpanId", "")
            while parent in parents:
                parent = parents[parent]
            span["parentSpanId"] = parent


def _what_happened(session: dict[str, Any]) -> tuple[Any, ...]:
    return (
        session["tool_calls"],
        [(x["skill"], x["status"]) for x in session["skill_loads"]],
        session["errors"],
    )


def _seen(session: dict[str, Any]) -> tuple[Any, ...]:
    return (
        session["stats"]["tool_calls"],
        [(x["skill"], x["status"]) for x in session["skill_loads"]],
        session["stats"]["errors"],
    )


@pytest.mark.parametrize("form", CONTENT_FORMS)
@pytest.mark.parametrize(("framework", "name"), FILES)
def test_tool_calls_no_span_records_are_read_from_the_messages(
    framework: str, name: str, form: str, tmp_path: Path
) -> None:
    requests = file_requests(framework, name)
    assert any(_is_tool(s) for r in requests for s in spans(r))
    _without_tool_spans(requests)
    assert not any(_is_tool(s) for r in requests for s in spans(r))
    requests = in_content_form(requests, form)
    truth = file_truth(framework, name)
    report = report_of(requests, tmp_path, f"{framework}/expectations.yaml")
    seen = {s["session_id"]: _seen(s) for s in report["sessions"] if s["session_id"] in truth}
    assert seen == {sid: _what_happened(s) for sid, s in truth.items()}


def test_parallel_calls_in_one_output_message_each(tmp_path: Path) -> None:
    """An output of one assistant message per parallel call: every call counts."""
    session_id = "oa-eager-openllmetry-parallel-tools"
    requests = session_requests("openai_agents/openai_agents_eager_openllmetry.jsonl", session_id)
    _without_tool_spans(requests)
    (session,) = report_of(requests, tmp_path)["sessions"]
    truth = file_truth("openai_agents", "openai_agents_eager_openllmetry.jsonl")[session_id]
    assert session["stats"]["tool_calls"] == truth["tool_calls"] == 2


def test_a_load_no_span_records_is_decided_by_the_result_sent_back(tmp_path: Path) -> None:
    """Tool spans carry call ids, but the loader's own span is missing: the SKILL.md the agent
    sent back says the load succeeded (before: a call never executed, a failed load)."""
    session_id = "strands-latest-required-skill-followed"
    requests = session_requests("strands/strands_latest.jsonl", session_id)
    drop_spans(requests, lambda s: s["name"] == "execute_tool skills")
    (session,) = report_of(requests, tmp_path, "strands/expectations.yaml")["sessions"]
    truth = file_truth("strands", "strands_latest.jsonl")[session_id]
    assert [(x["skill"], x["status"]) for x in session["skill_loads"]] == [
        (x["skill"], x["status"]) for x in truth["skill_loads"]
    ]
    assert truth["skill_loads"] == [{"skill": "csv-report", "status": "loaded"}]


def test_a_rejected_load_reports_the_error_sent_back(tmp_path: Path) -> None:
    """Argument validation rejected the load before any tool ran: the failed load says what
    the agent told the model."""
    session_id = "maf-load-rejected-then-retried"
    report = report_of(file_requests("agent_framework", "agent_framework.jsonl"), tmp_path)
    (session,) = [s for s in report["sessions"] if s["session_id"] == session_id]
    failed = [x for x in session["skill_loads"] if x["status"] == "failed"]
    assert [(x["skill"], x["error"]) for x in failed] == [
        ("csv-report", "Error: Argument parsing failed.")
    ]
