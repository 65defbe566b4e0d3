"""Google ADK's older `gcp.vertex.agent.*` attributes (ADK 1.x), read where GenAI keys are absent.

ADK 1.x records the model request and response only as JSON in `gcp.vertex.agent.llm_request`
(`{"model", "config": {"system_instruction", ...}, "contents": [...]}`) and
`gcp.vertex.agent.llm_response` (`{"content": {"parts": [...]}, "finish_reason", ...}`) on its
`call_llm` spans, and a tool call's arguments and result in `gcp.vertex.agent.tool_call_args` /
`gcp.vertex.agent.tool_response` on `execute_tool` spans. Contents are google-genai `Content`
dicts: `parts` of `text`, `function_call` (`id`, `name`, `args`) and `function_response`.
With content capture off ADK writes `{}` placeholders; those say nothing and are read as absent.
The GenAI readers (genai_messages.py) fall back to these functions.
"""

from __future__ import annotations

from typing import Any

from spanjudge import semconv as sc
from spanjudge.recognition.base import parse_json
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import ToolRequest

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
    return [p for p in parts or () if isinstance(p, dict)] if isinstance(parts, list) else []


def _text(parts: list[dict[str, Any]]) -> str | None:
    texts = [
        str(p["text"]) for p in parts if isinstance(p.get("text"), str) and not p.get("thought")
    ]
    return "\n".join(texts) or None


def request_text(span: SpanRecord) -> str | None:
    """The last user text of the request's contents (function responses are `user` too)."""
    request = _payload(span, sc.GCP_VERTEX_AGENT_LLM_REQUEST)
    contents = request.get("contents") if request else None
    for content in reversed(contents if isinstance(contents, list) else []):
        text = _text(_parts(content)) if isinstance(content, dict) else None
        if text and content.get("role") == "user":
            return text
    return None


def system_text(span: SpanRecord) -> str | None:
    request = _payload(span, sc.GCP_VERTEX_AGENT_LLM_REQUEST)
    config = request.get("config") if request else None
    instruction = config.get("system_instruction") if isinstance(config, dict) else None
    if isinstance(instruction, str):
        return instruction or None
    return _text(_parts(instruction))


def output(span: SpanRecord) -> tuple[str | None, str | None, bool]:
    """(text, finish reason, asked for tools) of the model response."""
    response = _payload(span, sc.GCP_VERTEX_AGENT_LLM_RESPONSE)
    if response is None:
        return None, None, False
    parts = _parts(response.get("content"))
    reason = response.get("finish_reason")
    asked = any(isinstance(p.get("function_call"), dict) for p in parts)
    return _text(parts), str(reason).lower() if reason else None, asked


def tool_requests(span: SpanRecord) -> tuple[ToolRequest, ...]:
    response = _payload(span, sc.GCP_VERTEX_AGENT_LLM_RESPONSE)
    calls = [
        p["function_call"]
        for p in _parts(response.get("content") if response else None)
        if isinstance(p.get("function_call"), dict)
    ]
    return tuple(
        ToolRequest(
            name=str(c.get("name") or ""),
            call_id=str(c["id"]) if c.get("id") else None,
            arguments=c.get("args"),
        )
        for c in calls
    )


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
