"""`skill_loaded`: pass only with a loaded load of that name; honest about what it cannot judge."""

from __future__ import annotations

import dataclasses

from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.skill_loaded import SkillLoaded
from spanjudge.trajectory.assemble import SessionMeta, assemble
from spanjudge.trajectory.steps import Step
from spanjudge.values import Expectation
from tests.support.steps import spans_for, turn


def load(n: int, skill: str, status: str, error: str | None = None) -> Step:
    return Step(
        kind="skill_load",
        name="skills",
        span_id=format(n, "016x"),
        trace_id=format(1, "032x"),
        parent_span_id=format(1, "016x"),
        start_unix_nano=n * 10,
        skill=skill,
        skill_status=status,
        error=error,
    )  # type: ignore[arg-type]


def verdicts(
    steps: list[Step], expected: tuple[str, ...], complete: bool = True, answer: bool = True
):  # type: ignore[no-untyped-def]
    meta = SessionMeta(
        session_id="s",
        key_source="session.id",
        complete=complete,
        close_reason="end_of_input" if complete else "shutdown",
    )
    t = assemble(meta, spans_for(steps), steps)
    if answer:
        t = dataclasses.replace(t, final_answer="Total is 42.")
    return SkillLoaded().evaluate(
        EvaluationContext(trajectory=t, expectation=Expectation(skills=expected))
    )


def test_no_expectation_is_not_evaluated_without_score():
    [v] = verdicts([turn(1, "go")], ())
    assert v.outcome == "not_evaluated" and v.reason == "no_expectation" and v.score is None


def test_loaded_passes_and_absent_fails_despite_fluent_answer():
    out = verdicts(
        [turn(1, "go"), load(2, "csv-report", "loaded")], ("csv-report", "release-notes")
    )
    assert [(v.target.skill, v.outcome) for v in out] == [
        ("csv-report", "pass"),
        ("release-notes", "fail"),
    ]
    assert (
        out[1].label == "not_loaded"
        and "although the agent gave a final answer" in out[1].explanation
    )
    assert "loaded instead: csv-report" in out[1].explanation


def test_failed_and_unresolved_loads_fail_and_say_which():
    out = verdicts(
        [turn(1, "go"), load(2, "a", "failed", "Skill 'a' not found"), load(3, "b", "unresolved")],
        ("a", "b"),
    )
    assert [(v.outcome, v.label) for v in out] == [("fail", "load_failed"), ("fail", "unresolved")]
    assert "Skill 'a' not found" in out[0].explanation
    assert out[0].evidence == (format(2, "016x"),)


def test_failed_then_loaded_passes():
    [v] = verdicts([turn(1, "go"), load(2, "a", "failed"), load(3, "A ", "loaded")], ("a",))
    assert v.outcome == "pass" and "1 failed attempt" in v.explanation


def test_incomplete_session_without_the_load_or_an_answer_is_not_evaluated():
    [v] = verdicts([turn(1, "go")], ("a",), complete=False, answer=False)
    assert v.outcome == "not_evaluated" and v.reason == "session_incomplete" and v.score is None


def test_incomplete_session_that_answered_without_the_skill_fails():
    # shutdown/flush mark open sessions incomplete; an answer given without the skill still fails
    [v] = verdicts([turn(1, "go")], ("a",), complete=False, answer=True)
    assert v.outcome == "fail" and v.label == "not_loaded"
    assert "cut short: shutdown" in v.explanation
