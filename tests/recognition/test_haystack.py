"""Haystack's own tracer: what the preset reads from the spans of the committed fixtures."""

from __future__ import annotations

from spanjudge.recognition.haystack import HaystackRecogniser
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from tests.conftest import FIXTURES


def _spans() -> list[SpanRecord]:
    return [s for c in read_input(str(FIXTURES / "haystack" / "haystack.jsonl")) for s in c.spans]


def _session(name: str) -> list[SpanRecord]:
    roots = {
        s.trace_id
        for s in _spans()
        if s.name == "haystack.agent.run" and s.attributes.get("session.id") == name
    }
    return [s for s in _spans() if s.trace_id in roots]


def test_a_load_the_tool_rejected_is_failed_though_the_span_status_is_unset() -> None:
    spans = _session("haystack-load-failed-unknown-skill")
    tool = next(s for s in spans if s.name == "haystack.agent.step.tool")
    assert tool.status == "unset" and tool.attributes["haystack.tool.error"] is True
    (step,) = HaystackRecogniser().recognise(tool) or []
    assert (step.kind, step.skill, step.skill_status) == ("skill_load", "csv-reports", "failed")
    assert step.error and "Unknown skill 'csv-reports'" in step.error


def test_request_answer_and_tokens_come_from_the_haystack_attributes() -> None:
    recogniser = HaystackRecogniser()
    steps = [
        st
        for s in _session("haystack-skill-never-loaded-fluent")
        for st in recogniser.recognise(s) or []
    ]
    kinds = {st.kind: st for st in steps}
    assert kinds["agent_turn"].text == (
        "Please summarise data/sales.csv into a report with the totals per region."
    )
    assert kinds["final_answer"].text.startswith("The grand total is 310")
    assert (kinds["model_call"].input_tokens, kinds["model_call"].output_tokens) == (320, 32)


def test_step_spans_are_claimed_without_steps_and_other_spans_are_left_alone() -> None:
    step = next(s for s in _spans() if s.name == "haystack.agent.step")
    assert HaystackRecogniser().recognise(step) == []
    other = SpanRecord(
        trace_id="0" * 31 + "1",
        span_id="0" * 15 + "1",
        parent_span_id=None,
        name="GET /health",
        start_unix_nano=1,
        end_unix_nano=2,
        attributes={"http.request.method": "GET"},
    )
    assert HaystackRecogniser().recognise(other) is None


def test_the_catalogue_in_the_llm_input_repr_is_read_without_the_rest_of_the_repr() -> None:
    # the skill never loaded: the catalogue exists only in load_skill's description inside the
    # llm input, a Python repr (Tools do not serialise to JSON)
    spans = _session("haystack-skill-never-loaded-fluent")
    llm = next(s for s in spans if s.name == "haystack.agent.step.llm")
    (step,) = HaystackRecogniser().recognise(llm) or []
    assert {e.name: e.description for e in step.catalogue} == {
        "csv-report": "Summarise a CSV file of sales figures into a markdown report with totals "
        "per region.",
        "incident-triage": "Triage a production incident from its alerts and logs and open a "
        "ticket.",
        "release-notes": "Draft release notes for a version from its merged pull requests, "
        "grouped by label.",
    }
