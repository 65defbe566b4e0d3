"""`outcome`: does the final answer meet the task's success condition? (ARCHITECTURE.md section 5).

The condition is, in order of precedence: rules from the session's expectations (``success``),
rules from this evaluator's options, or a judge comparing the answer with the expectation's
``reference_answer``. The rules' grammar is `spanjudge.conditions`, shared with the
expectations' ``success``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spanjudge import reasons
from spanjudge.conditions import CONDITION_KEYS, check_rules, validate_rules
from spanjudge.errors import JudgeError
from spanjudge.evaluators.ask import ask, error_verdict, judge_of
from spanjudge.evaluators.base import EvaluationContext, fixed_not_evaluated
from spanjudge.judges.base import JudgeRequest
from spanjudge.reasons import INVALID_CONDITION, NO_CONDITION, NO_FINAL_ANSWER, SESSION_INCOMPLETE
from spanjudge.trajectory.hidden import hidden
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import Target, Verdict, not_evaluated

NAME = reasons.OUTCOME


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    name: str = NAME
    rules: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], path: str, problems: list[str]) -> Outcome:
        validate_rules(options, path, problems)
        return cls(rules=dict(options))

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        trajectory = ctx.trajectory
        expectation = ctx.expectation
        rules = dict(expectation.success) if expectation.success else self.rules
        source = "the session's expectations" if expectation.success else "evaluator options"
        has_rules = any(k in rules for k in CONDITION_KEYS)
        judge = judge_of(ctx.judge)
        if not has_rules and not expectation.reference_answer:
            return [
                fixed_not_evaluated(
                    NAME,
                    NO_CONDITION,
                    "no success condition: set `success` or `reference_answer` in the "
                    "expectations, or contains/regex/json_path in the outcome evaluator options",
                    judge.name,
                )
            ]
        turn = trajectory.last_turn
        target = Target(turn=turn.index, span_id=turn.span_id) if turn else Target()
        answer = trajectory.final_answer
        if not answer:
            reason = NO_FINAL_ANSWER if trajectory.complete else SESSION_INCOMPLETE
            why = "the session has no final answer to check"
            if _answer_hidden(trajectory):
                why = "the final answer was hidden by the instrumentation (e.g. __REDACTED__)"
            return [not_evaluated(NAME, reason, why, target=target)]
        if has_rules:
            problems: list[str] = []
            validate_rules(rules, "success", problems)
            if problems:
                return [
                    not_evaluated(
                        NAME,
                        INVALID_CONDITION,
                        f"the success condition from {source} is invalid: {'; '.join(problems)}",
                        target=target,
                        error_type="ConfigError",
                    )
                ]
            ok, lines = check_rules(rules, answer)
            return [
                Verdict(
                    evaluator=NAME,
                    outcome="pass" if ok else "fail",
                    score=1.0 if ok else 0.0,
                    label="success" if ok else "failure",
                    explanation=f"condition from {source}: {'; '.join(lines)}",
                    target=target,
                    judge="rule",
                    evidence=(target.span_id,) if target.span_id else (),
                )
            ]
        result = ask(
            judge,
            JudgeRequest(
                kind="outcome",
                request=trajectory.request,
                prior_context=tuple(t.request for t in trajectory.turns[1:] if t.request),
                catalogue=trajectory.catalogue,
                steps=trajectory.steps,
                final_answer=answer,
                reference_answer=expectation.reference_answer,
                task=expectation.task,
            ),
        )
        if isinstance(result, JudgeError):
            return [error_verdict(NAME, judge, result, target, "outcome against the reference")]
        ok = result.rating == "yes"
        return [
            Verdict(
                evaluator=NAME,
                outcome="pass" if ok else "fail",
                score=result.score,
                label="success" if ok else "failure",
                explanation=(
                    f"condition: agrees with the reference answer {expectation.reference_answer!r}"
                    f": {result.rationale}"
                ),
                target=target,
                judge=judge.name,
                evidence=(target.span_id,) if target.span_id else (),
                details=dict(result.details) or None,
            )
        ]


def _answer_hidden(trajectory: Trajectory) -> bool:
    """The last turn answered, but the trace recorded only a placeholder for the text."""
    turn = trajectory.last_turn
    return turn is not None and any(
        s.kind == "final_answer" and s.turn == turn.index and hidden(s.text)
        for s in trajectory.steps
    )
