"""`tool_selection`: was each tool call the right tool for the request and its context?

Opt-in (``evaluators: {tool_selection: {}}``): one verdict per tool call, targeted at the call's
span and ``tool_call_id``; pass = right tool (judge "yes"). Skill loads are not tool calls here
(`skill_selection` judges them). ``not_evaluated``: ``no_tool_calls`` (the session made none),
``no_request`` (no user request recorded to judge a call against).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from spanjudge import reasons
from spanjudge.errors import JudgeError
from spanjudge.evaluators.ask import ask, error_verdict, judge_of
from spanjudge.evaluators.base import EvaluationContext, unknown_options
from spanjudge.judges.base import JudgeRequest, requests_up_to
from spanjudge.values import Target, Verdict, not_evaluated

if TYPE_CHECKING:
    from spanjudge.judges.base import JudgeKind

NAME = reasons.TOOL_SELECTION


def judge_tool_calls(
    evaluator: str, kind: JudgeKind, ctx: EvaluationContext, labels: tuple[str, str]
) -> list[Verdict]:
    """One verdict per tool call of the session: ``labels`` = (label if yes, label if no)."""
    judge = judge_of(ctx.judge)
    trajectory = ctx.trajectory
    steps = trajectory.steps
    calls = [i for i, s in enumerate(steps) if s.kind == "tool_call"]
    if not calls:
        return [
            not_evaluated(
                evaluator,
                reasons.NO_TOOL_CALLS,
                "the session made no tool call to judge",
                judge=judge.name,
            )
        ]
    verdicts = []
    seen: dict[str, int] = {}
    for i in calls:
        call = steps[i]
        seen[call.name] = seen.get(call.name, 0) + 1
        request, prior = requests_up_to(trajectory, call.turn)
        target = Target(span_id=call.span_id, tool_call_id=call.tool_call_id, turn=call.turn)
        details = {"tool": call.name, "call": seen[call.name]}
        answer = ask(
            judge,
            JudgeRequest(
                kind=kind,
                request=request,
                prior_context=prior,
                catalogue=trajectory.catalogue,
                steps=steps[: i + 1],
                tool_call=call,
                tool_schemas=trajectory.tool_schemas,
            ),
        )
        what = f"{call.name} call {seen[call.name]}"
        if isinstance(answer, JudgeError):
            verdict = error_verdict(evaluator, judge, answer, target, what)
            verdicts.append(replace(verdict, details={**(verdict.details or {}), **details}))
            continue
        ok = answer.rating == "yes"
        verdicts.append(
            Verdict(
                evaluator=evaluator,
                outcome="pass" if ok else "fail",
                score=answer.score,
                label=labels[0] if ok else labels[1],
                explanation=f"{what}: {answer.rating}: {answer.rationale}",
                target=target,
                judge=judge.name,
                evidence=tuple(dict.fromkeys((call.span_id, *answer.evidence))),
                details={**details, **answer.details},
            )
        )
    return verdicts


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSelection:
    name: str = NAME

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], path: str, problems: list[str]
    ) -> ToolSelection:
        unknown_options(options, (), path, problems)
        return cls()

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        return judge_tool_calls(NAME, "tool_selection", ctx, ("right_tool", "wrong_tool"))
