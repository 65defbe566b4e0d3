"""OpenTelemetry GenAI semantic conventions, including Strands Agents and Google ADK specifics.

Three spellings of the same facts are read (DESIGN section 2):
- v1.36 events: `gen_ai.user.message`, `gen_ai.system.message`, `gen_ai.tool.message`,
  `gen_ai.choice` (Strands' default);
- latest experimental: `gen_ai.client.inference.operation.details` events carrying
  `gen_ai.input.messages` / `gen_ai.output.messages` / `gen_ai.system_instructions`;
- attributes only: the same keys as span attributes (Strands' `gen_ai_span_attributes_only`,
  ADK, hand-instrumented code).

Strands specifics: agent spans carry cumulative token totals (never counted as model calls),
`execute_event_loop_cycle` spans are claimed without steps, and the AgentSkills `skills` tool
answers an unknown skill with a success status and refusal text.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from spanjudge import semconv as sc
from spanjudge.recognition.base import (
    as_text,
    error_in_payload,
    first_attr,
    int_attr,
    parse_catalogue,
    parse_json,
    skill_load_status,
    span_error,
)
from spanjudge.recognition.skill_tools import skill_loader
from spanjudge.spans.record import AttrValue, SpanRecord
from spanjudge.trajectory.steps import CatalogueEntry, Step

_TOOL_PREFIX = "execute_tool "
_GEN_AI_PREFIX = "gen_ai."
# Finish reasons that end a turn (OTel `stop`, Strands/Anthropic `end_turn`, Gemini `STOP`).
_STOP_REASONS = frozenset({"stop", "end_turn", "completed", "stop_sequence"})
# Strands appends "---\nAllowed tools/Compatibility/Location" metadata and a resource list to the
# SKILL.md body it returns; the body proper ends before them.
_STRANDS_SKILL_TAIL = re.compile(
    r"\n+---\n(?:Allowed tools|Compatibility|Location): .*\Z|\n+Available resources:\n.*\Z", re.S
)


# --------------------------------------------------------------------------- payload helpers


def _values(span: SpanRecord, key: str) -> list[AttrValue]:
    """`key` from the span's attributes and from every GenAI event that carries it, in order."""
    found: list[AttrValue] = []
    value = span.attributes.get(key)
    if value is not None:
        found.append(value)
    for event in span.events:
        if event.name == sc.EV_GEN_AI_INFERENCE_DETAILS and event.attributes.get(key) is not None:
            found.append(event.attributes[key])
    return found


def _messages(span: SpanRecord, key: str) -> list[dict[str, Any]]:
    """Decoded `gen_ai.input.messages` / `gen_ai.output.messages` (latest conventions)."""
    messages: list[dict[str, Any]] = []
    for value in _values(span, key):
        decoded = parse_json(value)
        if isinstance(decoded, dict):
            decoded = [decoded]
        if isinstance(decoded, (list, tuple)):
            messages.extend(m for m in decoded if isinstance(m, dict))
    return messages


def _block_text(block: Any) -> str | None:
    """Text of one content block: OTel part, Strands/Bedrock block or plain string."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return None
    if block.get("type") in (None, "text") and isinstance(block.get("content"), str):
        return str(block["content"])
    if isinstance(block.get("text"), str):
        return str(block["text"])
    if "json" in block:
        return as_text(block["json"])
    return None


def _content_text(content: Any) -> str | None:
    """Join the text of a message's content (a string, a block list, or a JSON string of them)."""
    content = parse_json(content) if isinstance(content, str) else content
    if isinstance(content, dict):
        if "parts" in content:  # an OTel message
            return _content_text(content["parts"])
        if isinstance(content.get("content"), (list, tuple)):  # a v1.36 message with blocks
            return _content_text(content["content"])
        return _block_text(content)
    if isinstance(content, (list, tuple)):
        texts = [t for t in (_block_text(b) for b in content) if t]
        return "\n".join(texts) if texts else None
    return content if isinstance(content, str) else None


