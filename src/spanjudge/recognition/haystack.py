"""Haystack's own tracer (`opentelemetry-haystack`): `haystack.agent.run` / `.step` / `.step.llm`
/ `.step.tool` spans whose facts live in `haystack.*` attributes (content tracing on).

Where each fact is:
- the request: the last user message of `haystack.agent.input` (`{"messages": [...]}`); the
  answer: `last_message` of `haystack.agent.output` when it asks for no tool;
- a model call: `haystack.agent.step.llm`, usage and finish reason in the `meta` of each reply
  of `haystack.agent.step.llm.output` (`{"replies": [...]}`); the input is often a Python repr,
  not JSON (Tools do not serialise), so only the catalogue is read from it;
- a tool call: `haystack.agent.step.tool` with `haystack.tool.name`, the arguments and result in
  `haystack.agent.step.tool.input` / `.output`; a failure is `haystack.tool.error=true` with
  `{"error": ...}` as output, the span status staying UNSET. `SkillToolset` lists its skills in
  `load_skill`'s `haystack.tool.description`.
Whether a tool call loaded a skill, and with what status, is the shared evidence rules' call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from spanjudge import semconv as sc
from spanjudge.recognition.base import (
    ClaimEvidence,
    as_text,
    parse_json,
    span_error,
    span_fields,
)
from spanjudge.recognition.catalogue import parse_catalogue
from spanjudge.recognition.evidence import tool_step
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import CatalogueEntry, Step

# span name -> what it is; other `haystack.*` spans (steps, pipelines, components) add no step
_KINDS = {
    sc.SPAN_HAYSTACK_AGENT_RUN: "turn",
    sc.SPAN_HAYSTACK_LLM: "model",
    sc.SPAN_HAYSTACK_TOOL: "tool",
}
# a Python string literal in the llm input repr: a Tool's description, a message's text
_LITERAL = re.compile(r"""(?:description|text)=("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")
# reply meta usage keys: OpenAI-style generators, then Anthropic/Google-style ones
_INPUT_TOKENS = ("prompt_tokens", "input_tokens")
_OUTPUT_TOKENS = ("completion_tokens", "output_tokens")


