"""`instruction_following`: did the session follow each loaded skill's SKILL.md?
(ARCHITECTURE.md section 5).

One verdict per loaded skill on five levels: fully 1.0, mostly 0.75, partially 0.5, minimally
0.25, not followed 0.0; pass when the score reaches ``pass_threshold`` (default 0.75).
``not_evaluated``: ``not_invoked`` (nothing loaded, or an expected skill never invoked),
``load_failed`` (every attempt failed) or ``body_not_recorded`` (spans carry no SKILL.md body).
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
from spanjudge.reasons import BODY_NOT_RECORDED, LOAD_FAILED, LOAD_UNRESOLVED, NOT_INVOKED
from spanjudge.trajectory.model import SkillLoad
from spanjudge.values import Target, Verdict, not_evaluated

NAME = reasons.INSTRUCTION_FOLLOWING
DEFAULT_PASS_THRESHOLD = 0.75


def _key(name: str) -> str:
    return name.strip().lower()


@dataclass(frozen=True, slots=True, kw_only=True)
class InstructionFollowing:
    name: str = NAME
    pass_threshold: float = DEFAULT_PASS_THRESHOLD

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], path: str, problems: list[str]
    ) -> InstructionFollowing:
        unknown_options(options, ("pass_threshold",), path, problems)
        threshold = options.get("pass_threshold", DEFAULT_PASS_THRESHOLD)
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, (int, float))
            or not 0.0 <= threshold <= 1.0
        ):
            problems.append(
                f"{path}.pass_threshold: expected a number from 0 to 1, got {threshold!r}"
            )
            threshold = DEFAULT_PASS_THRESHOLD
        return cls(pass_threshold=float(threshold))

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        judge = judge_of(ctx.judge)
        trajectory = ctx.trajectory
        # Group attempts by skill: a failed load followed by a successful one is one invocation.
        by_skill: dict[str, list[SkillLoad]] = {}
        for load in trajectory.skill_loads:
            by_skill.setdefault(_key(load.skill), []).append(load)
        verdicts = [self._skill(loads, ctx) for loads in by_skill.values()]
        for skill in ctx.expectation.skills:
            if _key(skill) not in by_skill:
                verdicts.append(
                    not_evaluated(
                        NAME,
                        NOT_INVOKED,
                        f"expected skill {skill!r} was never invoked, so there are no "
                        "instructions to follow (skill_loaded reports the miss)",
                        target=Target(skill=skill),
                        judge=judge.name,
                    )
                )
        if not verdicts:
            verdicts.append(
                fixed_not_evaluated(
                    NAME, NOT_INVOKED, "no skill was invoked in this session", judge.name
                )
            )
        return verdicts

    def _skill(self, loads: list[SkillLoad], ctx: EvaluationContext) -> Verdict:
        judge = judge_of(ctx.judge)
        loaded = [load for load in loads if load.status == "loaded"]
        if not loaded:
            last = loads[-1]
            return not_evaluated(
                NAME,
                LOAD_UNRESOLVED if last.status == "unresolved" else LOAD_FAILED,
                f"skill {last.skill!r} never loaded ({len(loads)} attempt(s), last "
                f"{last.status}: {last.error or 'no error recorded'}), so it had no instructions",
                target=Target(skill=last.skill, span_id=last.span_id, turn=last.turn),
                judge=judge.name,
                evidence=tuple(load.span_id for load in loads),
            )
        load = next((x for x in loaded if x.body_recorded), loaded[0])
        target = Target(
            skill=load.skill, span_id=load.span_id, tool_call_id=load.tool_call_id, turn=load.turn
        )
        if not load.body_recorded:
            return not_evaluated(
                NAME,
                BODY_NOT_RECORDED,
                f"skill {load.skill!r} was loaded but its SKILL.md body is not in the spans "
                "(enable content capture in the instrumentation to judge it)",
                target=target,
                judge=judge.name,
                evidence=(load.span_id,),
            )
        request, prior = requests_up_to(ctx.trajectory, load.turn)
        answer = ask(
            judge,
            JudgeRequest(
                kind="instruction_following",
                request=request,
                prior_context=prior,
                catalogue=ctx.trajectory.catalogue,
                skill=load.skill,
                skill_status=load.status,
                skill_span_id=load.span_id,
                skill_body=load.body,
                steps=ctx.trajectory.steps,
                final_answer=ctx.trajectory.final_answer,
            ),
        )
        what = f"instructions of skill {load.skill!r}"
        if isinstance(answer, JudgeError):
            return error_verdict(NAME, judge, answer, target, what)
        passed = answer.score >= self.pass_threshold
        return Verdict(
            evaluator=NAME,
            outcome="pass" if passed else "fail",
            score=answer.score,
            label=answer.rating,
            explanation=(
                f"{what}: {answer.rating} ({answer.score:g}; pass at "
                f">= {self.pass_threshold:g}): {answer.rationale}"
            ),
            target=target,
            judge=judge.name,
            evidence=tuple(dict.fromkeys((load.span_id, *answer.evidence))),
            details=dict(answer.details) or None,
        )
