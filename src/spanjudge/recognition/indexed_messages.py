"""OpenLLMetry's legacy indexed message attributes, turned into GenAI message dicts.

Before `gen_ai.input.messages`, OpenLLMetry (traceloop's instrumentations, e.g.
opentelemetry-instrumentation-openai <= 0.52) flattened every message into attributes:
`gen_ai.prompt.N.role` / `.content` / `.tool_call_id` / `.tool_calls.M.{id,name,arguments}`
for the input and `gen_ai.completion.N.role` / `.content` / `.finish_reason` /
`.tool_calls.M.*` for the output, and the tools offered as `gen_ai.request.functions.N.*`
(or `llm.request.functions.N.*`). The GenAI readers (genai.py) fall back to these
when a span has no `gen_ai.input.messages` / `gen_ai.output.messages`: the result has the
same shape (`role`, `parts` of `text`, `tool_call`, `tool_call_response`, `finish_reason`), so
every rule that reads messages reads these too.
"""

from __future__ import annotations

from typing import Any

from spanjudge import semconv as sc
from spanjudge.recognition.base import joined_text_blocks, parse_json
from spanjudge.spans.record import SpanRecord

_MAX_MESSAGES = 1000  # a bound on the index walk, far above any real conversation
_MAX_CALLS = 128


def _message(span: SpanRecord, prefix: str) -> dict[str, Any] | None:
    attrs = span.attributes
    role = attrs.get(f"{prefix}.role")
    content = attrs.get(f"{prefix}.content")
    calls = []
    for m in range(_MAX_CALLS):
        name = attrs.get(f"{prefix}.tool_calls.{m}.name")
        if name is None:
            break
        calls.append(
            {
                "type": "tool_call",
                "id": attrs.get(f"{prefix}.tool_calls.{m}.id"),
                "name": name,
                "arguments": attrs.get(f"{prefix}.tool_calls.{m}.arguments"),
            }
        )
    if role is None and content is None and not calls:
        return None
    parts: list[dict[str, Any]] = []
    call_id = attrs.get(f"{prefix}.tool_call_id")
    blocks = block_parts(parse_json(content)) if isinstance(content, str) else None
    if role == "tool" or call_id is not None:
        parts.append({"type": "tool_call_response", "id": call_id, "response": content})
    elif blocks is not None:  # a provider's content blocks, written as JSON
        parts.extend(blocks)
    elif isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    parts.extend(calls)
    message: dict[str, Any] = {"role": role or "assistant", "parts": parts}
    reason = attrs.get(f"{prefix}.finish_reason")
    if reason is not None:
        message["finish_reason"] = reason
    return message


def block_parts(content: Any) -> list[dict[str, Any]] | None:
    """A message content of typed blocks that call tools or answer them, as GenAI parts:
    `tool_use` (`id`, `name`, `input`) as a `tool_call`, `tool_result` (`tool_use_id`,
    `content`, `is_error`) as a `tool_call_response` keeping `is_error`, `text` as text.
    None when the content holds no such block (it is read as it is)."""
    if not isinstance(content, list) or not any(
        isinstance(b, dict) and isinstance(b.get("type"), str) and b["type"] in _TOOL_BLOCKS
        for b in content
    ):
        return None
    parts: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_use":
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.get("id"),
                    "name": block.get("name"),
                    "arguments": block.get("input"),
                }
            )
        elif kind == "tool_result":
            content = block.get("content")
            joined = joined_text_blocks(content)  # a result's text blocks as its text
            part = {
                "type": "tool_call_response",
                "id": block.get("tool_use_id"),
                "response": content if joined is None else joined,
            }
            if block.get("is_error") is True:
                part["is_error"] = True
            parts.append(part)
        elif kind == "text" and isinstance(block.get("text"), str):
            parts.append({"type": "text", "content": block["text"]})
    return parts


_TOOL_BLOCKS = frozenset({"tool_use", "tool_result"})


def indexed_messages(span: SpanRecord, key: str) -> list[dict[str, Any]]:
    """The span's legacy indexed messages for `gen_ai.input.messages` (prompts) or
    `gen_ai.output.messages` (completions); empty when it has none."""
    base = (
        sc.GEN_AI_LEGACY_PROMPT if key == sc.GEN_AI_INPUT_MESSAGES else sc.GEN_AI_LEGACY_COMPLETION
    )
    if key not in (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES):
        return []
    out = []
    for n in range(_MAX_MESSAGES):
        message = _message(span, f"{base}.{n}")
        if message is None:
            break
        out.append(message)
    return out


# each legacy prefix of offered tools, with its first tool's name key
_FUNCTIONS = tuple(
    (base, f"{base}.0.name") for base in (sc.GEN_AI_LEGACY_FUNCTIONS, sc.LLM_LEGACY_FUNCTIONS)
)


def indexed_tool_definitions(span: SpanRecord) -> list[dict[str, Any]]:
    """The tools the span offered the model, flattened the same legacy way
    (`gen_ai.request.functions.N.name` / `.description` / `.parameters`, or under
    `llm.request.functions`), as `gen_ai.tool.definitions` items; empty when it has none."""
    attrs = span.attributes
    for base, first in _FUNCTIONS:
        if first not in attrs:
            continue
        out: list[dict[str, Any]] = []
        for n in range(_MAX_MESSAGES):
            name = attrs.get(f"{base}.{n}.name")
            if name is None:
                break
            definition: dict[str, Any] = {"name": name}
            description = attrs.get(f"{base}.{n}.description")
            if description is not None:
                definition["description"] = description
            parameters = attrs.get(f"{base}.{n}.parameters")
            if parameters is not None:
                definition["parameters"] = parse_json(parameters)
            out.append(definition)
        if out:
            return out
    return []


# A span holds indexed messages when it has one of these (the GenAI readers read them then).
MARKERS = tuple(
    f"{base}.0.{field}"
    for base in (sc.GEN_AI_LEGACY_PROMPT, sc.GEN_AI_LEGACY_COMPLETION)
    for field in ("role", "content")
)
