"""The `Judge` protocol: a structured request in, a structured rating plus rationale out.

Four questions are asked of a judge (``JudgeRequest.kind``):

- ``skill_selection``: was the invoked ``skill`` the right one for the request? ``yes`` | ``no``
- ``skill_omission``: no skill was invoked; should one have been? ``yes`` (names it) | ``no``
- ``instruction_following``: how closely did the session follow the SKILL.md body?
  ``fully`` | ``mostly`` | ``partially`` | ``minimally`` | ``not_followed``
- ``outcome``: does the final answer meet the reference answer / task? ``yes`` | ``no``
- ``tool_selection``: was ``tool_call`` the right tool for the request and context? ``yes`` | ``no``
- ``tool_parameters``: were ``tool_call``'s arguments right and grounded? ``yes`` | ``no``
- ``custom``: a criterion from the configuration (``criterion``: instructions and a scale); the
  scale's labels are the only ratings (a custom evaluator, each goal_success assertion)

A judge that cannot answer raises `JudgeError`; it never guesses a rating.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from spanjudge.errors import JudgeError
from spanjudge.trajectory.model import Trajectory
from spanjudge.trajectory.steps import CatalogueEntry, Step

JudgeKind = Literal[
    "skill_selection",
    "skill_omission",
    "instruction_following",
    "outcome",
    "tool_selection",
    "tool_parameters",
    "custom",
]


@runtime_checkable
class Judge(Protocol):
    """``name`` is what verdicts record: ``heuristic`` or ``llm:<model>``."""

    name: str

    def judge(self, request: JudgeRequest) -> Judgement:
        """Answer ``request``; raise `JudgeError` when no trustworthy answer can be given."""
        ...


class JudgeFactory(Protocol):
    """Builds a judge of one ``type`` from its settings (``judges.<name>`` less ``type``);
    appends every configuration problem, with ``path``, to ``problems``. Third-party judge types
    register in the `spanjudge.judges` entry-point group; their settings reach them unchecked."""

    def __call__(self, settings: Mapping[str, Any], path: str, problems: list[str]) -> Judge: ...


class JudgeSettings(Protocol):
    """What the judge lookup reads of a `spanjudge.config.Config` (the configuration module
    imports this one, so the type is named by its shape)."""

    @property
    def judges(self) -> Mapping[str, Any]: ...
    @property
    def evaluators(self) -> Mapping[str, Any]: ...
    @property
    def sections(self) -> Mapping[str, Any]: ...
    @property
    def source(self) -> str | None: ...


JUDGE_KINDS: tuple[JudgeKind, ...] = get_args(JudgeKind)

# Instruction-following levels and their scores (ARCHITECTURE.md section 5, Contract).
LEVELS: dict[str, float] = {
    "fully": 1.0,
    "mostly": 0.75,
    "partially": 0.5,
    "minimally": 0.25,
    "not_followed": 0.0,
}
BINARY: dict[str, float] = {"yes": 1.0, "no": 0.0}


def ratings_for(kind: JudgeKind) -> dict[str, float]:
    """The allowed ratings of one kind of question, with their scores (a ``custom`` question's
    come from its criterion: `allowed_ratings`)."""
    return LEVELS if kind == "instruction_following" else BINARY


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalePoint:
    """One answer a criterion allows: its label, its score (0..1) and what it means."""

    label: str
    score: float
    definition: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Criterion:
    """A question written in the configuration, trusted: ``instructions`` and the ``scale`` whose
    labels are the only answers; ``evidence`` names what of the session the judge is shown."""

    name: str
    instructions: str
    scale: tuple[ScalePoint, ...]
    evidence: tuple[str, ...] = ()

    @property
    def ratings(self) -> dict[str, float]:
        return {p.label: p.score for p in self.scale}


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeRequest:
    """Everything a judge may look at for one question.

    ``request`` and ``prior_context`` come from the user; ``steps``, ``final_answer`` and
    ``skill_body`` were produced or fetched by the agent and are untrusted data.
    """

    kind: JudgeKind
    request: str | None
    prior_context: tuple[str, ...] = ()
    catalogue: tuple[CatalogueEntry, ...] = ()
    skill: str | None = None
    skill_status: str | None = None
    skill_span_id: str | None = None
    skill_body: str | None = None
    steps: tuple[Step, ...] = ()
    final_answer: str | None = None
    reference_answer: str | None = None
    task: str | None = None
    # tool_selection / tool_parameters: the call judged (also the last of ``steps``) and the
    # parameter schemas of the tools the agent was offered, when recorded
    tool_call: Step | None = None
    tool_schemas: Mapping[str, Any] = field(default_factory=dict)
    # custom: the configured question and its scale
    criterion: Criterion | None = None


def allowed_ratings(request: JudgeRequest) -> dict[str, float]:
    """The ratings a judge may answer ``request`` with, and their scores."""
    if request.kind == "custom":
        if request.criterion is None:
            raise JudgeError("a custom question without its criterion", error_type="judge_config")
        return request.criterion.ratings
    return ratings_for(request.kind)


@dataclass(frozen=True, slots=True, kw_only=True)
class Judgement:
    """A rating from ``ratings_for(kind)`` with its score and a human-readable rationale."""

    rating: str
    score: float
    rationale: str
    judge: str
    skill: str | None = None
    evidence: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)


def rating_key(rating: Any) -> str | None:
    """How a model's rating is compared with the allowed labels: case, surrounding space and
    inner spaces (as underscores) ignored; a whole number stands for its digits (a numeric
    scale's "4"). Anything else (a fraction, a list, null) matches no label."""
    if isinstance(rating, int) and not isinstance(rating, bool):
        return str(rating)
    return rating.strip().lower().replace(" ", "_") if isinstance(rating, str) else None


def judgement_from(
    kind: JudgeKind,
    rating: Any,
    rationale: Any,
    judge: str,
    skill: Any = None,
    *,
    allowed: Mapping[str, float] | None = None,
) -> Judgement:
    """Validate a rating produced by a model; anything outside the allowed set (``allowed``,
    else the kind's) is an error."""
    allowed = ratings_for(kind) if allowed is None else allowed
    key = rating_key(rating)
    if key is None or key not in allowed:
        raise JudgeError(
            f"rating {rating!r} is not one of {', '.join(allowed)}",
            error_type="judge_unparseable",
        )
    if not isinstance(rationale, str) or not rationale.strip():
        raise JudgeError("the judgement has no rationale", error_type="judge_unparseable")
    return Judgement(
        rating=key,
        score=allowed[key],
        rationale=rationale.strip(),
        judge=judge,
        skill=skill if isinstance(skill, str) and skill.strip() else None,
    )


def requests_up_to(trajectory: Trajectory, turn: int) -> tuple[str | None, tuple[str, ...]]:
    """The request of ``turn`` and the user requests of earlier turns (the prior context)."""
    current = None
    prior: list[str] = []
    for t in trajectory.turns:
        if t.index < turn and t.request:
            prior.append(t.request)
        elif t.index == turn:
            current = t.request
    if current is None and prior:
        current = prior.pop()
    return current, tuple(prior)


__all__ = [
    "BINARY",
    "JUDGE_KINDS",
    "LEVELS",
    "Criterion",
    "Judge",
    "JudgeError",
    "JudgeKind",
    "JudgeRequest",
    "Judgement",
    "ScalePoint",
    "allowed_ratings",
    "judgement_from",
    "ratings_for",
    "requests_up_to",
]
