"""Acceptance: every fixture session's report matches the scenario's own record of what it did.

The fixtures were emitted by real framework instrumentation driven by scripted models
(`fixtures/generate/*`); each generator wrote `scenarios.json` from its own tool-call log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from spanjudge.engine import Engine
from spanjudge.offline import run_offline
from tests.conftest import FIXTURES, load_schema
from tests.support.fixture_reports import (
    RECORDS,
    assert_matches_record,
    assert_steps_match_call_log,
    cases,
    report,
    session_report,
)


@pytest.mark.parametrize(("directory", "record"), cases("record"))
def test_session_matches_scenario_record(directory: str, record: dict[str, Any]) -> None:
    assert_matches_record(session_report(directory, record["session_id"]), record)


@pytest.mark.parametrize(("directory", "record"), cases("skill_loaded"))
def test_skill_loaded_verdicts_are_honest(directory: str, record: dict[str, Any]) -> None:
    got = session_report(directory, record["session_id"])
    verdicts = [v for v in got["verdicts"] if v["evaluator"] == "skill_loaded"]
    loaded = {x["skill"] for x in record["skill_loads"] if x["status"] == "loaded"}
    if not record["expected_skills"]:
        assert [v["outcome"] for v in verdicts] == ["not_evaluated"]
        assert verdicts[0]["reason"] == "no_expectation"
    else:
        by_skill = {v["target"]["skill"]: v["outcome"] for v in verdicts}
        for skill in record["expected_skills"]:
            # a failed or missing required skill never passes
            assert by_skill[skill] == ("pass" if skill in loaded else "fail"), skill
    for verdict in got["verdicts"]:
        if verdict["outcome"] == "not_evaluated":
            assert verdict["score"] is None and verdict["reason"]


@pytest.mark.parametrize("directory", sorted({d for d, _ in RECORDS}))
def test_fixture_reports_are_valid_against_schema(directory: str) -> None:
    jsonschema.validate(report(directory), load_schema())


@pytest.mark.parametrize(("directory", "record"), cases("steps"))
def test_steps_match_the_generators_call_log(directory: str, record: dict[str, Any]) -> None:
    assert_steps_match_call_log(session_report(directory, record["session_id"]), record)


@pytest.mark.usefixtures("contained_errors")  # fails on purpose
def test_a_recogniser_that_raises_costs_one_span_not_the_session(caplog) -> None:  # type: ignore[no-untyped-def]
    from spanjudge.recognition.registry import RecogniserRegistry
    from spanjudge.spans.files import read_input

    class Broken:
        name = "broken"

        def recognise(self, span):  # type: ignore[no-untyped-def]
            if span.name.startswith("execute_tool"):
                raise RuntimeError("odd span")
            return None

    registry = RecogniserRegistry([Broken(), *RecogniserRegistry.default().recognisers])
    spans = [s for c in read_input(str(FIXTURES / "adk" / "adk.jsonl")) for s in c.spans][:40]
    steps = registry.recognise_session(spans)
    assert steps and not any(s.kind in ("tool_call", "skill_load") for s in steps)
    assert registry.errors == sum(1 for s in spans if s.name.startswith("execute_tool")) > 0
    assert sum("recognition preset broken failed" in r.getMessage() for r in caplog.records) == 1


def _skill_text(name: str) -> str | None:
    path = FIXTURES / "skills" / name / "SKILL.md"
    if not path.exists():
        return None
    return " ".join(path.read_text(encoding="utf-8").split("---", 2)[-1].split())


class _Loads:
    """A writer that keeps each session's skill loads, bodies included."""

    def __init__(self) -> None:
        self.loads: list[tuple[str, Any]] = []

    def begin(self) -> None: ...

    def session(self, result: Any) -> None:
        self.loads.extend((result.trajectory.session_id, x) for x in result.trajectory.skill_loads)

    def end(self, summary: Any, input_report: Any) -> None: ...


@pytest.mark.parametrize("directory", sorted({d for d, _ in RECORDS}))
def test_skill_bodies_say_where_they_came_from_and_are_the_skills_own_text(directory: str) -> None:
    """A loaded skill's body recorded in the trace is reported as from the trace and is that
    skill's SKILL.md text; a load without a body has no source. The SKILL.md files are the
    ground truth, and these fixtures configure no skills directory."""
    writer = _Loads()
    run_offline(sorted(str(p) for p in Path(directory).glob("*.jsonl")), Engine(), writer)
    for session_id, load in writer.loads:
        if load.status != "loaded" or not load.body:
            assert load.body_source is None, (session_id, load.skill)
            continue
        assert load.body_source == "trace", (session_id, load.skill)
        truth = _skill_text(load.skill)
        if truth is not None:
            assert truth[:60] in " ".join(load.body.split()), (session_id, load.skill)
    assert all(load.body_source != "directory" for _, load in writer.loads)
