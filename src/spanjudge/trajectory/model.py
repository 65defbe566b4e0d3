"""An assembled session: ordered steps, turns, skill loads, final answer and statistics."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spanjudge.trajectory.steps import CatalogueEntry, Step

if TYPE_CHECKING:
    from spanjudge.trajectory.steps import BodySource, CatalogueSource, SkillStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    index: int
    span_id: str
    trace_id: str
    request: str | None
    final_answer: str | None
    agent_name: str | None
    start_unix_nano: int
    end_unix_nano: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SkillLoad:
    skill: str
    status: SkillStatus
    span_id: str
    tool_name: str
    body: str | None
    error: str | None
    turn: int
    tool_call_id: str | None = None
    body_source: BodySource | None = None  # "trace" or "directory" (a configured skills path)

    @property
    def body_recorded(self) -> bool:
        return bool(self.body)


@dataclass(frozen=True, slots=True, kw_only=True)
class Stats:
    """ARCHITECTURE.md section 4 (Contract)."""

    turns: int
    tool_calls: int
    skill_loads: int
    model_calls: int
    input_tokens: int | None
    output_tokens: int | None
    duration_s: float
    errors: int
    retries: int
    backtracks: int

    def to_json(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "skill_loads": self.skill_loads,
            "model_calls": self.model_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "duration_s": round(self.duration_s, 6),
            "errors": self.errors,
            "retries": self.retries,
            "backtracks": self.backtracks,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Trajectory:
    """Everything the evaluators see about one session."""

    session_id: str
    session_key_source: str
    complete: bool
    revision: int
    close_reason: str
    trace_ids: tuple[str, ...]
    turns: tuple[Turn, ...]
    steps: tuple[Step, ...]
    skill_loads: tuple[SkillLoad, ...]
    catalogue: tuple[CatalogueEntry, ...]
    final_answer: str | None
    stats: Stats
    agent_name: str | None = None
    task_id: str | None = None
    run_seed: str | None = None
    expected_skills_attr: tuple[str, ...] = ()
    terminal_state: Mapping[str, Any] | None = None
    tool_schemas: Mapping[str, Any] = field(default_factory=dict)
    span_count: int = 0
    truncated_values: int = 0
    # step span id -> indices of the steps that retried / backtracked (for timelines and robustness)
    retry_span_ids: tuple[str, ...] = ()
    backtrack_span_ids: tuple[str, ...] = ()
    # evidence that earlier turns went elsewhere (recognition/continuity.py); None when whole
    prior_turns_missing: str | None = None
    catalogue_source: CatalogueSource | None = None  # None when there is no catalogue
    # log records read as content of the session's spans, and those whose span never came
    log_records: int = 0
    log_records_unjoined: int = 0

    @property
    def request(self) -> str | None:
        """The first user request of the session."""
        for turn in self.turns:
            if turn.request:
                return turn.request
        return None

    @property
    def last_turn(self) -> Turn | None:
        return self.turns[-1] if self.turns else None

    def tool_calls(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "tool_call"]
