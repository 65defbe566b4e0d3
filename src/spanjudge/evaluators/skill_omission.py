"""`skill_omission`: no skill was invoked; should one have been? (ARCHITECTURE.md section 5).

The blind spot of both reference systems. Judged only when no skill was invoked and a catalogue
was recorded; pass when going without a skill was right, fail when a catalogue skill fitted.
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
from spanjudge.reasons import NO_CATALOGUE, NO_REQUEST, NOT_APPLICABLE, SESSION_INCOMPLETE
from spanjudge.values import Target, Verdict, not_evaluated

NAME = reasons.SKILL_OMISSION


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillOmission:
    name: str = NAME

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], path: str, problems: list[str]
    ) -> SkillOmission:
        unknown_options(options, (), path, problems)
        return cls()

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        judge = judge_of(ctx.judge)
        trajectory = ctx.trajectory
        if trajectory.skill_loads:
            names = ", ".join(dict.fromkeys(load.skill for load in trajectory.skill_loads))
            return [
                fixed_not_evaluated(
                    NAME,
                    NOT_APPLICABLE,
                    f"a skill was invoked ({names}); skill_selection judges that choice",
                    judge.name,
                )
            ]
        if not trajectory.catalogue:
            return [
                fixed_not_evaluated(
                    NAME,
                    NO_CATALOGUE,
                    "no skill catalogue was recorded (no <available_skills> block or "
                    "equivalent), so there is nothing the agent could have chosen from",
                    judge.name,
                )
            ]
        if not trajectory.complete:
            return [
                not_evaluated(
                    NAME,
                    SESSION_INCOMPLETE,
                    f"no skill invoked so far, but the session was cut short "
                    f"({trajectory.close_reason}) and may still invoke one",
                    judge=judge.name,
                )
            ]
        last = trajectory.turns[-1].index if trajectory.turns else 0
        request, prior = requests_up_to(trajectory, last)
        if not request:
            return [
                not_evaluated(
                    NAME, NO_REQUEST, "no user request was recorded to judge", judge=judge.name
                )
            ]
        # All user requests count: a skill may have fitted any turn of the session.
        answer = ask(
            judge,
            JudgeRequest(
                kind="skill_omission",
                request=request,
                prior_context=prior,
                catalogue=trajectory.catalogue,
                steps=trajectory.steps,
                final_answer=trajectory.final_answer,
            ),
        )
        target = Target(turn=last if trajectory.turns else None)
        if isinstance(answer, JudgeError):
            return [error_verdict(NAME, judge, answer, target, "skill omission")]
        should = answer.rating == "yes"
        catalogue = ", ".join(e.name for e in trajectory.catalogue)
        if should:
            which = f" ({answer.skill})" if answer.skill else ""
            explanation = (
                f"no skill was invoked but one should have been{which}: {answer.rationale}"
            )
        else:
            explanation = f"no skill was invoked and none was needed: {answer.rationale}"
        return [
            Verdict(
                evaluator=NAME,
                outcome="fail" if should else "pass",
                score=0.0 if should else 1.0,
                label="omitted" if should else "not_needed",
                explanation=f"{explanation} (catalogue: {catalogue})",
                target=Target(skill=answer.skill, turn=target.turn),
                judge=judge.name,
                details=dict(answer.details) or None,
            )
        ]
