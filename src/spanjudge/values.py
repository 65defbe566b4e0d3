"""The values every stage and sink share: verdicts, expectations, coverage, session results.

Values only (frozen dataclasses and their JSON forms), no behaviour: sinks,
reports and third-party code import this module without pulling in the engine (ARCHITECTURE.md
section 5).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from spanjudge.trajectory.model import Trajectory
from spanjudge.trajectory.reference import ReferenceTrajectory

Outcome = Literal["pass", "fail", "not_evaluated"]


OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)


def skill_key(name: str) -> str:
    """How skill names compare everywhere (expectations, loads, catalogues, metric labels):
    surrounding space and case ignored. Reports keep each name as the trace spelled it."""
    return name.strip().lower()


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


# The target of a verdict about the whole session: one value every such verdict shares (it is
# frozen), not one built per verdict.
NO_TARGET = Target()


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """One judgement. ``not_evaluated`` always has a ``reason`` and never a score."""

    evaluator: str
    outcome: Outcome
    score: float | None
    label: str
    explanation: str
    reason: str | None = None
    target: Target = NO_TARGET
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
        return verdict_ids(session_id, revision)(self)

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


def verdict_ids(session_id: str, revision: int) -> Callable[[Verdict], str]:
    """`Verdict.stable_id` of any verdict of one session and revision: the first 32 hex digits
    of the SHA-256 of the session id, the revision, the evaluator and the target's skill, span
    id, tool call id and turn, joined by U+001F. The session's part is hashed once, however
    many verdicts are identified."""
    session = hashlib.sha256(f"{session_id}\x1f{revision}\x1f".encode())

    def stable_id(verdict: Verdict) -> str:
        target = verdict.target
        if target is NO_TARGET:  # most verdicts: about the whole session
            rest = verdict.evaluator + "\x1f\x1f\x1f\x1f"
        else:
            rest = "\x1f".join(
                (
                    verdict.evaluator,
                    target.skill or "",
                    target.span_id or "",
                    target.tool_call_id or "",
                    "" if target.turn is None else str(target.turn),
                )
            )
        digest = session.copy()
        digest.update(rest.encode())
        return digest.hexdigest()[:32]

    return stable_id


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
    """A verdict that could not be judged, with its machine ``reason`` (see `spanjudge.reasons`)."""
    return Verdict(
        evaluator=evaluator,
        outcome="not_evaluated",
        score=None,
        label="not_evaluated",
        explanation=explanation,
        reason=reason,
        target=target or NO_TARGET,
        judge=judge,
        error_type=error_type,
        evidence=evidence,
        details=details,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Expectation:
    """The merged requirements for one session, with where each came from. Sessions nothing
    is expected of share one (`expectations.NO_EXPECTATION`): its fields stay immutable."""

    skills: tuple[str, ...] = ()
    task: str | None = None
    reference_answer: str | None = None
    success: Mapping[str, Any] | None = None
    sources: tuple[str, ...] = ()
    # the tool calls the session should make (`trajectory_match`); None when none is given
    trajectory: ReferenceTrajectory | None = None
    # statements about the whole session that goal_success judges
    assertions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Coverage:
    """How much of what should have been judged was judged (ARCHITECTURE.md section 5)."""

    expected_skills: int
    expected_skills_loaded: int
    skill_invocations: int
    invocations_with_body: int
    # of those, bodies the trace did not record, taken from a configured skills directory
    bodies_from_directory: int = 0
    not_evaluated: Mapping[str, int] = field(default_factory=dict)
    # where the catalogue was read (the trajectory's); None when no catalogue was offered
    catalogue_source: str | None = None
    # spans no convention preset claimed, read by the shape fallback (`recognition/shapes.py`)
    fallback_spans: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "expected_skills": self.expected_skills,
            "expected_skills_loaded": self.expected_skills_loaded,
            "skill_invocations": self.skill_invocations,
            "invocations_with_body": self.invocations_with_body,
            "bodies_from_directory": self.bodies_from_directory,
            "not_evaluated": dict(self.not_evaluated),
            "catalogue_source": self.catalogue_source,
            "fallback_spans": self.fallback_spans,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionResult:
    """One evaluated session: what every sink receives."""

    trajectory: Trajectory
    expectation: Expectation
    verdicts: tuple[Verdict, ...]
    coverage: Coverage
    evaluation_duration_s: float = 0.0
