"""`Verdict`: the tri-state result every evaluator returns (DESIGN section 5, Contract)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

Outcome = Literal["pass", "fail", "not_evaluated"]
OUTCOMES: tuple[Outcome, ...] = ("pass", "fail", "not_evaluated")

# Machine codes for `not_evaluated` (extend, never rename).
NO_EXPECTATION = "no_expectation"
NO_SKILL_INVOCATION = "no_skill_invocation"
NOT_INVOKED = "not_invoked"
BODY_NOT_RECORDED = "body_not_recorded"
LOAD_FAILED = "load_failed"
LOAD_UNRESOLVED = "load_unresolved"
JUDGE_ERROR = "judge_error"
SESSION_INCOMPLETE = "session_incomplete"
EVALUATOR_ERROR = "evaluator_error"
NO_CATALOGUE = "no_catalogue"
NO_FINAL_ANSWER = "no_final_answer"
NO_CONDITION = "no_condition"
NOT_APPLICABLE = "not_applicable"
NO_REQUEST = "no_request"
NO_OBSERVABLE_STEPS = "no_observable_steps"
INVALID_CONDITION = "invalid_condition"
NO_CONSTRAINTS = "no_constraints"
NO_BUDGET = "no_budget"
NO_THRESHOLDS = "no_thresholds"
NO_TOOL_CALLS = "no_tool_calls"
NOT_MEASURED = "not_measured"


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    skill: str | None = None
    span_id: str | None = None
    tool_call_id: str | None = None
    turn: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "skill": self.skill,
            "span_id": self.span_id,
            "tool_call_id": self.tool_call_id,
            "turn": self.turn,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """One judgement. ``not_evaluated`` always has a ``reason`` and never a score."""

    evaluator: str
    outcome: Outcome
    score: float | None
    label: str
    explanation: str
    reason: str | None = None
    target: Target = field(default_factory=Target)
    judge: str = "rule"
    evidence: tuple[str, ...] = ()
    error_type: str | None = None
    details: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")
        if self.outcome == "not_evaluated":
            if not self.reason:
                raise ValueError("a not_evaluated verdict needs a reason")
            if self.score is not None:
                raise ValueError("a not_evaluated verdict has no score")
        if self.score is not None and not 0.0 <= self.score <= 1.0:
            raise ValueError(f"score must be within 0..1, got {self.score}")

    def stable_id(self, session_id: str, revision: int) -> str:
        """Same session, revision, evaluator and target -> same id (downstream de-duplication)."""
        key = "\x1f".join(
            [
                session_id,
                str(revision),
                self.evaluator,
                self.target.skill or "",
                self.target.span_id or "",
                self.target.tool_call_id or "",
                "" if self.target.turn is None else str(self.target.turn),
            ]
        )
        return hashlib.sha256(key.encode()).hexdigest()[:32]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "evaluator": self.evaluator,
            "outcome": self.outcome,
            "score": self.score,
            "label": self.label,
            "explanation": self.explanation,
            "reason": self.reason,
            "target": self.target.to_json(),
            "judge": self.judge,
            "evidence": list(self.evidence),
        }
        if self.error_type:
            out["error_type"] = self.error_type
        if self.details:
            out["details"] = self.details
        return out


def not_evaluated(
    evaluator: str,
    reason: str,
    explanation: str,
    *,
    target: Target | None = None,
    judge: str = "rule",
    error_type: str | None = None,
    evidence: tuple[str, ...] = (),
    details: dict[str, Any] | None = None,
) -> Verdict:
    return Verdict(
        evaluator=evaluator,
        outcome="not_evaluated",
        score=None,
        label="not_evaluated",
        explanation=explanation,
        reason=reason,
        target=target or Target(),
        judge=judge,
        error_type=error_type,
        evidence=evidence,
        details=details,
    )
