"""`Step`: what a recogniser makes of one span (a turn, a model call, a tool call, a skill load)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

BodySource = Literal["trace", "directory"]
StepKind = Literal["agent_turn", "model_call", "tool_call", "skill_load", "final_answer"]
StepStatus = Literal["ok", "error", "unset"]
SkillStatus = Literal["loaded", "failed", "unresolved"]
# Where a catalogue was read (`coverage.catalogue_source`): a prompt's layout, a loader tool's
# description, or the configured skills directory (`skills.paths`).
CatalogueSource = Literal["trace_layout", "loader_description", "skills_directory"]
TRACE_LAYOUT: CatalogueSource = "trace_layout"
LOADER_DESCRIPTION: CatalogueSource = "loader_description"
SKILLS_DIRECTORY: CatalogueSource = "skills_directory"


STEP_KINDS: tuple[StepKind, ...] = get_args(StepKind)


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogueEntry:
    """One skill offered to the agent (from `<available_skills>` blocks and equivalents)."""

    name: str
    description: str | None = None
    # where it was read (None: a preset's own listing, in a prompt); the same offer wherever
    # it was read, so not compared
    source: CatalogueSource | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRequest:
    """A tool call a model asked for in its output (executed or not)."""

    name: str
    call_id: str | None = None
    arguments: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """A tool's result as the agent sent it back to the model (a tool message), by call id."""

    call_id: str
    text: str | None = None
    # the message or part holding the result marks it failed (`is_error`, an error status or
    # type): structure that decides before any wording of the text
    failed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One recognised unit of agent activity.

    ``turn`` is filled in by session assembly; recognisers leave it at 0. ``seq`` breaks ties
    between steps from the same span (a turn span may yield both `agent_turn` and `final_answer`).
    """

    kind: StepKind
    name: str
    span_id: str
    trace_id: str
    parent_span_id: str | None = None
    start_unix_nano: int = 0
    end_unix_nano: int = 0
    status: StepStatus = "unset"
    turn: int = 0
    seq: int = 0
    preset: str = ""
    # tool_call / skill_load
    tool_call_id: str | None = None
    arguments: Any = None
    result: str | None = None
    error: str | None = None
    # skill_load
    skill: str | None = None
    skill_status: SkillStatus | None = None
    skill_body: str | None = None
    skill_body_source: BodySource | None = None  # where the body came from
    # span id of the load this step completes (a lazy loader's SKILL.md read): one activation,
    # counted once, by that load
    activation_of: str | None = None
    # (name, body) of each further SKILL.md document the same result printed (`cat */SKILL.md`):
    # one more load each (recognition/documents.py)
    also_loaded: tuple[tuple[str, str], ...] = ()
    # model_call
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    tool_requests: tuple[ToolRequest, ...] = ()  # a model output asking for tools is no answer
    # model_call: the tool calls (with call ids) its input's history says the model asked for
    # earlier, in the assistant messages it repeats
    history_requests: tuple[ToolRequest, ...] = ()
    # tool results the agent sent back, seen in the messages of a model call or agent span
    tool_results: tuple[ToolResult, ...] = ()
    # SKILL.md bodies (name, text) seen in the messages a model call was given
    bodies_seen: tuple[tuple[str, str], ...] = ()
    # agent_turn: the user request; final_answer / model_call: the output text
    text: str | None = None
    agent_name: str | None = None
    # agent_turn: its input holds only tool results or approvals (the previous turn goes on)
    continuation: bool = False
    # model_call: the user request its input ends with (None when its new input is only tool
    # results): where no span above the model calls says so, this is where a turn begins
    request: str | None = None
    # model_call: the last user request in its input, whatever message the input ends with:
    # the request whose conversation the call goes on with (its `request` when it ends so)
    works_on: str | None = None
    # model_call: the opening of its system instructions, which say which agent is speaking
    # where no span names it (a handoff gives the conversation to other instructions)
    instructions: str | None = None
    # offered skills and tool schemas seen on this span (system prompts, tool definitions)
    catalogue: tuple[CatalogueEntry, ...] = ()
    tool_schemas: Mapping[str, Any] = field(default_factory=dict)
    # tool name -> its description, from the tool definitions the model was given (a tool
    # step: its own tool's, as its span describes it)
    tool_descriptions: Mapping[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """A tool call or skill load that did not succeed."""
        if self.kind == "skill_load":
            return self.skill_status == "failed"
        return self.status == "error" or self.error is not None
