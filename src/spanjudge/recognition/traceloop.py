"""OpenLLMetry's decorator spans (traceloop-sdk `@workflow`, `@agent`, `@task`, `@tool`).

Where each fact is: `traceloop.span.kind` says what the span is; `traceloop.entity.name` is
the function's (or the given) name; `traceloop.entity.input` is `{"args": [...], "kwargs":
{...}}` of the call and `traceloop.entity.output` its return value, both JSON. A workflow or
agent span is a turn whose answer is its output when that is text; the request is the last user
message of the turn's first model call (the decorator records arguments, not which is the
request). A tool span is a tool call whose arguments are its keyword arguments. The model calls
inside are `gen_ai.*` spans, read by the GenAI preset (legacy indexed messages included).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from spanjudge import semconv as sc
from spanjudge.recognition.answers import assistant_text
from spanjudge.recognition.base import (
    ClaimEvidence,
    as_text,
    call_record_arguments,
    parse_json,
    span_error,
    span_fields,
)
from spanjudge.recognition.evidence import tool_step
from spanjudge.recognition.genai import last_user_text
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step

_TURN_KINDS = frozenset({"workflow", "agent"})
_TOOL_KINDS = frozenset({"tool"})


class TraceloopRecogniser:
    """Recognises traceloop-sdk decorator spans: workflows and agents as turns, tools as calls."""

    name = "traceloop"
    claim_evidence = ClaimEvidence(attributes=(sc.TRACELOOP_SPAN_KIND,))

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        kind = span.str_attr(sc.TRACELOOP_SPAN_KIND)
        # Newer OpenLLMetry puts GenAI attributes on these spans too (and its model calls carry
        # the workflow's name): there the GenAI preset reads them.
        if kind is None or any(k.startswith("gen_ai.") for k in span.attributes):
            return None
        if kind in _TURN_KINDS:
            return self._turn(span)
        if kind in _TOOL_KINDS:
            return [self._tool(span)]
        return []  # tasks and other decorated functions: structure, no agent activity

    def _turn(self, span: SpanRecord) -> list[Step]:
        base = span_fields(span, self.name)
        name = span.str_attr(sc.TRACELOOP_ENTITY_NAME)
        steps = [
            Step(kind="agent_turn", name=span.name, agent_name=name, error=span_error(span), **base)
        ]
        answer = assistant_text(parse_json(span.attributes.get(sc.TRACELOOP_ENTITY_OUTPUT)))
        if answer:
            steps.append(
                Step(
                    kind="final_answer",
                    name=span.name,
                    text=answer.strip(),
                    agent_name=name,
                    seq=1,
                    **base,
                )
            )
        return steps

    def _tool(self, span: SpanRecord) -> Step:
        raw = span.attributes.get(sc.TRACELOOP_ENTITY_OUTPUT)
        result = parse_json(raw) if raw is not None else None
        return tool_step(
            span,
            self.name,
            tool=span.str_attr(sc.TRACELOOP_ENTITY_NAME) or span.name.removesuffix(".tool"),
            arguments=call_record_arguments(
                parse_json(span.attributes.get(sc.TRACELOOP_ENTITY_INPUT))
            ),
            result=result,
            result_text=as_text(result) if raw is not None else None,
            has_result=raw is not None,
            failure=span_error(span),
            error_type=span.str_attr(sc.ERROR_TYPE),
        )

    def finalise(self, steps: list[Step], spans: Sequence[SpanRecord]) -> list[Step]:
        """A turn's request: the last user message of the first model call in its trace."""
        if not any(s.kind == "agent_turn" and s.preset == self.name and not s.text for s in steps):
            return steps  # no turn of ours without its request: nothing to fill
        by_id = {s.span_id: s for s in spans}
        first: dict[str, Step] = {}
        for step in steps:
            if step.kind == "model_call":
                known = first.get(step.trace_id)
                if known is None or step.start_unix_nano < known.start_unix_nano:
                    first[step.trace_id] = step
        out = []
        for step in steps:
            if step.kind == "agent_turn" and step.preset == self.name and not step.text:
                model = first.get(step.trace_id)
                span = by_id.get(model.span_id) if model else None
                if span is not None and (request := last_user_text(span)):
                    step = replace(step, text=request)
            out.append(step)
        return out
