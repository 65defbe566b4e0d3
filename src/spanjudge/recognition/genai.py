"""OpenTelemetry GenAI semantic conventions, including Strands Agents and Google ADK specifics.

Three spellings of the same facts are read (ARCHITECTURE.md section 2):
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

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from spanjudge import semconv as sc
from spanjudge.recognition.base import (
    first_attr,
    int_attr,
    span_error,
    span_fields,
)
from spanjudge.recognition.evidence import ToolFacts, bodies_in, tool_step
from spanjudge.recognition.genai_messages import (
    GEN_AI_PREFIX,
    STOP_REASONS,
    TOOL_PREFIX,
    catalogue,
    continues_turn,
    input_texts,
    last_user_text,
    model_output,
    output,
    result_text,
    tool_io,
    tool_schemas,
)
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step


class GenAIRecogniser:
    """Recognises OTel GenAI spans (Strands Agents, Google ADK, hand-instrumented code)."""

    name = "genai"

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        op = span.str_attr(sc.GEN_AI_OPERATION_NAME)
        if op is None and not any(k.startswith(GEN_AI_PREFIX) for k in span.attributes):
            return None
        if op in sc.AGENT_TURN_OPERATIONS or span.name == sc.SPAN_INVOCATION_INTERNAL:
            return self._turn(span)
        if op == sc.OP_EXECUTE_TOOL or (op is None and span.name.startswith(TOOL_PREFIX)):
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
        return span_fields(span, self.name)

    def _turn(self, span: SpanRecord) -> list[Step]:
        agent = span.str_attr(sc.GEN_AI_AGENT_NAME) or span.str_attr(sc.GEN_AI_WORKFLOW_NAME)
        base = self._base(span)
        steps = [
            Step(
                kind="agent_turn",
                name=span.name,
                text=last_user_text(span),
                continuation=continues_turn(span),
                agent_name=agent,
                catalogue=catalogue(span),
                tool_schemas=tool_schemas(span),
                error=span_error(span),
                **base,
            )
        ]
        # Token totals on turn spans are cumulative (Strands: over the agent's life), so the
        # turn step carries none; model-call spans carry the per-call usage.
        text, reason, _ = output(span)
        if text and text.strip():
            steps.append(
                Step(
                    kind="final_answer",
                    name=span.name,
                    text=text.strip(),
                    finish_reason=reason,
                    agent_name=agent,
                    seq=1,
                    **base,
                )
            )
        return steps

    def _model(self, span: SpanRecord) -> Step:
        text, reason, _, requests = model_output(span)
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
            catalogue=catalogue(span),
            tool_schemas=tool_schemas(span),
            tool_requests=requests,
            bodies_seen=bodies_in(input_texts(span)),
            error=span_error(span),
            **self._base(span),
        )

    def _tool(self, span: SpanRecord) -> Step:
        tool = span.str_attr(sc.GEN_AI_TOOL_NAME) or span.name[len(TOOL_PREFIX) :].split(" ")[0]
        arguments, result, has_result = tool_io(span)
        declared = span.str_attr(sc.GEN_AI_SKILL_NAME)
        # ADK stamps gen_ai.skill.name on resource reads and skill scripts too; those carry
        # gen_ai.skill.resource.name and are tool calls, not loads.
        if span.attributes.get(sc.GEN_AI_SKILL_RESOURCE_NAME) is not None:
            declared = None
        error_type = span.str_attr(sc.ERROR_TYPE) if span.status != "error" else None
        facts = ToolFacts(
            tool=tool,
            arguments=arguments,
            result=result,
            result_text=result_text(result) if has_result else None,
            has_result=has_result,
            failure=span_error(span),
            tool_status=span.str_attr(sc.GEN_AI_TOOL_STATUS) or None,
            error_type=error_type,
            declared_skill=declared or None,
            call_id=span.str_attr(sc.GEN_AI_TOOL_CALL_ID),
            agent_name=span.str_attr(sc.GEN_AI_AGENT_NAME),
            tool_schemas=tool_schemas(span, tool),
        )
        return tool_step(facts, self._base(span))

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
                if span is not None and (request := last_user_text(span)):
                    step = replace(step, text=request)
            out.append(step)
        turn_traces = {s.trace_id for s in steps if s.kind == "agent_turn"}
        for trace_id, calls in models.items():
            if trace_id in answered or trace_id not in turn_traces:
                continue
            for call in sorted(calls, key=lambda s: s.end_unix_nano, reverse=True):
                span = by_id.get(call.span_id)
                if span is None:
                    continue
                text, reason, asked_tools = output(span)
                if text and text.strip() and not asked_tools:
                    if (reason or "stop").lower() in STOP_REASONS:
                        out.append(
                            replace(
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
