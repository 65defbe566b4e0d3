"""smolagents preset: agent runs and tool calls as openinference-instrumentation-smolagents
records them.

What the spans look like (smolagents 1.26 through openinference-instrumentation-smolagents
0.1.43, see fixtures/smolagents/):

- each `agent.run(task)` is an AGENT span `<agent>.run`: `input.value` is the JSON of run()'s
  arguments (`{"task": ..., "reset": ...}`), `output.value` is what `final_answer` returned,
  which is the run's answer. A code agent's LLM output is "Thought: ... <code>...</code>": the
  plan and the program, never the answer;
- each tool call is a TOOL span named after the tool's class (`SimpleTool`, `FinalAnswerTool`)
  with the tool's own name in `tool.name`; `input.value` wraps the call as
  `{"args": [...], "sanitize_inputs_outputs": ..., "kwargs": {...}}`;
- `final_answer` is smolagents' answer channel, not a tool the agent used: its value is the
  agent span's output, which this preset takes as the answer;
- a managed agent (a team member) runs as an AGENT span nested in its manager's step: session
  assembly keeps the outermost run of a request as its turn, and its answer (it ends last).

LLM and step (CHAIN) spans are left to the OpenInference preset.
"""

from __future__ import annotations

from collections.abc import Mapping

from spanjudge import semconv
from spanjudge.recognition.base import (
    ClaimEvidence,
    as_text,
    call_record_arguments,
    parse_json,
    span_error,
    span_fields,
)
from spanjudge.recognition.evidence import tool_step
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step

PRESET = "smolagents"
SCOPE = semconv.SMOLAGENTS_SCOPE
# smolagents' FinalAnswerTool.name: the tool a run ends by calling with its answer.
ANSWER_TOOL = "final_answer"


class SmolagentsRecogniser:
    """AGENT and TOOL spans of the smolagents instrumentation; every other span passes on."""

    name = PRESET
    claim_evidence = ClaimEvidence(scopes=(SCOPE,))

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        if span.scope_name != SCOPE:
            return None
        kind = str(span.attributes.get(semconv.OI_SPAN_KIND) or "").upper()
        if kind == "AGENT":
            return self._run(span)
        if kind == "TOOL":
            return self._tool(span)
        return None

    def _run(self, span: SpanRecord) -> list[Step]:
        arguments = parse_json(span.attributes.get(semconv.OI_INPUT_VALUE))
        task = arguments.get("task") if isinstance(arguments, Mapping) else None
        agent = span.name.removesuffix(".run") or None
        base = span_fields(span, PRESET)
        steps = [
            Step(
                kind="agent_turn",
                name=span.name,
                text=as_text(task),
                agent_name=agent,
                error=span_error(span),
                **base,
            )
        ]
        answer = as_text(span.attributes.get(semconv.OI_OUTPUT_VALUE))
        if answer and answer.strip() and span.status != "error":
            steps.append(
                Step(kind="final_answer", name=span.name, text=answer.strip(), seq=1, **base)
            )
        return steps

    def _tool(self, span: SpanRecord) -> list[Step]:
        tool = span.str_attr(semconv.OI_TOOL_NAME) or span.name
        if tool == ANSWER_TOOL:
            return []
        output = span.attributes.get(semconv.OI_OUTPUT_VALUE)
        return [
            tool_step(
                span,
                PRESET,
                tool=tool,
                arguments=call_record_arguments(
                    parse_json(span.attributes.get(semconv.OI_INPUT_VALUE))
                ),
                result=parse_json(output),
                result_text=as_text(output),
                has_result=output is not None,
                failure=span_error(span),
            )
        ]


__all__ = ["SmolagentsRecogniser"]