class HaystackRecogniser:
    """Recognises Haystack Agent spans from its own OpenTelemetry tracer."""

    name = "haystack"
    claim_evidence = ClaimEvidence(name_prefixes=(sc.HAYSTACK_PREFIX,))

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        if not span.name.startswith(sc.HAYSTACK_PREFIX):
            return None
        kind = _KINDS.get(span.name)
        if kind == "turn":
            return self._turn(span)
        if kind == "model":
            return [self._model(span)]
        if kind == "tool":
            return [self._tool(span)]
        return []

    def _turn(self, span: SpanRecord) -> list[Step]:
        base = span_fields(span, self.name)
        inputs = parse_json(span.attributes.get(sc.HAYSTACK_AGENT_INPUT))
        request = None
        if isinstance(inputs, dict):
            users = [m for m in _list(inputs.get("messages")) if _role(m) == "user"]
            request = _text(users[-1]) if users else None
        steps = [
            Step(kind="agent_turn", name=span.name, text=request, error=span_error(span), **base)
        ]
        outputs = parse_json(span.attributes.get(sc.HAYSTACK_AGENT_OUTPUT))
        last = outputs.get("last_message") if isinstance(outputs, dict) else None
        answer = _text(last) if isinstance(last, dict) and not _tool_calls(last) else None
        if answer and answer.strip():
            meta = last.get("meta") if isinstance(last, dict) else None
            reason = meta.get("finish_reason") if isinstance(meta, dict) else None
            steps.append(
                Step(
                    kind="final_answer",
                    name=span.name,
                    text=answer.strip(),
                    finish_reason=str(reason) if reason else None,
                    seq=1,
                    **base,
                )
            )
        return steps

    def _model(self, span: SpanRecord) -> Step:
        output = parse_json(span.attributes.get(sc.HAYSTACK_LLM_OUTPUT))
        replies = (
            [r for r in _list(output.get("replies")) if isinstance(r, dict)]
            if isinstance(output, dict)
            else []
        )
        input_tokens = output_tokens = None
        model = reason = None
        texts: list[str] = []
        for reply in replies:
            meta = _dict(reply.get("meta"))
            usage = _dict(meta.get("usage"))
            input_tokens = _add(input_tokens, _first_int(usage, _INPUT_TOKENS))
            output_tokens = _add(output_tokens, _first_int(usage, _OUTPUT_TOKENS))
            model = model or meta.get("model")
            reason = "tool_calls" if _tool_calls(reply) else (meta.get("finish_reason") or reason)
            if text := _text(reply):
                texts.append(text)
        raw_input = span.attributes.get(sc.HAYSTACK_LLM_INPUT)
        return Step(
            kind="model_call",
            name=span.name,
            model=str(model) if model else None,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            finish_reason=str(reason) if reason else None,
            text="\n".join(texts) or None,
            catalogue=_input_catalogue(raw_input if isinstance(raw_input, str) else None),
            error=span_error(span),
            **span_fields(span, self.name),
        )

    def _tool(self, span: SpanRecord) -> Step:
        raw = span.attributes.get(sc.HAYSTACK_TOOL_OUTPUT)
        result = parse_json(raw)
        failure = span_error(span)
        if span.attributes.get(sc.HAYSTACK_TOOL_ERROR) is True:
            detail = result.get("error") if isinstance(result, dict) else None
            failure = failure or as_text(detail) or "haystack.tool.error is true"
        description = span.str_attr(sc.HAYSTACK_TOOL_DESCRIPTION)
        step = tool_step(
            span,
            self.name,
            tool=span.str_attr(sc.HAYSTACK_TOOL_NAME) or "tool",
            arguments=parse_json(span.attributes.get(sc.HAYSTACK_TOOL_INPUT)),
            result=result,
            has_result=raw is not None,
            failure=failure,
            description=description,
        )
        catalogue = _catalogue(description)
        return replace(step, catalogue=catalogue) if catalogue else step  # (a step has none)


def _catalogue(text: str | None) -> tuple[CatalogueEntry, ...]:
    return parse_catalogue(text) if text else ()


def _input_catalogue(text: str | None) -> tuple[CatalogueEntry, ...]:
    """Skills listed in the llm input's messages and tool descriptions. The input is JSON when
    everything in it serialises, else a Python repr: there each `description=` / `text=`
    literal is decoded on its own, so no other repr text joins an entry."""
    if not text or "skill" not in text.lower():
        return ()
    decoded = parse_json(text)
    if decoded is not text:
        strings = list(_strings(decoded))
    else:
        import ast  # only here: a Python-literal payload (`ast` costs a millisecond to import)

        strings = []
        for literal in _LITERAL.findall(text):
            try:
                value = ast.literal_eval(literal)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, str):
                strings.append(value)
    entries: dict[str, CatalogueEntry] = {}
    for string in strings:
        for entry in parse_catalogue(string):
            entries.setdefault(entry.name, entry)
    return tuple(entries.values())


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _role(message: Any) -> str | None:
    return str(message.get("role")) if isinstance(message, dict) else None


def _text(message: Any) -> str | None:
    """A Haystack ChatMessage dict's text parts (`content: [{"text": ...}, ...]`)."""
    if not isinstance(message, dict):
        return None
    parts = [
        str(p["text"])
        for p in _list(message.get("content"))
        if isinstance(p, dict) and isinstance(p.get("text"), str)
    ]
    return "\n".join(parts) or None


def _tool_calls(message: dict[str, Any]) -> list[Any]:
    return [p for p in _list(message.get("content")) if isinstance(p, dict) and p.get("tool_call")]


def _first_int(usage: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _add(total: int | None, value: int | None) -> int | None:
    if value is None:
        return total
    return value if total is None else total + value
