"""`skill_selection`: was each invoked skill the right one for the request?
(ARCHITECTURE.md section 5).

One verdict per invocation, failed loads included: choosing a skill is a decision whether or not
the load then worked. Yes = pass (1.0), No = fail (0.0).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spanjudge import reasons
from spanjudge.errors import JudgeError
from spanjudge.evaluators.ask import ask, error_verdict, judge_of
from spanjudge.evaluators.base import EvaluationContext, fixed_not_evaluated, unknown_options
from spanjudge.judges.base import JudgeRequest, requests_up_to
from spanjudge.reasons import NO_SKILL_INVOCATION
from spanjudge.trajectory.model import SkillLoad, Trajectory
from spanjudge.values import Target, Verdict

NAME = reasons.SKILL_SELECTION


def _steps_until(trajectory: Trajectory, load: SkillLoad) -> tuple[Any, ...]:
    """The session up to and including the load: what the agent knew when it chose."""
    for i, step in enumerate(trajectory.steps):
        if step.kind == "skill_load" and step.span_id == load.span_id:
            return trajectory.steps[: i + 1]
    return trajectory.steps


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillSelection:
    name: str = NAME

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], path: str, problems: list[str]
    ) -> SkillSelection:
        unknown_options(options, (), path, problems)
        return cls()

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        trajectory = ctx.trajectory
        if not trajectory.skill_loads:
            return [
                fixed_not_evaluated(
                    NAME,
                    NO_SKILL_INVOCATION,
                    "no skill was invoked in this session; see skill_omission for whether one "
                    "should have been",
                    judge_of(ctx.judge).name,
                )
            ]
        return [self._one(load, ctx) for load in trajectory.skill_loads]

    def _one(self, load: SkillLoad, ctx: EvaluationContext) -> Verdict:
        judge = judge_of(ctx.judge)
        trajectory = ctx.trajectory
        request, prior = requests_up_to(trajectory, load.turn)
        target = Target(
            skill=load.skill, span_id=load.span_id, tool_call_id=load.tool_call_id, turn=load.turn
        )
        answer = ask(
            judge,
            JudgeRequest(
                kind="skill_selection",
                request=request,
                prior_context=prior,
                catalogue=trajectory.catalogue,
                skill=load.skill,
                skill_status=load.status,
                skill_span_id=load.span_id,
                skill_body=load.body,
                steps=_steps_until(trajectory, load),
            ),
        )
        what = f"selection of skill {load.skill!r}"
        if isinstance(answer, JudgeError):
            return error_verdict(NAME, judge, answer, target, what)
        failed = "" if load.status == "loaded" else f" (the load {load.status})"
        return Verdict(
            evaluator=NAME,
            outcome="pass" if answer.rating == "yes" else "fail",
            score=answer.score,
            label=answer.rating,
            explanation=f"{what}{failed}: {answer.rating}: {answer.rationale}",
            target=target,
            judge=judge.name,
            evidence=(load.span_id,),
            details=dict(answer.details) or None,
        )
