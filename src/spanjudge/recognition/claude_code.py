"""Claude Code / Claude Agent SDK preset: the CLI's traces beta.

Span shapes, as emitted by `@anthropic-ai/claude-code` 2.1.x:
- `claude_code.interaction`: one root span per user prompt (one trace per turn); `user_prompt`
  when OTEL_LOG_USER_PROMPTS is on; `session.id` on every span.
- `claude_code.llm_request`: one per model call; `model`, `input_tokens`, `output_tokens`,
  `cache_read_tokens`, `cache_creation_tokens`, `stop_reason`.
- `claude_code.tool`: one per executed tool call; `tool_name`, `tool_use_id`, and for the Skill
  tool `skill_name`. Its status stays unset even when the tool fails: the outcome is on the child
  `claude_code.tool.execution` span (`success`, `error`, status error), merged in `finalise`.
- Detailed beta tracing (ENABLE_BETA_TRACING_DETAILED) adds content: `tool_input`
  ("[TOOL INPUT: name]\\n{json}"), `new_context` (the messages a call adds: tool results, the
  skill body as a user message starting "Base directory for this skill:"), and on model calls
  `response.model_output` and `system_reminders` (the skill catalogue).

A Skill call for a skill that does not exist is rejected before execution: no `claude_code.tool`
span exists for it. With detailed tracing the rejection is visible as a `<tool_use_error>` tool
result in the next model call's `new_context`; `finalise` turns that into a failed skill load.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from spanjudge import semconv
from spanjudge.recognition.base import (
    ClaimEvidence,
    int_attr,
    parse_json,
    span_fields,
)
from spanjudge.recognition.catalogue import parse_catalogue
from spanjudge.recognition.evidence import tool_step
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import CatalogueEntry, Step

PRESET = "claude_code"
# `new_context` joins messages with this separator; only a known header after it starts a new
# section, so a skill body containing a markdown rule stays whole.
_SECTION = re.compile(
    r"\n\n---\n\n(?=\[(?:USER|USER PROMPT|ASSISTANT|SYSTEM|TOOL RESULT: [^\]\n]+)\])"
)
_HEADER = re.compile(r"^\[([^\]\n]+)\]\n?")
_PREFIXED = re.compile(r"^\[TOOL (?:INPUT|RESULT): [^\]\n]+\]\n?")
_LISTING = re.compile(
    r"The following skills are available for use with the Skill tool:\s*\n((?:\s*- [^\n]+\n?)+)"
)
_LISTING_LINE = re.compile(r"^\s*- ([A-Za-z0-9_.:/-]+): (.+?)\s*$", re.M)
_UNKNOWN_SKILL = re.compile(r"Unknown skill: (\S+?)\.?(?:\s|<|$)")


def _text(span: SpanRecord, key: str) -> str | None:
    value = span.attributes.get(key)
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    # prompts and content are replaced by a marker when their logging is switched off
    return None if text.startswith("<REDACTED") else text


def _strip_prefix(text: str | None) -> str | None:
    return None if text is None else _PREFIXED.sub("", text, count=1)


def sections(new_context: str | None) -> list[tuple[str, str]]:
    """`new_context` as (header, body) pairs: ("USER", ...), ("TOOL RESULT: toolu_1", ...)."""
    if not new_context:
        return []
    out = []
    for part in _SECTION.split(new_context):
        match = _HEADER.match(part)
        out.append((match.group(1), part[match.end() :]) if match else ("", part))
    return out


def parse_skill_listing(text: str | None) -> tuple[CatalogueEntry, ...]:
    """The catalogue Claude Code puts in a system reminder ("- name: description" lines)."""
    if not text:
        return ()
    entries: dict[str, CatalogueEntry] = {}
    for block in _LISTING.findall(text):
        for name, description in _LISTING_LINE.findall(block):
            entries.setdefault(name, CatalogueEntry(name=name, description=description))
    return tuple(entries.values()) or parse_catalogue(text)  # another layout: by evidence


class ClaudeCodeRecogniser:
    """Recognises the spans of Claude Code's OpenTelemetry traces (ARCHITECTURE.md section 2)."""

    name = PRESET
    claim_evidence = ClaimEvidence(name_prefixes=(semconv.CC_SPAN_PREFIX,))

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        if not span.name.startswith(semconv.CC_SPAN_PREFIX):
            return None
        if span.name == semconv.CC_INTERACTION:
            return [
                self._step(
                    span,
                    "agent_turn",
                    text=_text(span, semconv.CC_USER_PROMPT),
                    agent_name=_text(span, semconv.CC_AGENT_ID) or "claude-code",
                )
            ]
        if span.name == semconv.CC_LLM_REQUEST:
            return [self._model_call(span)]
        if span.name == semconv.CC_TOOL and span.attributes.get(semconv.CC_TOOL_NAME):
            return [self._tool(span)]
        return []  # tool.execution, tool.blocked_on_user, hooks, subagent spawns...: claimed

    def _step(self, span: SpanRecord, kind: str, **fields: object) -> Step:
        return Step(
            kind=kind,  # type: ignore[arg-type]
            name=span.name,
            **span_fields(span, PRESET),
            **fields,  # type: ignore[arg-type]
        )

    def _model_call(self, span: SpanRecord) -> Step:
        tokens_in = int_attr(span, semconv.CC_INPUT_TOKENS)
        if tokens_in is not None:
            # Anthropic's input_tokens leaves out prompt-cache reads and writes; add them back
            tokens_in += sum(
                int_attr(span, key) or 0
                for key in (semconv.CC_CACHE_READ_TOKENS, semconv.CC_CACHE_CREATION_TOKENS)
            )
        catalogue = parse_skill_listing(_text(span, semconv.CC_SYSTEM_REMINDERS)) or (
            parse_skill_listing(_text(span, semconv.CC_NEW_CONTEXT))
        )
        return replace(
            self._step(span, "model_call", text=_text(span, semconv.CC_MODEL_OUTPUT)),
            name=_text(span, semconv.CC_MODEL) or span.name,
            model=_text(span, semconv.CC_MODEL),
            input_tokens=tokens_in,
            output_tokens=int_attr(span, semconv.CC_OUTPUT_TOKENS),
            finish_reason=_text(span, semconv.CC_STOP_REASON),
            catalogue=catalogue,
        )

    def _tool(self, span: SpanRecord) -> Step:
        tool = str(span.attributes[semconv.CC_TOOL_NAME])
        raw_input = _strip_prefix(_text(span, semconv.CC_TOOL_INPUT))
        arguments = parse_json(raw_input) if raw_input is not None else None
        result = _strip_prefix(_text(span, semconv.CC_NEW_CONTEXT))
        skill = _text(span, semconv.CC_SKILL_NAME)
        if skill is not None and arguments is None:
            arguments = {"skill": skill}
        step = tool_step(
            span,
            PRESET,
            tool=tool,
            arguments=arguments,
            result=result,
            result_text=result,
            has_result=result is not None,
            failure=_text(span, semconv.CC_ERROR)
            or ("span status is error" if span.status == "error" else None),
            declared_skill=skill,
            call_id=_text(span, semconv.CC_TOOL_USE_ID) or _text(span, semconv.GEN_AI_TOOL_CALL_ID),
        )
        # the body arrives as a later user message ("Base directory for this skill: ..."),
        # attached in `finalise`; the tool result itself only says the skill was launched
        if step.skill_body is None and step.skill_body_source is None:
            return step  # (a call, or a load with no body: nothing to take back)
        return replace(step, skill_body=None, skill_body_source=None)

    def finalise(self, steps: list[Step], spans: Sequence[SpanRecord]) -> list[Step]:
        """Merge tool outcomes, attach skill bodies, add unseen failed loads and final answers."""
        outcomes: dict[str, SpanRecord] = {}
        requests = []
        for s in spans:  # one pass; a session from another framework has neither
            if s.name == semconv.CC_TOOL_EXECUTION:
                if s.parent_span_id:
                    outcomes[s.parent_span_id] = s
            elif s.name == semconv.CC_LLM_REQUEST:
                requests.append(s)
        # (without an execution span a step keeps its outcome: `_with_outcome(step, None)`)
        out = (
            [self._with_outcome(step, outcomes.get(step.span_id)) for step in steps]
            if outcomes
            else list(steps)
        )
        for span in sorted(requests, key=lambda s: s.start_unix_nano):
            out = self._read_context(out, span)
        return out + self._final_answers(out)

    def _with_outcome(self, step: Step, execution: SpanRecord | None) -> Step:
        if (
            step.preset != PRESET
            or execution is None
            or step.kind not in ("tool_call", "skill_load")
        ):
            return step
        success = execution.attributes.get(semconv.CC_SUCCESS)
        failed = execution.status == "error" or success is False
        error = step.error
        if failed:
            error = error or _text(execution, semconv.CC_ERROR) or execution.status_message
            error = error or "tool execution failed"
        if step.kind == "tool_call":
            return replace(step, status="error" if failed else step.status, error=error)
        if failed:
            return replace(step, status="error", skill_status="failed", error=error)
        if step.skill_status == "unresolved" and success is True:
            # default tracing records no result text; a successful execution is the result
            return replace(step, skill_status="loaded")
        return step

    def _read_context(self, steps: list[Step], span: SpanRecord) -> list[Step]:
        """Skill bodies and rejected Skill calls from the messages a model call adds."""
        tool_use_id: str | None = None
        for header, body in sections(_text(span, semconv.CC_NEW_CONTEXT)):
            if header.startswith("TOOL RESULT: "):
                tool_use_id = header.removeprefix("TOOL RESULT: ").strip()
                unknown = _UNKNOWN_SKILL.search(body) if "<tool_use_error>" in body else None
                if unknown and not any(s.tool_call_id == tool_use_id for s in steps):
                    steps = [*steps, self._rejected_load(span, tool_use_id, unknown.group(1), body)]
            elif header == "USER" and body.startswith(semconv.CC_SKILL_BODY_MARKER):
                steps = _attach_body(steps, span, tool_use_id, body)
        return steps

    def _rejected_load(self, span: SpanRecord, tool_use_id: str, skill: str, body: str) -> Step:
        # The attempt happened before this model call started: place it just before.
        return Step(
            kind="skill_load",
            name="Skill",
            span_id=span.span_id,
            trace_id=span.trace_id,
            parent_span_id=span.parent_span_id,
            start_unix_nano=span.start_unix_nano - 1,
            end_unix_nano=span.start_unix_nano - 1,
            status="error",
            seq=1,
            preset=PRESET,
            tool_call_id=tool_use_id,
            arguments={"skill": skill},
            result=body.strip(),
            error=f"rejected by Claude Code: {body.strip()[:200]}",
            skill=skill,
            skill_status="failed",
        )

    def _final_answers(self, steps: list[Step]) -> list[Step]:
        """Per turn, the last main-thread model response with text is the final answer."""
        turns = {s.span_id: s for s in steps if s.kind == "agent_turn" and s.preset == PRESET}
        if not turns:
            return []  # an answer is a model call under one of them
        last: dict[str, Step] = {}
        for step in steps:
            if (
                step.kind == "model_call"
                and step.preset == PRESET
                and step.text
                and step.parent_span_id in turns
            ):
                best = last.get(step.trace_id)
                if best is None or step.end_unix_nano >= best.end_unix_nano:
                    last[step.trace_id] = step
        return [
            # tokens stay on the model call so that they are counted once
            replace(
                step,
                kind="final_answer",
                seq=2,
                text=(step.text or "").strip(),
                catalogue=(),
                input_tokens=None,
                output_tokens=None,
            )
            for step in last.values()
        ]


def _attach_body(
    steps: list[Step], span: SpanRecord, tool_use_id: str | None, body: str
) -> list[Step]:
    first_line, _, rest = body.partition("\n")
    skill = (
        first_line.removeprefix(semconv.CC_SKILL_BODY_MARKER).strip().rstrip("/").rsplit("/", 1)[-1]
    )
    candidates = [
        i
        for i, s in enumerate(steps)
        if s.kind == "skill_load"
        and s.preset == PRESET
        and s.skill_body is None
        and s.start_unix_nano <= span.start_unix_nano
        and (s.tool_call_id == tool_use_id or s.skill == skill)
    ]
    exact = [i for i in candidates if steps[i].tool_call_id == tool_use_id]
    if not candidates:
        return steps
    chosen = (exact or candidates)[-1]
    updated = list(steps)
    updated[chosen] = replace(steps[chosen], skill_body=rest.strip(), skill_body_source="trace")
    return updated
