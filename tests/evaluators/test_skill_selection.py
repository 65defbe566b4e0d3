"""`skill_selection`: one verdict per invocation, failed loads included."""

from __future__ import annotations

from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.skill_selection import SkillSelection
from spanjudge.judges.base import Judgement, JudgeRequest
from spanjudge.values import Expectation
from tests.judges.builders import CSV_REQUEST, RELEASE_REQUEST, Load, NextTurn, Tool, trajectory


def run(*args: object, judge: object = None, **kwargs: object) -> list:  # type: ignore[type-arg]
    traj = trajectory(*args, **kwargs)  # type: ignore[arg-type]
    return SkillSelection().evaluate(
        EvaluationContext(trajectory=traj, expectation=Expectation(), judge=judge)
    )


def test_no_invocation_is_not_evaluated() -> None:
    [verdict] = run(CSV_REQUEST, Tool("read_csv"))
    assert (verdict.outcome, verdict.reason, verdict.score) == (
        "not_evaluated",
        "no_skill_invocation",
        None,
    )


def test_right_skill_passes_wrong_skill_fails_failed_load_still_judged() -> None:
    verdicts = run(
        RELEASE_REQUEST,
        Load("release-notes", status="failed", error="Skill 'release-notes' not found"),
        Load("incident-triage"),
    )
    assert [(v.target.skill, v.outcome, v.score, v.label) for v in verdicts] == [
        ("release-notes", "pass", 1.0, "yes"),
        ("incident-triage", "fail", 0.0, "no"),
    ]
    assert verdicts[0].judge == "heuristic"
    assert "(the load failed)" in verdicts[0].explanation
    assert verdicts[1].target.span_id == "span-2"


def test_each_invocation_is_judged_against_its_own_turn() -> None:
    verdicts = run(
        CSV_REQUEST,
        Load("csv-report"),
        NextTurn(RELEASE_REQUEST),
        Load("release-notes"),
    )
    assert [(v.target.skill, v.target.turn, v.outcome) for v in verdicts] == [
        ("csv-report", 0, "pass"),
        ("release-notes", 1, "pass"),
    ]


class Recording:
    name = "llm:fake"

    def __init__(self) -> None:
        self.seen: list[JudgeRequest] = []

    def judge(self, request: JudgeRequest) -> Judgement:
        self.seen.append(request)
        return Judgement(rating="yes", score=1.0, rationale="fine", judge=self.name)


def test_the_configured_judge_gets_request_prior_context_and_catalogue() -> None:
    judge = Recording()
    [first] = run(CSV_REQUEST, NextTurn(RELEASE_REQUEST), Load("release-notes"), judge=judge)
    seen = judge.seen[0]
    assert seen.request == RELEASE_REQUEST
    assert seen.prior_context == (CSV_REQUEST,)
    assert [e.name for e in seen.catalogue] == ["csv-report", "release-notes", "incident-triage"]
    assert seen.steps[-1].kind == "skill_load"
    assert first.judge == "llm:fake" and first.outcome == "pass"
