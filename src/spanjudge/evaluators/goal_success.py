"""`goal_success`: do the natural-language assertions of the session's expectations hold?

Expectations (a file's session entry or a config rule) may carry ``assertions: [...]``, such as
"a report file was saved" or "the user was told the exchange rate". Each is asked of the LLM
judge on its own, against the session's evidence (requests, tool calls with their outputs, the
final answer), as a ``custom`` question whose only answers are ``holds`` and ``does_not_hold``.
The verdict passes when every assertion holds; its score is the share that hold, and its details
give each assertion's judgement, rationale and the steps the judge cited.

``not_evaluated``: ``no_expectation`` (no assertion for this session), ``no_judge`` (no LLM
judge: the heuristic cannot read an assertion), and ``judge_error`` / ``judge_budget`` when an
assertion got no answer (the others' judgements are still in the details).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from spanjudge import reasons
from spanjudge.errors import JudgeError
from spanjudge.evaluators.ask import ask, error_verdict, judge_of
from spanjudge.evaluators.base import EvaluationContext, fixed_not_evaluated, unknown_options
from spanjudge.evaluators.custom import no_judge_verdict, parse_evidence, shown_steps
from spanjudge.judges.base import Criterion, JudgeRequest, ScalePoint
from spanjudge.judges.budget import USAGE_KEY, Usage, usage_of
from spanjudge.judges.heuristic import HEURISTIC
from spanjudge.values import Target, Verdict

NAME = reasons.GOAL_SUCCESS
DEFAULT_EVIDENCE = ("request", "answer", "tool_calls", "tool_results")
HOLDS = "holds"
# The fixed part of every assertion's question comes first (a prompt cache reuses it); the
# assertion, trusted configuration text, follows it.
INSTRUCTIONS = (
    "Decide whether the ASSERTION below is true of this agent session, from the recorded "
    "evidence only. It holds only when the evidence shows it; an assertion the records neither "
    "show nor contradict does not hold.\nASSERTION: "
)
SCALE = (
    ScalePoint(label=HOLDS, score=1.0, definition="the records show the assertion is true"),
    ScalePoint(
        label="does_not_hold",
        score=0.0,
        definition="the records show it is false, or do not show it",
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GoalSuccess:
    free_text_criterion: ClassVar[bool] = True

    name: str = NAME
    evidence: tuple[str, ...] = DEFAULT_EVIDENCE

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], path: str, problems: list[str]
    ) -> GoalSuccess:
        unknown_options(options, ("evidence",), path, problems)
        evidence = parse_evidence(
            options.get("evidence"), f"{path}.evidence", problems, DEFAULT_EVIDENCE
        )
        return cls(evidence=evidence)

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        judge = judge_of(ctx.judge)
        assertions = ctx.expectation.assertions
        if not assertions:
            return [
                fixed_not_evaluated(
                    NAME,
                    reasons.NO_EXPECTATION,
                    "no assertions expected of this session (`assertions` in the expectations)",
                    judge.name,
                )
            ]
        trajectory = ctx.trajectory
        last = trajectory.last_turn
        # the whole session, as a custom session-level verdict: no turn; its last turn's span
        target = Target(span_id=last.span_id) if last else Target()
        if judge is HEURISTIC:
            return [no_judge_verdict(NAME, target, f"{len(assertions)} assertion(s)")]
        steps = shown_steps(trajectory.steps, self.evidence)
        prior = tuple(t.request for t in trajectory.turns[1:] if t.request)
        rows: list[dict[str, Any]] = []
        usage = Usage()
        failure: Verdict | None = None
        for assertion in assertions:
            request = JudgeRequest(
                kind="custom",
                criterion=Criterion(
                    name=NAME,
                    instructions=INSTRUCTIONS + assertion,
                    scale=SCALE,
                    evidence=self.evidence,
                ),
                request=trajectory.request if "request" in self.evidence else None,
                prior_context=prior if "request" in self.evidence else (),
                steps=steps,
                final_answer=trajectory.final_answer if "answer" in self.evidence else None,
            )
            answer = ask(judge, request)
            if isinstance(answer, JudgeError):
                verdict = error_verdict(NAME, judge, answer, target, f"assertion {assertion!r}")
                failure = failure or verdict
                spent = usage_of(verdict.details)
                usage = usage.plus(spent) if spent else usage
                rows.append(
                    {
                        "assertion": assertion,
                        "judgement": None,
                        "rationale": str(answer),
                        "evidence": [],
                    }
                )
                continue
            spent = usage_of(answer.details)
            usage = usage.plus(spent) if spent else usage
            row: dict[str, Any] = {
                "assertion": assertion,
                "judgement": answer.rating,
                "rationale": answer.rationale,
                "evidence": list(answer.evidence),
            }
            if "planted_instructions" in answer.details:
                row["planted_instructions"] = answer.details["planted_instructions"]
            rows.append(row)
        details: dict[str, Any] = {"assertions": rows, USAGE_KEY: usage.to_json()}
        if failure is not None:
            return [
                Verdict(
                    evaluator=NAME,
                    outcome="not_evaluated",
                    score=None,
                    label="not_evaluated",
                    explanation=failure.explanation,
                    reason=failure.reason,
                    target=target,
                    judge=judge.name,
                    error_type=failure.error_type,
                    evidence=failure.evidence,
                    details=details,
                )
            ]
        held = [r for r in rows if r["judgement"] == HOLDS]
        missed = [r for r in rows if r["judgement"] != HOLDS]
        ok = not missed
        said = "; ".join(f"{r['assertion']!r} {r['judgement']}: {r['rationale']}" for r in rows)
        own = (target.span_id,) if target.span_id else ()
        cited = [s for r in rows for s in r["evidence"]]
        return [
            Verdict(
                evaluator=NAME,
                outcome="pass" if ok else "fail",
                score=len(held) / len(rows),
                label="achieved" if ok else "not_achieved",
                explanation=f"{len(held)} of {len(rows)} assertions hold: {said}",
                target=target,
                judge=judge.name,
                evidence=tuple(dict.fromkeys((*own, *cited))),
                details=details,
            )
        ]
