"""A ReAct loop written through OpenInference by an instrumentation that traces methods: each
TOOL span named after the method it wrapped (`read_csv.__call__`) with no `tool.name`, a
no-argument `finish` call that ends the loop, and a run output that is a record of fields
(`{"trajectory": ..., "reasoning": ..., "answer": ...}`) beside a model text that says each
field as a section. The run is the same as one written the ordinary way; the report must be too.

The cases are real sessions: Deep Agents (fixtures/deepagents) rewritten the way DSPy's
instrumentation writes its tools, and DSPy ReAct (fixtures/dspy) rewritten the ordinary way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import FIXTURES
from tests.metamorphic.transforms import map_strings
from tests.support.fixture_reports import session_report
from tests.support.rewritten import (
    attribute,
    drop_spans,
    file_truth,
    report_of,
    session_requests,
    set_attribute,
    spans,
)

Span = dict[str, Any]
DSPY_SESSION = "dspy-required-skill-followed"
FINISH_DESCRIPTION = (
    "Marks the task as complete. That is, signals that all information for producing the "
    "outputs, i.e. `answer`, are now available to be extracted."
)


def _seen(requests: list[dict[str, Any]], tmp_path: Path, expectations: str) -> dict[str, Any]:
    """What a user reads in the session's report: its steps, answer, counts and verdicts."""
    (session,) = report_of(requests, tmp_path, expectations)["sessions"]
    stats = {k: v for k, v in session["stats"].items() if k != "duration_s"}
    return {
        "steps": [(s["kind"], s["name"], s.get("text")) for s in session["steps"]],
        "skill_loads": [(x["skill"], x["status"], x["tool_name"]) for x in session["skill_loads"]],
        "final_answer": session["final_answer"],
        "stats": stats,
        "verdicts": [(v["evaluator"], v["outcome"], v["explanation"]) for v in session["verdicts"]],
    }


def _dspy() -> list[dict[str, Any]]:
    return session_requests("dspy/dspy.jsonl", DSPY_SESSION)


def _is_tool(span: Span) -> bool:
    return attribute(span, "openinference.span.kind") == "TOOL"


def test_a_tool_span_named_after_its_method_is_a_call_of_the_tool(tmp_path: Path) -> None:
    session = "deepagents-default-required-skill-followed"
    requests = session_requests("deepagents/deepagents.jsonl", session)
    before = _seen(requests, tmp_path, "deepagents/expectations.yaml")
    renamed = 0
    for request in requests:
        for span in spans(request):
            tool = attribute(span, "tool.name")
            if _is_tool(span) and tool:
                span["name"] = f"{tool}.__call__"
                set_attribute(span, "tool.name", None)
                renamed += 1
    assert renamed >= 3
    assert _seen(requests, tmp_path, "deepagents/expectations.yaml") == before


def test_a_method_span_of_a_tool_the_session_never_names_keeps_its_name(
    tmp_path: Path,
) -> None:
    requests = _dspy()
    for request in requests:  # every text of the session calls the tool something else
        map_strings(request, lambda text: text.replace("read_csv", "csv_reader"), span_names=False)
    names = [name for kind, name, _ in _seen(requests, tmp_path, "dspy/expectations.yaml")["steps"]]
    assert "read_csv.__call__" in names  # the span's own name: nothing says it is `read_csv`
    assert "read_csv" not in names


def test_the_loops_stop_signal_is_no_tool_call(tmp_path: Path) -> None:
    requests = _dspy()
    seen = _seen(requests, tmp_path, "dspy/expectations.yaml")
    truth = file_truth("dspy", "dspy.jsonl")[DSPY_SESSION]
    assert seen["stats"]["tool_calls"] == truth["tool_calls"]
    calls = [(kind, name) for kind, name, _ in seen["steps"] if kind in ("tool_call", "skill_load")]
    assert [name for _, name in calls] == [c["name"] for c in truth["tool_log"]]
    # the same run without the signal's span reads the same
    drop_spans(requests, lambda s: _is_tool(s) and s["name"].startswith("finish"))
    assert _seen(requests, tmp_path, "dspy/expectations.yaml") == seen


def test_a_last_call_without_arguments_that_ends_nothing_stays_a_call(tmp_path: Path) -> None:
    requests = _dspy()
    for request in requests:
        map_strings(
            request,
            lambda text: text.replace(FINISH_DESCRIPTION, "Fetches the latest sales figures."),
            span_names=False,
        )
    seen = _seen(requests, tmp_path, "dspy/expectations.yaml")
    assert ("tool_call", "finish") in [(kind, name) for kind, name, _ in seen["steps"]]


def test_a_run_output_of_fields_gives_the_field_the_model_said_last(tmp_path: Path) -> None:
    requests = _dspy()
    seen = _seen(requests, tmp_path, "dspy/expectations.yaml")
    answer = file_truth("dspy", "dspy.jsonl")[DSPY_SESSION]["final_answer"]
    assert seen["final_answer"] == answer
    # the run written as an agent that returns its answer as text reads the same
    for request in requests:
        for span in spans(request):
            output = attribute(span, "output.value")
            if "parentSpanId" not in span or not span["parentSpanId"]:
                assert output is not None and json.loads(output)["answer"] == answer
                set_attribute(span, "output.value", answer)
    assert _seen(requests, tmp_path, "dspy/expectations.yaml") == seen


def test_a_namespaced_tool_span_keeps_its_name(tmp_path: Path) -> None:
    session = "deepagents-default-required-skill-followed"
    requests = session_requests("deepagents/deepagents.jsonl", session)
    for request in requests:
        for span in spans(request):
            tool = attribute(span, "tool.name")
            if _is_tool(span) and tool:
                span["name"] = f"files.{tool}"  # the session knows the tool, not `files`
                set_attribute(span, "tool.name", None)
        map_strings(request, lambda text: text.replace("agent", "files agent"), span_names=False)
    names = [
        name for kind, name, _ in _seen(requests, tmp_path, "deepagents/expectations.yaml")["steps"]
    ]
    assert "files.read_csv" in names and "files" not in names


def test_the_request_is_the_runs_own_argument_not_the_prompt_around_it() -> None:
    # The run was called with its arguments under a key of their own
    # (`{"input_args": {"question": ...}}`); the model got the question inside the loop's
    # field instructions. The request is the question the user asked.
    records = json.loads((FIXTURES / "dspy" / "scenarios.json").read_text())["sessions"]
    for record in records:
        got = session_report(str(FIXTURES / "dspy"), record["session_id"])
        turns = [s["text"] for s in got["steps"] if s["kind"] == "agent_turn"]
        assert turns[0] == record["request"], record["session_id"]
