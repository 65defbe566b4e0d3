"""The Claude Code preset against traces from the real CLI (fixtures/claude_code, two modes)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from spanjudge import semconv
from spanjudge.recognition.claude_code import ClaudeCodeRecogniser, parse_skill_listing, sections
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step
from tests.conftest import FIXTURES, span

DIR = FIXTURES / "claude_code"
SCENARIOS: dict[str, Any] = json.loads((DIR / "scenarios.json").read_text())
SESSIONS = SCENARIOS["sessions"]


def _spans_by_session(file: str) -> dict[str, list[SpanRecord]]:
    out: dict[str, list[SpanRecord]] = defaultdict(list)
    for chunk in read_input(str(DIR / file)):
        assert not chunk.problems
        for record in chunk.spans:
            out[str(record.attr(semconv.SESSION_ID))].append(record)
    return out


SPANS = {file: _spans_by_session(file) for file in {s["file"] for s in SESSIONS}}


def _steps(session: dict[str, Any]) -> tuple[list[SpanRecord], list[Step]]:
    spans = SPANS[session["file"]][session["session_id"]]
    recogniser = ClaudeCodeRecogniser()
    steps: list[Step] = []
    for record in spans:
        claimed = recogniser.recognise(record)
        assert claimed is not None, f"{record.name} not claimed"
        steps.extend(claimed)
    steps = recogniser.finalise(steps, spans)
    return spans, sorted(steps, key=lambda s: (s.start_unix_nano, s.seq))


def _skill_body(name: str) -> str:
    text = (FIXTURES / "skills" / name / "SKILL.md").read_text()
    return text.split("---", 2)[2].strip()  # body after the frontmatter


def _retries(steps: list[Step]) -> int:
    last_failed: dict[str, bool] = {}
    count = 0
    for step in steps:
        if step.kind in ("tool_call", "skill_load"):
            count += last_failed.get(step.name, False)
            last_failed[step.name] = step.failed
    return count


def _ids(session: dict[str, Any]) -> str:
    return f"{session['mode']}-{session['scenario']}"


def test_every_recorded_session_is_in_the_files() -> None:
    for file, by_session in SPANS.items():
        listed = {s["session_id"] for s in SESSIONS if s["file"] == file}
        assert set(by_session) == listed


@pytest.mark.parametrize("session", SESSIONS, ids=_ids)
def test_counts_match_the_scenario_record(session: dict[str, Any]) -> None:
    spans, steps = _steps(session)
    kinds = [s.kind for s in steps]
    assert kinds.count("agent_turn") == session["turns"]
    assert len({s.trace_id for s in spans}) == session["traces"]
    assert kinds.count("model_call") == session["model_calls"]
    assert kinds.count("tool_call") == session["tool_calls"]
    assert sum(s.failed for s in steps if s.kind == "tool_call") == session["errors"]
    calls = [s for s in steps if s.kind == "model_call"]
    assert sum(s.input_tokens or 0 for s in calls) == session["input_tokens"]
    assert sum(s.output_tokens or 0 for s in calls) == session["output_tokens"]
    first_turn = next(s for s in steps if s.kind == "agent_turn")
    assert first_turn.text == session["request"]


@pytest.mark.parametrize("session", SESSIONS, ids=_ids)
def test_skill_loads(session: dict[str, Any]) -> None:
    _, steps = _steps(session)
    loads = [{"skill": s.skill, "status": s.skill_status} for s in steps if s.kind == "skill_load"]
    if session["mode"] == "detailed":
        assert loads == session["skill_loads"]
        for step in steps:
            if step.kind == "skill_load" and step.skill_status == "loaded":
                assert step.skill_body == _skill_body(str(step.skill))
        assert _retries(steps) == session["retries"]
    else:
        # A Skill call for an unknown skill is rejected before execution and leaves no span
        # in default tracing: only the loads that ran are visible there.
        assert loads == [x for x in session["skill_loads"] if x["status"] == "loaded"]
        assert all(s.skill_body is None for s in steps)


@pytest.mark.parametrize("session", SESSIONS, ids=_ids)
def test_final_answer(session: dict[str, Any]) -> None:
    _, steps = _steps(session)
    answers = [s for s in steps if s.kind == "final_answer"]
    if session["mode"] == "detailed":
        assert len(answers) == session["turns"]
        assert answers[-1].text == session["final_answer"]
    else:
        assert answers == []  # default tracing does not record response text


@pytest.mark.parametrize("session", SESSIONS, ids=_ids)
def test_expected_skills_attribute(session: dict[str, Any]) -> None:
    spans, _ = _steps(session)
    values = {s.attr(semconv.SJ_EXPECTED_SKILLS) for s in spans}
    if session["expected_via"] == "attribute":
        assert values == {",".join(session["expected_skills"])}
    else:
        assert values == {None}


def test_failed_tool_call_takes_the_execution_outcome() -> None:
    session = next(
        s for s in SESSIONS if s["scenario"] == "tool_error_retry" and s["mode"] == "default"
    )
    _, steps = _steps(session)
    writes = [s for s in steps if s.name == "mcp__scripted__write_file"]
    assert [w.status for w in writes] == ["error", "unset"]
    assert "permission denied" in str(writes[0].error)
    assert writes[1].error is None


def test_rejected_skill_becomes_a_failed_load_in_detailed_mode() -> None:
    session = next(
        s
        for s in SESSIONS
        if s["scenario"] == "load_failed_error_status" and s["mode"] == "detailed"
    )
    _, steps = _steps(session)
    (load,) = [s for s in steps if s.kind == "skill_load"]
    assert (load.skill, load.skill_status) == ("csv-reports", "failed")
    assert "Unknown skill: csv-reports" in str(load.error)
    assert steps.index(load) < [s.kind for s in steps].index("final_answer")


def test_catalogue_from_the_system_reminder() -> None:
    session = next(s for s in SESSIONS if s["mode"] == "detailed")
    _, steps = _steps(session)
    catalogue = {c.name: c.description for s in steps for c in s.catalogue}
    for name in ("csv-report", "incident-triage", "release-notes"):
        frontmatter = (FIXTURES / "skills" / name / "SKILL.md").read_text().split("---")[1]
        description = frontmatter.split("description:", 1)[1].strip()
        assert catalogue[name] == description


def test_other_spans() -> None:
    recogniser = ClaudeCodeRecogniser()
    assert recogniser.recognise(span(1, name="chat gpt-4o")) is None
    assert recogniser.recognise(span(2, name="claude_code.tool.blocked_on_user")) == []
    assert recogniser.recognise(span(3, name="claude_code.hook")) == []


def test_read_of_a_skill_file_is_a_skill_load() -> None:
    read = span(
        4,
        name="claude_code.tool",
        attrs={
            "tool_name": "Read",
            "tool_input": '[TOOL INPUT: Read]\n{"file_path": "/s/pdf/SKILL.md"}',
        },
    )
    (step,) = ClaudeCodeRecogniser().recognise(read) or []
    assert (step.kind, step.skill, step.skill_status) == ("skill_load", "pdf", "unresolved")


def test_sections_keep_a_markdown_rule_inside_a_body() -> None:
    text = (
        "[TOOL RESULT: t1]\nok\n\n---\n\n"
        "[USER]\nBase directory for this skill: /x/a\n\nA\n\n---\n\nB"
    )
    assert sections(text) == [
        ("TOOL RESULT: t1", "ok"),
        ("USER", "Base directory for this skill: /x/a\n\nA\n\n---\n\nB"),
    ]


def test_listing_needs_its_heading() -> None:
    assert parse_skill_listing("- csv-report: not a skill list") == ()


def test_fixture_directory_is_complete() -> None:
    names = {p.name for p in DIR.iterdir()}
    assert {"scenarios.json", "expectations.yaml", "claude_code.jsonl"} <= names
    assert Path(SCENARIOS["generator"]).name == "claude_code_fixtures.py"
