"""OpenInference preset against Deep Agents traces (fixtures/deepagents, real instrumentation).

Expected values come from scenarios.json, which the generator computed from its own tool and
model call logs, and from the SKILL.md files the agent read; never from this recogniser.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from spanjudge.recognition.openinference import OpenInferenceRecogniser
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_DIR = ROOT / "fixtures" / "deepagents"
SKILLS_DIR = ROOT / "fixtures" / "skills"
SCENARIOS: list[dict[str, Any]] = json.loads((FIXTURE_DIR / "scenarios.json").read_text())[
    "sessions"
]
BY_NAME = {s["scenario"]: s for s in SCENARIOS}


@cache
def session_spans() -> dict[str, list[SpanRecord]]:
    sessions: dict[str, list[SpanRecord]] = defaultdict(list)
    for chunk in read_input(str(FIXTURE_DIR / "deepagents.jsonl")):
        assert not chunk.problems
        for span in chunk.spans:
            sessions[str(span.attributes.get("session.id"))].append(span)
    return dict(sessions)


@cache
def steps_of(session_id: str) -> tuple[Step, ...]:
    recogniser = OpenInferenceRecogniser()
    spans = session_spans()[session_id]
    steps: list[Step] = []
    for span in spans:
        recognised = recogniser.recognise(span)
        assert recognised is not None, f"OpenInference span {span.name} not claimed"
        steps.extend(recognised)
    return tuple(recogniser.finalise(steps, spans))


def of_kind(session_id: str, kind: str) -> list[Step]:
    return sorted(
        (s for s in steps_of(session_id) if s.kind == kind),
        key=lambda s: (s.start_unix_nano, s.seq),
    )


def skill_file(name: str) -> str:
    return (SKILLS_DIR / name / "SKILL.md").read_text(encoding="utf-8")


def frontmatter(name: str) -> dict[str, str]:
    head = skill_file(name).split("---")[1]
    return dict(
        (k.strip(), v.strip())
        for k, v in (line.split(":", 1) for line in head.strip().splitlines())
    )


IDS = [s["session_id"] for s in SCENARIOS]


def test_every_span_carries_a_scenario_session_id() -> None:
    assert sorted(session_spans()) == sorted(IDS)


@pytest.mark.parametrize("record", SCENARIOS, ids=IDS)
def test_counts_match_the_generator_log(record: dict[str, Any]) -> None:
    sid = record["session_id"]
    assert len(of_kind(sid, "tool_call")) == record["tool_calls"]
    assert len(of_kind(sid, "model_call")) == record["model_calls"]
    assert sum(1 for s in of_kind(sid, "tool_call") if s.failed) == record["errors"]
    model_calls = of_kind(sid, "model_call")
    assert sum(s.input_tokens or 0 for s in model_calls) == record["input_tokens"]
    assert sum(s.output_tokens or 0 for s in model_calls) == record["output_tokens"]


@pytest.mark.parametrize("record", SCENARIOS, ids=IDS)
def test_skill_loads_and_status(record: dict[str, Any]) -> None:
    loads = [
        {"skill": s.skill, "status": s.skill_status}
        for s in of_kind(record["session_id"], "skill_load")
    ]
    assert loads == record["skill_loads"]


@pytest.mark.parametrize("record", SCENARIOS, ids=IDS)
def test_turns_requests_and_final_answer(record: dict[str, Any]) -> None:
    sid = record["session_id"]
    turns = of_kind(sid, "agent_turn")
    assert len(turns) == record["turns"]
    assert len({t.trace_id for t in turns}) == record["traces"]
    assert turns[0].text == record["request"]
    answers = of_kind(sid, "final_answer")
    assert len(answers) == record["turns"]  # one per turn, each from a stop LLM span
    assert answers[-1].text == record["final_answer"]
    assert answers[-1].trace_id == turns[-1].trace_id


@pytest.mark.parametrize("record", SCENARIOS, ids=IDS)
def test_catalogue_from_the_system_prompt(record: dict[str, Any]) -> None:
    catalogue = {c.name: c.description for s in steps_of(record["session_id"]) for c in s.catalogue}
    names = ("csv-report", "incident-triage", "release-notes")
    assert catalogue == {name: frontmatter(name)["description"] for name in names}


def test_missing_skill_file_is_a_failed_load_with_the_error_only_in_the_payload() -> None:
    (load,) = of_kind(BY_NAME["load_failed_payload_error"]["session_id"], "skill_load")
    assert load.status == "ok"  # the span itself says nothing went wrong
    assert load.skill_status == "failed"
    assert "not found" in (load.error or "")
    assert load.skill_body is None


def test_raising_read_is_a_failed_load_with_error_status() -> None:
    (load,) = of_kind(BY_NAME["load_failed_exception"]["session_id"], "skill_load")
    assert load.status == "error"
    assert load.skill_status == "failed"
    assert load.error is not None and load.error.startswith("OSError: storage backend unavailable")


def test_tool_error_inside_the_payload_is_detected_and_retried() -> None:
    writes = [
        s
        for s in of_kind(BY_NAME["tool_error_retry"]["session_id"], "tool_call")
        if s.name == "write_file"
    ]
    assert [w.status for w in writes] == ["ok", "ok"]
    assert [w.failed for w in writes] == [True, False]
    assert "Path traversal not allowed" in (writes[0].error or "")
    assert [w.arguments["file_path"] for w in writes] == ["../out/report.md", "/out/report.md"]


@pytest.mark.parametrize("name", ["required_skill_followed", "wrong_skill"])
def test_loaded_body_is_the_skill_file(name: str) -> None:
    (load,) = of_kind(BY_NAME[name]["session_id"], "skill_load")
    assert load.skill is not None
    assert load.skill_body == skill_file(load.skill).rstrip("\n")


def test_pinned_skill_is_loaded_with_its_body() -> None:
    (load,) = of_kind(BY_NAME["pinned_skill"]["session_id"], "skill_load")
    body_without_frontmatter = skill_file("csv-report").split("---", 2)[2].strip()
    assert load.skill_body == body_without_frontmatter
    assert load.arguments == {"path": "/skills/csv-report/SKILL.md"}


@pytest.mark.parametrize("record", SCENARIOS, ids=IDS)
def test_tool_calls_have_ids_and_the_logged_arguments(record: dict[str, Any]) -> None:
    calls = of_kind(record["session_id"], "tool_call") + of_kind(record["session_id"], "skill_load")
    executed = [c for c in calls if c.name != "pinned_skill"]
    for call in executed:
        assert call.tool_call_id is not None and re.fullmatch(r"call_\d+_\d+", call.tool_call_id)
    logged = sorted((e["name"], json.dumps(e["args"], sort_keys=True)) for e in record["tool_log"])
    seen = sorted((c.name, json.dumps(c.arguments, sort_keys=True)) for c in executed)
    assert seen == logged


def test_parallel_calls_come_from_one_model_response() -> None:
    sid = BY_NAME["parallel_tools"]["session_id"]
    first_call, _ = of_kind(sid, "model_call")
    calls = of_kind(sid, "tool_call")
    assert {c.tool_call_id for c in calls} == {"call_0_0", "call_0_1"}
    assert all(c.start_unix_nano >= first_call.end_unix_nano for c in calls)
    assert first_call.finish_reason == "tool_calls"


def test_tool_schemas_come_from_the_model_request() -> None:
    (first, *_) = of_kind(BY_NAME["no_skill_needed"]["session_id"], "model_call")
    assert first.tool_schemas["get_weather"]["required"] == ["city"]
    assert "read_file" in first.tool_schemas
    assert first.model == "scripted-model"


def test_internal_spans_are_claimed_and_foreign_spans_left_alone() -> None:
    recogniser = OpenInferenceRecogniser()
    spans = session_spans()[BY_NAME["required_skill_followed"]["session_id"]]
    internal = [s for s in spans if s.name in ("model", "tools", "SkillsMiddleware.before_model")]
    assert internal and all(recogniser.recognise(s) == [] for s in internal)
    # Deep Agents middleware nodes named "...before_agent" get kind AGENT but are not turns.
    agents = [s for s in spans if s.attributes.get("openinference.span.kind") == "AGENT"]
    assert agents and all(recogniser.recognise(s) == [] for s in agents)
    foreign = SpanRecord(
        trace_id="1" * 32,
        span_id="2" * 16,
        parent_span_id=None,
        name="GET /",
        start_unix_nano=1,
        end_unix_nano=2,
        attributes={"http.method": "GET"},
    )
    assert recogniser.recognise(foreign) is None


def test_graph_root_under_a_foreign_parent_is_still_a_turn() -> None:
    (root,) = [
        s
        for s in session_spans()[BY_NAME["no_skill_needed"]["session_id"]]
        if s.parent_span_id is None
    ]
    served = SpanRecord(
        trace_id=root.trace_id,
        span_id=root.span_id,
        parent_span_id="f" * 16,
        name=root.name,
        start_unix_nano=root.start_unix_nano,
        end_unix_nano=root.end_unix_nano,
        attributes=root.attributes,
    )
    (turn,) = OpenInferenceRecogniser().recognise(served) or []
    assert turn.kind == "agent_turn"
    assert turn.text == "What is the weather in Berlin today?"


def test_available_skills_block_in_a_system_message() -> None:
    prompt = (
        "<available_skills><skill><name>pdf</name><description>Fill PDF forms</description>"
        "</skill></available_skills>"
    )
    span = SpanRecord(
        trace_id="1" * 32,
        span_id="3" * 16,
        parent_span_id="4" * 16,
        name="ChatOpenAI",
        start_unix_nano=1,
        end_unix_nano=2,
        attributes={
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": prompt,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Done.",
            "llm.finish_reason": "stop",
        },
    )
    (step,) = OpenInferenceRecogniser().recognise(span) or []
    assert [(c.name, c.description) for c in step.catalogue] == [("pdf", "Fill PDF forms")]
    assert step.text == "Done."
