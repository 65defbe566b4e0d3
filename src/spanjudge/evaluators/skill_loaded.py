"""`skill_loaded`: was each expected skill actually loaded? (ARCHITECTURE.md section 5)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spanjudge import reasons
from spanjudge.evaluators.base import EvaluationContext, fixed_not_evaluated, unknown_options
from spanjudge.reasons import NO_EXPECTATION, SESSION_INCOMPLETE
from spanjudge.trajectory.model import SkillLoad
from spanjudge.values import Target, Verdict, not_evaluated, skill_key

NAME = reasons.SKILL_LOADED


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillLoaded:
    name: str = NAME

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], path: str, problems: list[str]
    ) -> SkillLoaded:
        unknown_options(options, (), path, problems)
        return cls()

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        expected = ctx.expectation.skills
        trajectory = ctx.trajectory
        if not expected:
            return [
                fixed_not_evaluated(
                    NAME,
                    NO_EXPECTATION,
                    "no expected skills for this session (expectations file, config rules or "
                    "spanjudge.expected_skills); nothing to check",
                )
            ]
        return [self._one(skill, trajectory.skill_loads, ctx) for skill in expected]

    def _one(self, skill: str, loads: tuple[SkillLoad, ...], ctx: EvaluationContext) -> Verdict:
        mine = [load for load in loads if skill_key(load.skill) == skill_key(skill)]
        loaded = [load for load in mine if load.status == "loaded"]
        evidence = tuple(load.span_id for load in mine)
        if loaded:
            first = loaded[0]
            tries = f" after {len(mine) - len(loaded)} failed attempt(s)" if len(mine) > 1 else ""
            return Verdict(
                evaluator=NAME,
                outcome="pass",
                score=1.0,
                label="loaded",
                explanation=f"required skill {skill!r} was loaded in turn {first.turn}{tries}",
                target=Target(skill=skill, span_id=first.span_id, turn=first.turn),
                evidence=evidence,
            )
        others = sorted({load.skill for load in loads if load.status == "loaded"})
        instead = f"; loaded instead: {', '.join(others)}" if others else ""
        answered = " although the agent gave a final answer" if ctx.trajectory.final_answer else ""
        if mine and all(x.status == "unresolved" and x.error for x in mine):
            # every attempt's result was hidden (OpenInference's hide_outputs): loaded or not,
            # the trace cannot tell, and a verdict either way could be wrong
            return not_evaluated(
                NAME,
                reasons.LOAD_UNRESOLVED,
                f"required skill {skill!r}: {mine[-1].error}; whether it loaded is unknown",
                target=Target(skill=skill, span_id=mine[-1].span_id, turn=mine[-1].turn),
            )
        if mine:
            last = mine[-1]
            if last.status == "failed":
                label = "load_failed"
                error = last.error or "unknown"
                why = f"every load attempt failed ({len(mine)}); last error: {error}"
            else:
                label = "unresolved"
                why = "a load was attempted but no result was recorded"
            return Verdict(
                evaluator=NAME,
                outcome="fail",
                score=0.0,
                label=label,
                explanation=f"required skill {skill!r} was not loaded: {why}{instead}",
                target=Target(skill=skill, span_id=last.span_id, turn=last.turn),
                evidence=evidence,
            )
        cut_short = ""
        if not ctx.trajectory.complete:
            if ctx.trajectory.final_answer is not None:
                # The agent answered without the skill: that is the failure, even if the
                # session was closed early (shutdown, eviction) and might have gone on.
                cut_short = f" (the session was cut short: {ctx.trajectory.close_reason})"
            else:
                return not_evaluated(
                    NAME,
                    SESSION_INCOMPLETE,
                    f"required skill {skill!r} not loaded so far and no answer given yet: the "
                    f"session was cut short ({ctx.trajectory.close_reason}) and may still load it",
                    target=Target(skill=skill),
                )
        return Verdict(
            evaluator=NAME,
            outcome="fail",
            score=0.0,
            label="not_loaded",
            explanation=f"required skill {skill!r} was never loaded{answered}{instead}{cut_short}",
            target=Target(skill=skill),
        )
