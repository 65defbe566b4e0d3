"""`instruction_following`: five levels per loaded skill, threshold, not_evaluated reasons."""

from __future__ import annotations

import pytest

from spanjudge.errors import JudgeError
from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.instruction_following import InstructionFollowing
from spanjudge.judges.base import Judgement, JudgeRequest
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import Expectation, Verdict
from tests.judges.builders import (
    CSV_FOLLOWED,
    CSV_REORDERED_SKIPPED,
    CSV_REQUEST,
    CSV_SKIPPED,
    Load,
    Tool,
    trajectory,
)


def run(
    traj: Trajectory,
    *,
    threshold: float | None = None,
    expected: tuple[str, ...] = (),
    judge: object = None,
) -> list[Verdict]:
    problems: list[str] = []
    options = {} if threshold is None else {"pass_threshold": threshold}
    evaluator = InstructionFollowing.from_options(options, "evaluators.x", problems)
    assert problems == []
    ctx = EvaluationContext(trajectory=traj, expectation=Expectation(skills=expected), judge=judge)
    return evaluator.evaluate(ctx)


@pytest.mark.parametrize(
    ("events", "label", "score", "outcome"),
    [
        (CSV_FOLLOWED, "fully", 1.0, "pass"),
        (CSV_SKIPPED, "mostly", 0.75, "pass"),
        (CSV_REORDERED_SKIPPED, "minimally", 0.25, "fail"),
    ],
)
def test_levels_and_default_threshold(
    events: tuple,
    label: str,
    score: float,
    outcome: str,  # type: ignore[type-arg]
) -> None:
    [verdict] = run(trajectory(CSV_REQUEST, *events))
    assert (verdict.label, verdict.score, verdict.outcome) == (label, score, outcome)
    assert verdict.judge == "heuristic"
    assert verdict.target.skill == "csv-report"


def test_threshold_is_configurable() -> None:
    [verdict] = run(trajectory(CSV_REQUEST, *CSV_SKIPPED), threshold=1.0)
    assert (verdict.label, verdict.outcome) == ("mostly", "fail")


def test_bad_threshold_is_a_config_problem() -> None:
    problems: list[str] = []
    InstructionFollowing.from_options({"pass_threshold": 2, "x": 1}, "evaluators.if", problems)
    assert problems == [
        "evaluators.if.x: unknown option (allowed: pass_threshold)",
        "evaluators.if.pass_threshold: expected a number from 0 to 1, got 2",
    ]


def test_not_invoked_load_failed_and_body_not_recorded() -> None:
    [nothing] = run(trajectory(CSV_REQUEST, Tool("read_csv")))
    assert (nothing.outcome, nothing.reason) == ("not_evaluated", "not_invoked")
    [failed] = run(trajectory(CSV_REQUEST, Load("csv-reports", status="failed", error="not found")))
    assert (failed.reason, failed.target.skill) == ("load_failed", "csv-reports")
    [no_body] = run(trajectory(CSV_REQUEST, Load("csv-report", with_body=False)))
    assert (no_body.reason, no_body.score) == ("body_not_recorded", None)


def test_expected_skill_never_invoked_is_not_invoked_next_to_the_loaded_one() -> None:
    verdicts = run(trajectory(CSV_REQUEST, *CSV_FOLLOWED), expected=("csv-report", "release-notes"))
    assert [(v.target.skill, v.outcome, v.reason) for v in verdicts] == [
        ("csv-report", "pass", None),
        ("release-notes", "not_evaluated", "not_invoked"),
    ]


def test_failed_then_successful_load_is_one_invocation() -> None:
    traj = trajectory(
        CSV_REQUEST, Load("csv-report", status="failed", error="timeout"), *CSV_FOLLOWED
    )
    [verdict] = run(traj)
    assert (verdict.label, verdict.target.span_id) == ("fully", "span-2")


class Broken:
    name = "llm:broken"

    def judge(self, request: JudgeRequest) -> Judgement:
        raise JudgeError("reply was not JSON", error_type="judge_unparseable")


def test_judge_failure_is_not_evaluated_never_zero() -> None:
    [verdict] = run(trajectory(CSV_REQUEST, *CSV_FOLLOWED), judge=Broken())
    assert (verdict.outcome, verdict.reason, verdict.score) == (
        "not_evaluated",
        "judge_error",
        None,
    )
    assert (verdict.error_type, verdict.judge) == ("judge_unparseable", "llm:broken")
