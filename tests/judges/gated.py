"""A judge that holds one session's judgments until the test lets go, and a judged evaluator
that asks it: a slow LLM judge on one session, for the front ends' tests."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from spanjudge.evaluators.base import EvaluationContext
from spanjudge.judges.base import Judgement, JudgeRequest
from spanjudge.judges.reliability import CallPolicy
from spanjudge.values import Verdict


class GatedJudge:
    """Answers at once, except for session ``slow``, which waits for `release` (or 30 s)."""

    name = "llm:gated"

    def __init__(self, slow: str, *, deadline_s: float = 60.0) -> None:
        self.slow = slow
        self.policy = CallPolicy(deadline_s=deadline_s, concurrency=2)
        self.release = threading.Event()
        self.holding = threading.Event()  # set once the slow session's judgment is being held
        self.answered: list[str] = []

    def judge(self, request: JudgeRequest) -> Judgement:
        if request.request == self.slow:
            self.holding.set()
            self.release.wait(30)
        self.answered.append(request.request or "")
        return Judgement(rating="yes", score=1.0, rationale="judged", judge=self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class AsksJudge:
    """A judged evaluator: asks its judge about the session (by id) and passes on the answer."""

    name: str = "asks_judge"

    def evaluate(self, ctx: EvaluationContext) -> list[Verdict]:
        session = ctx.trajectory.session_id
        answer = ctx.judge.judge(JudgeRequest(kind="outcome", request=session))
        return [
            Verdict(
                evaluator=self.name,
                outcome="pass",
                score=answer.score,
                label=answer.rating,
                explanation=answer.rationale,
                judge=ctx.judge.name,
            )
        ]
