"""Reading OpenInference message attributes (`llm.input_messages.N...`, `input.value`,
`output.value`, `llm.tools.N...`) and the Deep Agents skill catalogue."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from spanjudge import semconv
from spanjudge.recognition.base import (
    parse_json,
)
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import CatalogueEntry, ToolRequest

MESSAGE_KEY = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")
CONTENT_TEXT = re.compile(r"^contents\.(\d+)\.message_content\.text$")
TOOL_CALL_KEY = re.compile(
    r"^tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)$"
)
TOOL_SCHEMA_KEY = re.compile(r"^llm\.tools\.(\d+)\.tool\.json_schema$")
AVAILABLE_HEADING = re.compile(r"^\*\*Available Skills:?\*\*:?\s*$", re.M)
NEXT_HEADING = re.compile(r"^\*\*", re.M)
BOLD_SKILL = re.compile(r"^[-*]\s+\*\*([^*\n]+?)\*\*:\s*(.+?)\s*$", re.M)
USER_ROLES = frozenset({"user", "human"})


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    text: str | None
    tool_calls: tuple[ToolRequest, ...] = ()
    tool_call_id: str | None = None


def messages(span: SpanRecord, direction: str) -> list[Message]:
    """Flattened `llm.{input,output}_messages.N.message.*` attributes, in index order.

    OpenInference may write a message's text twice, as `message.content` and as
    `message.contents.N.message_content.text`: the parts are used when present, else the
    content, never both.
    """
    roles: dict[int, str] = {}
    content: dict[int, str] = {}
    texts: dict[int, dict[int, str]] = {}
    calls: dict[int, dict[int, dict[str, str]]] = {}
    call_ids: dict[int, str] = {}
    prefix = f"llm.{direction}_messages."  # what every key MESSAGE_KEY takes for it starts with
    for key, value in span.attributes.items():
        if not key.startswith(prefix):
            continue
        match = MESSAGE_KEY.match(key)
        if match is None or match.group(1) != direction or not isinstance(value, str):
            continue
        index, rest = int(match.group(2)), match.group(3)
        if rest == "role":
            roles[index] = value.lower()
        elif rest == "content":
            content[index] = value
        elif (part := CONTENT_TEXT.match(rest)) is not None:
            texts.setdefault(index, {})[int(part.group(1))] = value
        elif (call := TOOL_CALL_KEY.match(rest)) is not None:
            calls.setdefault(index, {}).setdefault(int(call.group(1)), {})[call.group(2)] = value
        elif rest == "tool_call_id":
            call_ids[index] = value
    out = []
    for i in sorted(set(roles) | set(texts) | set(content) | set(calls)):
        joined = "".join(t for _, t in sorted(texts[i].items())) if i in texts else None
        requests = tuple(
            ToolRequest(
                name=fields.get("function.name", ""),
                call_id=fields.get("id"),
                arguments=parse_json(fields.get("function.arguments")),
            )
            for _, fields in sorted(calls.get(i, {}).items())
        )
        out.append(
            Message(
                role=roles.get(i, ""),
                text=joined or content.get(i),
                tool_calls=requests,
                tool_call_id=call_ids.get(i),
            )
        )
    return out


def content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p if isinstance(p, str) else str(p.get("text", ""))
            for p in content
            if isinstance(p, str) or (isinstance(p, Mapping) and p.get("type") == "text")
        ]
        return "".join(parts) if parts else None
    return None


def message_of(item: Any) -> tuple[str, str | None] | None:
    """(role, text) of one serialised LangChain message in any of its spellings."""
    if isinstance(item, Mapping):
        if item.get("lc") == 1 and isinstance(item.get("kwargs"), Mapping):
            ident = item.get("id") or []
            cls = str(ident[-1]) if isinstance(ident, list) and ident else ""
            kind = "user" if cls.startswith("Human") else cls.removesuffix("Message").lower()
            return kind, content_text(item["kwargs"].get("content"))
        data = item.get("data")
        if isinstance(data, Mapping) and "content" in data:
            return str(item.get("type", "")).lower(), content_text(data.get("content"))
        role = item.get("role") or item.get("type")
        if role is not None:
            return str(role).lower(), content_text(item.get("content"))
    if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str):
        return item[0].lower(), content_text(item[1])
    return None


def user_request(span: SpanRecord) -> str | None:
    """The last user message of the turn's input (the new request of this turn)."""
    value = parse_json(span.attributes.get(semconv.OI_INPUT_VALUE))
    if isinstance(value, str) and value.strip():
        return value.strip()
    items: Any = value
    if isinstance(value, Mapping):
        keys = ("messages", "input", "task", "query", "question", "prompt")
        items = next((value[k] for k in keys if value.get(k)), None)
    if isinstance(items, str):
        return items.strip() or None
    if isinstance(items, list):
        # LangChain batches chat inputs as a list of message lists.
        flat = [m for sub in items for m in sub] if items and isinstance(items[0], list) else items
        for item in reversed(flat):
            message = message_of(item)
            if message is not None and message[0] in USER_ROLES and message[1]:
                return message[1].strip()
    for msg in reversed(messages(span, "input")):
        if msg.role in USER_ROLES and msg.text:
            return msg.text.strip()
    return None


def tool_message(payload: Any) -> dict[str, Any] | None:
    """The fields of a serialised LangChain ToolMessage (`{"type": "tool", "data": {...}}`)."""
    if not isinstance(payload, Mapping):
        return None
    if payload.get("type") == "tool" and isinstance(payload.get("data"), Mapping):
        return dict(payload["data"])
    kwargs = payload.get("kwargs")
    ident = payload.get("id")
    if (
        payload.get("lc") == 1
        and isinstance(kwargs, Mapping)
        and isinstance(ident, list)
        and ident
        and ident[-1] == "ToolMessage"
    ):
        return dict(kwargs)
    return None


def tool_schemas(span: SpanRecord) -> dict[str, Any]:
    """Tool name -> JSON schema of its parameters, from `llm.tools.N.tool.json_schema`."""
    schemas: dict[str, Any] = {}
    for key, value in span.attributes.items():
        if TOOL_SCHEMA_KEY.match(key) is None:
            continue
        schema = parse_json(value)
        if not isinstance(schema, Mapping):
            continue
        nested = schema.get("function")
        function: Mapping[str, Any] = nested if isinstance(nested, Mapping) else schema
        name = function.get("name")
        if isinstance(name, str):
            schemas[name] = function.get("parameters") or function.get("input_schema") or {}
    return schemas


@lru_cache(maxsize=512)  # the same system prompt reaches every LLM span of a session
def deepagents_catalogue(text: str | None) -> tuple[CatalogueEntry, ...]:
    if not text:
        return ()
    heading = AVAILABLE_HEADING.search(text)
    if heading is None:
        return ()
    section = text[heading.end() :]
    end = NEXT_HEADING.search(section)
    section = section[: end.start()] if end else section
    return tuple(
        CatalogueEntry(name=n.strip(), description=d) for n, d in BOLD_SKILL.findall(section)
    )


_CALL_WRAPPER = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})


def call_arguments(value: Any) -> Any:
    """A Python call recorded as `{"args": [...], "kwargs": {...}}` (smolagents) is its
    keyword arguments (or its positional ones when there are none)."""
    if isinstance(value, Mapping) and "kwargs" in value and set(value) <= _CALL_WRAPPER:
        kwargs, args = value.get("kwargs"), value.get("args")
        return kwargs if kwargs or not args else args
    return value
