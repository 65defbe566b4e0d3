"""smolagents through OpenInference: what the preset reads from the committed fixture's spans."""

from __future__ import annotations

import dataclasses
import json

from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.recognition.smolagents import SmolagentsRecogniser
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from tests.conftest import FIXTURES

FIXTURE = FIXTURES / "smolagents"


def _session(session_id: str) -> list[SpanRecord]:
    spans = [s for c in read_input(str(FIXTURE / "smolagents.jsonl")) for s in c.spans]
    return [s for s in spans if s.attributes.get("session.id") == session_id]


def _record(session_id: str) -> dict[str, object]:
    records = json.loads((FIXTURE / "scenarios.json").read_text())["sessions"]
    found: dict[str, object] = next(r for r in records if r["session_id"] == session_id)
    return found


def test_the_answer_is_what_final_answer_returned_not_the_code_models_text() -> None:
    spans = _session("smolagents-skill-followed")
    steps = RecogniserRegistry.default().recognise_session(spans)
    answers = [s.text for s in steps if s.kind == "final_answer"]
    assert answers == [_record("smolagents-skill-followed")["final_answer"]]
    # the last LLM output is the plan and the program, which is no answer
    last_model = max((s for s in steps if s.kind == "model_call"), key=lambda s: s.end_unix_nano)
    assert last_model.text is not None and last_model.text.startswith("Thought:")
    # the answer channel is no tool the agent used
    assert "final_answer" not in [s.name for s in steps if s.kind in ("tool_call", "skill_load")]


def test_tool_arguments_are_the_calls_own_keyword_arguments() -> None:
    spans = _session("smolagents-write-then-delete")
    tools = [s for s in spans if s.attributes.get("openinference.span.kind") == "TOOL"]
    wrapped = json.loads(str(tools[0].attributes["input.value"]))
    assert set(wrapped) >= {"args", "kwargs"}  # how the instrumentation records a call
    steps = [st for s in tools for st in SmolagentsRecogniser().recognise(s) or []]
    assert [(s.name, s.arguments) for s in steps] == [
        ("write_file", {"path": "out/tmp.txt", "content": "draft"}),
        ("delete_file", {"path": "out/tmp.txt"}),
    ]


def test_positional_arguments_are_kept_when_there_are_no_keyword_ones() -> None:
    tool = next(
        s
        for s in _session("smolagents-write-then-delete")
        if s.attributes.get("tool.name") == "delete_file"
    )
    positional = dataclasses.replace(
        tool,
        attributes={
            **tool.attributes,
            "input.value": '{"args": ["out/tmp.txt"], "sanitize_inputs_outputs": false,'
            ' "kwargs": {}}',
        },
    )
    (step,) = SmolagentsRecogniser().recognise(positional) or []
    assert step.arguments == {"args": ["out/tmp.txt"]}


def test_a_raising_skill_read_is_a_failed_load() -> None:
    spans = _session("smolagents-load-failed-refusal")
    steps = [st for s in spans for st in SmolagentsRecogniser().recognise(s) or []]
    loads = [(s.skill, s.skill_status) for s in steps if s.kind == "skill_load"]
    assert loads == [("csv-reports", "failed")]


def test_spans_of_other_instrumentations_and_model_spans_pass_on() -> None:
    spans = _session("smolagents-skill-followed")
    llm = next(s for s in spans if s.attributes.get("openinference.span.kind") == "LLM")
    assert SmolagentsRecogniser().recognise(llm) is None
    other = dataclasses.replace(
        next(s for s in spans if s.attributes.get("openinference.span.kind") == "TOOL"),
        scope_name="openinference.instrumentation.langchain",
    )
    assert SmolagentsRecogniser().recognise(other) is None
