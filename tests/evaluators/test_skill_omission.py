"""`skill_omission`: judged only when no skill was invoked and a catalogue is known."""

from __future__ import annotations

from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.skill_omission import SkillOmission
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import Expectation, Verdict
from tests.judges.builders import RELEASE_REQUEST, Answer, Load, Tool, trajectory


def run(traj: Trajectory) -> Verdict:
    [verdict] = SkillOmission().evaluate(
        EvaluationContext(trajectory=traj, expectation=Expectation())
    )
    return verdict


def test_skill_omitted_fails_and_names_the_skill() -> None:
    verdict = run(trajectory(RELEASE_REQUEST, Tool("list_pull_requests"), Answer("3 PRs")))
    assert (verdict.outcome, verdict.label, verdict.target.skill) == (
        "fail",
        "omitted",
        "release-notes",
    )
    assert verdict.judge == "heuristic"


def test_no_skill_needed_passes() -> None:
    verdict = run(trajectory("What's the weather in Lisbon?", Tool("get_weather"), Answer("Sunny")))
    assert (verdict.outcome, verdict.label, verdict.score) == ("pass", "not_needed", 1.0)


def test_not_applicable_when_a_skill_was_invoked() -> None:
    verdict = run(trajectory(RELEASE_REQUEST, Load("release-notes")))
    assert (verdict.outcome, verdict.reason) == ("not_evaluated", "not_applicable")


def test_no_catalogue_no_judgement() -> None:
    verdict = run(trajectory(RELEASE_REQUEST, Tool("list_pull_requests"), catalogue=()))
    assert (verdict.outcome, verdict.reason) == ("not_evaluated", "no_catalogue")


def test_incomplete_session_may_still_invoke_a_skill() -> None:
    verdict = run(trajectory(RELEASE_REQUEST, Tool("list_pull_requests"), complete=False))
    assert (verdict.outcome, verdict.reason) == ("not_evaluated", "session_incomplete")
