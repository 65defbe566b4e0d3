"""Google ADK's older `gcp.vertex.agent.*` attributes (ADK 1.x), read where GenAI keys are absent.

ADK 1.x records the model request and response only as JSON in `gcp.vertex.agent.llm_request`
(`{"model", "config": {"system_instruction", ...}, "contents": [...]}`) and
`gcp.vertex.agent.llm_response` (`{"content": {"parts": [...]}, "finish_reason", ...}`) on its
`call_llm` spans, and a tool call's arguments and result in `gcp.vertex.agent.tool_call_args` /
`gcp.vertex.agent.tool_response` on `execute_tool` spans. Contents are google-genai `Content`
dicts: `parts` of `text`, `function_call` (`id`, `name`, `args`) and `function_response`.
With content capture off ADK writes `{}` placeholders; those say nothing and are read as absent.
`content_message` reads a `Content` given as a structured value (ADK Go's `gen_ai.choice` log
records hold the model's output so, its parts' keys in camelCase).
The GenAI readers (genai.py) fall back to these: contents become GenAI message dicts
(`role`, `parts` of `text`, `tool_call`, `tool_call_response`), so every rule that reads
messages (requests, answers, tool requests, replayed turns) reads these too.
"""

from __future__ import annotations

from typing import Any

from spanjudge import semconv as sc
from spanjudge.recognition.base import parse_json
from spanjudge.spans.record import SpanRecord

# ADK's stand-in when a tool call produced no function response event
_NOT_SPECIFIED = "<not specified>"


def _payload(span: SpanRecord, key: str) -> dict[str, Any] | None:
    raw = span.attributes.get(key)
    if not isinstance(raw, str):
        return None
    decoded = parse_json(raw)
    return decoded if isinstance(decoded, dict) and decoded else None


def _parts(content: Any) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, (list, tuple)) else []


def _text(parts: list[dict[str, Any]]) -> str | None:
    texts = [
        str(p["text"]) for p in parts if isinstance(p.get("text"), str) and not p.get("thought")
    ]
    return "\n".join(texts) or None


def _message(content: Any, finish_reason: Any = None) -> dict[str, Any] | None:
    """A google-genai `Content` dict as a GenAI message dict (role, parts)."""
    if not isinstance(content, dict):
        return None
    parts: list[dict[str, Any]] = []
    for part in _parts(content):
        # (snake_case as Python's google-genai dumps a Part, camelCase as its JSON mapping is)
        call = part.get("function_call", part.get("functionCall"))
        response = part.get("function_response", part.get("functionResponse"))
        if isinstance(part.get("text"), str) and not part.get("thought"):
            parts.append({"type": "text", "content": part["text"]})
        elif isinstance(call, dict):
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": call.get("name"),
                    "arguments": call.get("args"),
                }
            )
        elif isinstance(response, dict):
            parts.append(
                {
                    "type": "tool_call_response",
                    "id": response.get("id"),
                    "response": response.get("response"),
                }
            )
    message: dict[str, Any] = {"role": str(content.get("role") or "model"), "parts": parts}
    if finish_reason:
        message["finish_reason"] = str(finish_reason).lower()
    return message


def content_message(content: Any) -> dict[str, Any] | None:
    """A google-genai `Content` recorded as a structured value (a mapping with `parts`, as a
    log record's body holds it) as a GenAI message dict; None for anything else."""
    if not isinstance(content, dict) or not isinstance(content.get("parts"), (list, tuple)):
        return None
    return _message(content)


def vertex_messages(span: SpanRecord, key: str) -> list[dict[str, Any]]:
    """The request's contents (`gen_ai.input.messages`) or the response's content
    (`gen_ai.output.messages`) as GenAI message dicts; empty when the span has none."""
    if key == sc.GEN_AI_INPUT_MESSAGES:
        request = _payload(span, sc.GCP_VERTEX_AGENT_LLM_REQUEST)
        contents = request.get("contents") if request else None
        found = [_message(c) for c in contents] if isinstance(contents, list) else []
        return [m for m in found if m is not None]
    if key == sc.GEN_AI_OUTPUT_MESSAGES:
        response = _payload(span, sc.GCP_VERTEX_AGENT_LLM_RESPONSE)
        message = (
            _message(response.get("content"), response.get("finish_reason")) if response else None
        )
        return [message] if message is not None else []
    return []


def system_text(span: SpanRecord) -> str | None:
    request = _payload(span, sc.GCP_VERTEX_AGENT_LLM_REQUEST)
    if request is None:  # (most spans: not ADK 1.x's)
        return None
    config = request.get("config")
    instruction = config.get("system_instruction") if isinstance(config, dict) else None
    if isinstance(instruction, str):
        return instruction or None
    return _text(_parts(instruction))


def tool_io(span: SpanRecord) -> tuple[Any, Any, bool]:
    """(arguments, result payload, has result) of an ADK 1.x `execute_tool` span."""
    raw_args = span.attributes.get(sc.GCP_VERTEX_AGENT_TOOL_CALL_ARGS)
    # `{}` is a no-argument call, or capture switched off: either way no argument is known
    arguments = parse_json(raw_args) if isinstance(raw_args, str) else None
    response = _payload(span, sc.GCP_VERTEX_AGENT_TOOL_RESPONSE)
    if response is None:
        return arguments, None, False
    # ADK wraps a non-dict result as {"result": value}
    if set(response) == {"result"}:
        if response["result"] == _NOT_SPECIFIED:
            return arguments, None, False
        return arguments, response["result"], True
    return arguments, response, True