def _parts(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    parts = message.get("parts") or []
    return [p for p in parts if isinstance(p, dict) and p.get("type") == kind]


def _last_user_text(span: SpanRecord) -> str | None:
    for message in reversed(_messages(span, sc.GEN_AI_INPUT_MESSAGES)):
        if message.get("role") == "user" and _parts(message, "text"):
            return _content_text(_parts(message, "text"))
    for event in reversed(span.events):
        if event.name == sc.EV_GEN_AI_USER_MESSAGE:
            text = _content_text(event.attributes.get("content"))
            if text:
                return text
    return None


def _output(span: SpanRecord) -> tuple[str | None, str | None, bool]:
    """(text, finish reason, asked for tools) of the span's model or agent output."""
    for message in reversed(_messages(span, sc.GEN_AI_OUTPUT_MESSAGES)):
        if message.get("role") in (None, "assistant", "model"):
            reason = message.get("finish_reason")
            text = _content_text(_parts(message, "text"))
            return text, str(reason) if reason else None, bool(_parts(message, "tool_call"))
    for event in reversed(span.events):
        if event.name == sc.EV_GEN_AI_CHOICE:
            message = event.attributes.get("message")
            reason = event.attributes.get("finish_reason")
            decoded = parse_json(message) if isinstance(message, str) else message
            calls = isinstance(decoded, (list, tuple)) and any(
                isinstance(b, dict) and ("toolUse" in b or b.get("type") == "tool_call")
                for b in decoded
            )
            return _content_text(message), str(reason) if reason else None, calls
    return None, None, False


def _system_text(span: SpanRecord) -> str | None:
    texts = [_content_text(v) for v in _values(span, sc.GEN_AI_SYSTEM_INSTRUCTIONS)]
    texts += [
        _content_text(e.attributes.get("content"))
        for e in span.events
        if e.name == sc.EV_GEN_AI_SYSTEM_MESSAGE
    ]
    joined = "\n".join(t for t in texts if t)
    return joined or None


def _catalogue(span: SpanRecord) -> tuple[CatalogueEntry, ...]:
    return parse_catalogue(_system_text(span))


def _tool_schemas(span: SpanRecord, tool_name: str | None = None) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    definitions = parse_json(span.attributes.get(sc.GEN_AI_TOOL_DEFINITIONS))
    if isinstance(definitions, (list, tuple)):
        for item in definitions:
            if not isinstance(item, dict):
                continue
            nested = item.get("function")  # OpenAI-style {"type": "function", "function": {...}}
            function: dict[str, Any] = nested if isinstance(nested, dict) else item
            name = function.get("name")
            schema = function.get("parameters", function.get("inputSchema"))
            if isinstance(schema, dict) and isinstance(schema.get("json"), dict):
                schema = schema["json"]  # Strands/Bedrock wrap the JSON schema
            if isinstance(name, str) and schema is not None:
                schemas[name] = schema
    schema = parse_json(span.attributes.get(sc.GEN_AI_TOOL_JSON_SCHEMA))
    if tool_name and isinstance(schema, dict):
        schemas[tool_name] = schema
    return schemas


def _tool_io(span: SpanRecord) -> tuple[Any, Any, bool]:
    """(arguments, result payload, has result) of an `execute_tool` span, in any convention."""
    arguments: Any = None
    raw_args = span.attributes.get(sc.GEN_AI_TOOL_CALL_ARGUMENTS)
    if raw_args is not None:
        arguments = parse_json(raw_args)
    result: Any = None
    has_result = False
    raw_result = span.attributes.get(sc.GEN_AI_TOOL_CALL_RESULT)
    if raw_result is not None:
        result, has_result = parse_json(raw_result), True
    for message in _messages(span, sc.GEN_AI_INPUT_MESSAGES):
        for part in _parts(message, "tool_call"):
            if arguments is None:
                arguments = parse_json(part.get("arguments"))
    for message in _messages(span, sc.GEN_AI_OUTPUT_MESSAGES):
        for part in _parts(message, "tool_call_response"):
            if not has_result:
                result, has_result = parse_json(part.get("response")), True
    for event in span.events:
        if event.name == sc.EV_GEN_AI_TOOL_MESSAGE and arguments is None:
            arguments = parse_json(event.attributes.get("content"))
        elif event.name == sc.EV_GEN_AI_CHOICE and not has_result:
            result, has_result = parse_json(event.attributes.get("message")), True
    return arguments, result, has_result


def _result_text(result: Any) -> str | None:
    """Tool result as text: Strands `[{"text": ...}]` content is unwrapped, JSON kept as JSON."""
    if (
        isinstance(result, (list, tuple))
        and result
        and all(isinstance(b, dict) and ("text" in b or "json" in b) for b in result)
    ):
        return _content_text(result)
    return as_text(result)


def _skill_body(tool: str, result: Any, text: str | None) -> str | None:
    """The SKILL.md text a successful load returned (ADK: `instructions`; Strands: the text)."""
    if isinstance(result, dict):
        for key in ("instructions", "body", "content"):
            if isinstance(result.get(key), str):
                return str(result[key])
        return None
    if text is None:
        return None
    return _STRANDS_SKILL_TAIL.sub("", text) if tool == "skills" else text


# --------------------------------------------------------------------------- the recogniser


class GenAIRecogniser:
    """Recognises OTel GenAI spans (Strands Agents, Google ADK, hand-instrumented code)."""

    name = "genai"

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        op = span.str_attr(sc.GEN_AI_OPERATION_NAME)
        if op is None and not any(k.startswith(_GEN_AI_PREFIX) for k in span.attributes):
            return None
        if op in sc.AGENT_TURN_OPERATIONS or span.name == sc.SPAN_INVOCATION_INTERNAL:
            return self._turn(span)
        if op == sc.OP_EXECUTE_TOOL or (op is None and span.name.startswith(_TOOL_PREFIX)):
            if span.str_attr(sc.GEN_AI_TOOL_NAME) == sc.ADK_MERGED_TOOLS:
                return []
            return [self._tool(span)]
        if op in sc.MODEL_OPERATIONS or (
            op is None and int_attr(span, sc.GEN_AI_USAGE_INPUT_TOKENS)
        ):
            return [self._model(span)]
        if op is not None:
            return []  # a GenAI span that is no agent activity (event-loop cycles, memory, ...)
        return None

    def _base(self, span: SpanRecord) -> dict[str, Any]:
        return {
            "span_id": span.span_id,
            "trace_id": span.trace_id,
            "parent_span_id": span.parent_span_id,
            "start_unix_nano": span.start_unix_nano,
            "end_unix_nano": span.end_unix_nano,
            "status": span.status,
            "preset": self.name,
        }

    def _turn(self, span: SpanRecord) -> list[Step]:
        agent = span.str_attr(sc.GEN_AI_AGENT_NAME) or span.str_attr(sc.GEN_AI_WORKFLOW_NAME)
        steps = [
            Step(
                kind="agent_turn",
                name=span.name,
                text=_last_user_text(span),
                agent_name=agent,
                catalogue=_catalogue(span),
                tool_schemas=_tool_schemas(span),
                error=span_error(span),
                **self._base(span),
            )
        ]
        # Token totals on turn spans are cumulative (Strands: over the agent's life), so the
        # turn step carries none; model-call spans carry the per-call usage.
        text, reason, _ = _output(span)
        if text and text.strip():
            steps.append(
                Step(
                    kind="final_answer",
                    name=span.name,
                    text=text.strip(),
                    finish_reason=reason,
                    agent_name=agent,
                    seq=1,
                    **self._base(span),
                )
            )
        return steps

    def _model(self, span: SpanRecord) -> Step:
        text, reason, _ = _output(span)
        if reason is None:
            reasons = span.attributes.get(sc.GEN_AI_RESPONSE_FINISH_REASONS)
            if isinstance(reasons, tuple) and reasons:
                reason = str(reasons[-1])
            elif isinstance(reasons, str):
                reason = reasons
        model = first_attr(span, sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_REQUEST_MODEL)
        return Step(
            kind="model_call",
            name=span.name,
            model=str(model) if model is not None else None,
            input_tokens=int_attr(
                span, sc.GEN_AI_USAGE_INPUT_TOKENS, sc.GEN_AI_USAGE_PROMPT_TOKENS
            ),
            output_tokens=int_attr(
                span, sc.GEN_AI_USAGE_OUTPUT_TOKENS, sc.GEN_AI_USAGE_COMPLETION_TOKENS
            ),
            finish_reason=reason,
            text=text,
            agent_name=span.str_attr(sc.GEN_AI_AGENT_NAME),
            catalogue=_catalogue(span),
            tool_schemas=_tool_schemas(span),
            error=span_error(span),
            **self._base(span),
        )

    def _tool(self, span: SpanRecord) -> Step:
        tool = span.str_attr(sc.GEN_AI_TOOL_NAME) or span.name[len(_TOOL_PREFIX) :].split(" ")[0]
        arguments, result, has_result = _tool_io(span)
        text = _result_text(result) if has_result else None
        payload_error = error_in_payload(result if isinstance(result, dict) else text)
        failure = span_error(span)
        tool_status = span.str_attr(sc.GEN_AI_TOOL_STATUS) or None
        common = {
            "name": tool,
            "tool_call_id": span.str_attr(sc.GEN_AI_TOOL_CALL_ID),
            "arguments": arguments,
            "result": text,
            "agent_name": span.str_attr(sc.GEN_AI_AGENT_NAME),
            "tool_schemas": _tool_schemas(span, tool),
            **self._base(span),
        }
        skill = skill_loader(tool, arguments)
        declared = span.str_attr(sc.GEN_AI_SKILL_NAME)
        # ADK stamps gen_ai.skill.name on resource reads and skill scripts too; those carry
        # gen_ai.skill.resource.name and are tool calls, not loads.
        if declared and span.attributes.get(sc.GEN_AI_SKILL_RESOURCE_NAME) is None:
            skill = declared
        if skill is not None:
            status, reason = skill_load_status(
                has_result=has_result or failure is not None,
                span_error=failure is not None,
                tool_status=tool_status,
                result_text=text,
                payload_error=payload_error,
            )
            error = failure or (reason if status == "failed" else None)
            body = _skill_body(tool, result, text) if status == "loaded" else None
            return Step(
                kind="skill_load",
                skill=skill,
                skill_status=status,
                skill_body=body,
                error=error,
                **common,
            )
        error = failure
        if error is None and tool_status and tool_status.lower() not in ("success", "ok"):
            error = text or f"tool status {tool_status!r}"
        return Step(kind="tool_call", error=error or payload_error, **common)

    def finalise(self, steps: list[Step], spans: Sequence[SpanRecord]) -> list[Step]:
        """Fill what a turn span did not record: the request and the final answer.

        Some instrumentations (Google ADK) record messages only on model-call spans: the request
        is then the last user text of the trace's first model call, and the final answer the
        last model output with text and a stop finish reason that asked for no tool.
        """
        by_id = {s.span_id: s for s in spans}
        out: list[Step] = []
        answered = {s.trace_id for s in steps if s.kind == "final_answer" and s.preset == self.name}
        models: dict[str, list[Step]] = {}
        for step in steps:
            if step.kind == "model_call" and step.preset == self.name:
                models.setdefault(step.trace_id, []).append(step)
        for calls in models.values():
            calls.sort(key=lambda s: (s.start_unix_nano, s.end_unix_nano))
        for step in steps:
            if step.kind == "agent_turn" and step.preset == self.name and not step.text:
                first = models.get(step.trace_id, [])
                span = by_id.get(first[0].span_id) if first else None
                if span is not None and (request := _last_user_text(span)):
                    step = dataclasses.replace(step, text=request)
            out.append(step)
        for trace_id, calls in models.items():
            if trace_id in answered or not any(
                s.kind == "agent_turn" and s.trace_id == trace_id for s in steps
            ):
                continue
            for call in sorted(calls, key=lambda s: s.end_unix_nano, reverse=True):
                span = by_id.get(call.span_id)
                if span is None:
                    continue
                text, reason, asked_tools = _output(span)
                if text and text.strip() and not asked_tools:
                    if (reason or "stop").lower() in _STOP_REASONS:
                        out.append(
                            dataclasses.replace(
                                call,
                                kind="final_answer",
                                text=text.strip(),
                                seq=1,
                                input_tokens=None,
                                output_tokens=None,
                                catalogue=(),
                                tool_schemas={},
                            )
                        )
                    break
        return out
