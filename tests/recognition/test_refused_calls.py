"""A call the agent refused before running it (a call limit reached) and answered with a
message saying so: no tool span shows it and, where tool spans record no call ids, only that
message tells it from a call the instrumentation names differently. The trace is a fixture's,
rewritten: its last call's tool span dropped and the result sent back replaced by the refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.metamorphic.transforms import map_strings
from tests.support.rewritten import attribute, drop_spans, report_of, session_requests, spans

SESSION = "llamaindex-required-skill-followed"
REFUSAL = (
    "Tool call limit reached. Tool call write_file not executed. Don't try to execute it again."
)


def _without_write_file(result: str | None) -> list[dict[str, Any]]:
    """The session with its `write_file` tool span dropped and, when ``result`` is given, the
    result that call sent back replaced by it."""
    requests = session_requests("llamaindex/llamaindex.jsonl", SESSION)
    tool = next(s for r in requests for s in spans(r) if attribute(s, "tool.name") == "write_file")
    drop_spans(requests, lambda s: s is tool)
    if result is not None:
        sent = _sent_back(requests, "write_file")
        for request in requests:
            map_strings(request, lambda t: result if t == sent else t, span_names=False)
    return requests


def _sent_back(requests: list[dict[str, Any]], tool: str) -> str:
    """The content of the tool message that answered the model's request for ``tool``."""
    values = {
        a["key"]: a["value"].get("stringValue")
        for r in requests
        for s in spans(r)
        for a in s["attributes"]
    }
    asked = next(
        k for k, v in values.items() if k.endswith("tool_call.function.name") and v == tool
    )
    call_id = values[asked.replace("function.name", "id")]
    answer = next(
        k for k, v in values.items() if k.endswith("message.tool_call_id") and v == call_id
    )
    content = values[answer.replace("tool_call_id", "content")]
    assert content
    return content


def _calls(report: dict[str, Any]) -> list[tuple[str, str]]:
    (session,) = report["sessions"]
    return [
        (s["name"], s["status"])
        for s in session["steps"]
        if s["kind"] in ("tool_call", "skill_load")
    ]


def test_a_call_answered_as_not_executed_is_a_failed_call(tmp_path: Path) -> None:
    untouched = _calls(
        report_of(session_requests("llamaindex/llamaindex.jsonl", SESSION), tmp_path)
    )
    assert [name for name, _ in untouched][-1] == "write_file"
    refused = _calls(report_of(_without_write_file(REFUSAL), tmp_path))
    assert refused == [*untouched[:-1], ("write_file", "error")]


def test_a_call_answered_with_a_result_but_never_traced_stays_unknown(tmp_path: Path) -> None:
    # the result came back from something that ran: a tool the instrumentation traced under
    # another name is no evidence of a call that did not run
    untouched = _calls(
        report_of(session_requests("llamaindex/llamaindex.jsonl", SESSION), tmp_path)
    )
    assert _calls(report_of(_without_write_file(None), tmp_path)) == untouched[:-1]


def test_a_result_about_something_else_not_executed_is_no_refusal(tmp_path: Path) -> None:
    # the words say something else was not run, not the call of write_file
    untouched = _calls(
        report_of(session_requests("llamaindex/llamaindex.jsonl", SESSION), tmp_path)
    )
    other = "Migration 42 has not been executed yet; it is scheduled for 02:00."
    assert _calls(report_of(_without_write_file(other), tmp_path)) == untouched[:-1]
