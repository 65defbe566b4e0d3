"""OpenInference preset: LangChain, LangGraph, Deep Agents and other OpenInference tracers.

DESIGN section 2, row OpenInference. What the spans look like (Deep Agents 0.7 through
openinference-instrumentation-langchain 0.1.80, see fixtures/deepagents/):

- the turn is the graph's root run, `openinference.span.kind=CHAIN` named `LangGraph` (or the
  agent's name); its `input.value` holds the new user message. Middleware nodes whose names
  contain "agent" get kind AGENT although they are internals, so kind alone is no turn signal;
- each tool execution is a TOOL span (`tool.name`, `input.value`, `output.value`) under a
  `tools` CHAIN span whose `input.value` is the tool call with its id and full arguments;
- a failed tool often returns a ToolMessage with `status: error`: the TOOL span status stays OK
  and the error lives only inside `output.value`; a raising tool gives status ERROR;
- skills load through `read_file` of `/skills/<name>/SKILL.md`, or are pinned as a user message
  `<skill name="..." path="...">body</skill>`; the catalogue is the "**Available Skills:**"
  list (or an `<available_skills>` block) of the system prompt on every LLM span.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from spanjudge import semconv
from spanjudge.recognition.base import (
    as_text,
    error_in_payload,
    int_attr,
    parse_catalogue,
    parse_json,
    skill_load_status,
    span_error,
)
from spanjudge.recognition.skill_tools import FILE_READ_TOOLS, skill_from_path, skill_loader
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import CatalogueEntry, Step

PRESET = "openinference"
_TURN_KINDS = frozenset({"CHAIN", "AGENT"})
_STOP_REASONS = frozenset({"stop", "end_turn", "stop_sequence", "complete", "completed"})
_USER_ROLES = frozenset({"user", "human"})
_MESSAGE_KEY = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")
_CONTENT_TEXT = re.compile(r"^contents\.(\d+)\.message_content\.text$")
_TOOL_SCHEMA_KEY = re.compile(r"^llm\.tools\.(\d+)\.tool\.json_schema$")
# Deep Agents' read_file prefixes a window header to the file text it returns.
_READ_WINDOW = re.compile(r"\A@@ lines \d+-\d+ of \d+ @@\r?\n")
# Deep Agents' SkillsMiddleware catalogue: "- **name**: description" under "**Available Skills:**".
_AVAILABLE_HEADING = re.compile(r"^\*\*Available Skills:?\*\*:?\s*$", re.M)
_NEXT_HEADING = re.compile(r"^\*\*", re.M)
_BOLD_SKILL = re.compile(r"^[-*]\s+\*\*([^*\n]+?)\*\*:\s*(.+?)\s*$", re.M)
_PINNED = re.compile(r'\A<skill name="([^"]+)" path="([^"]*)">\n?(.*?)\n?</skill>\s*\Z', re.S)


@dataclasses.dataclass(frozen=True, slots=True)
class _Message:
    role: str
    text: str | None


class OpenInferenceRecogniser:
    """Spans carrying `openinference.span.kind`; every other span is left to the next preset."""

    name = PRESET

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        kind = span.attributes.get(semconv.OI_SPAN_KIND)
        if not isinstance(kind, str):
            return None
        kind = kind.upper()
        if kind == "TOOL":
            return [self._tool(span)]
        if kind == "LLM":
            return [self._model_call(span)]
        if kind in _TURN_KINDS and _is_turn_root(span, kind):
            return [self._turn(span)]
        return []

    def finalise(self, steps: list[Step], spans: Sequence[SpanRecord]) -> list[Step]:
        """Tool call ids and arguments from the parent ToolNode span; pinned skills; answers."""
        by_id = {s.span_id: s for s in spans}
        out = [_with_call_from_parent(step, by_id) for step in steps]
        out.extend(_pinned_skill_loads(out, by_id))
        out.extend(_final_answers(out))
        return out

    # --- one span -> one step -------------------------------------------------------------

    def _base(self, span: SpanRecord, kind: Any, name: str) -> dict[str, Any]:
        return {
            "kind": kind,
            "name": name,
            "span_id": span.span_id,
            "trace_id": span.trace_id,
            "parent_span_id": span.parent_span_id,
            "start_unix_nano": span.start_unix_nano,
            "end_unix_nano": span.end_unix_nano,
            "status": span.status,
            "preset": PRESET,
        }

    def _turn(self, span: SpanRecord) -> Step:
        meta = _metadata(span)
        agent = span.attributes.get(semconv.OI_AGENT_NAME) or meta.get(semconv.LC_META_AGENT_NAME)
        return Step(
            **self._base(span, "agent_turn", span.name),
            text=_user_request(span),
            agent_name=agent if isinstance(agent, str) and agent else None,
            error=span_error(span),
        )

    def _model_call(self, span: SpanRecord) -> Step:
        model = span.attributes.get(semconv.OI_LLM_MODEL_NAME)
        inputs = _messages(span, "input")
        outputs = _messages(span, "output")
        texts = [m.text for m in outputs if m.text and m.role in ("assistant", "ai", "")]
        finish = span.attributes.get(semconv.OI_LLM_FINISH_REASON)
        catalogue: dict[str, CatalogueEntry] = {}
        for message in inputs:
            if message.role == "system":
                for entry in (*parse_catalogue(message.text), *_deepagents_catalogue(message.text)):
                    catalogue.setdefault(entry.name, entry)
        return Step(
            **self._base(span, "model_call", model if isinstance(model, str) else span.name),
            model=model if isinstance(model, str) else None,
            input_tokens=int_attr(span, semconv.OI_LLM_TOKEN_PROMPT),
            output_tokens=int_attr(span, semconv.OI_LLM_TOKEN_COMPLETION),
            finish_reason=str(finish) if finish is not None else None,
            text="\n".join(texts) if texts else None,
            catalogue=tuple(catalogue.values()),
            tool_schemas=_tool_schemas(span),
            error=span_error(span),
        )

    def _tool(self, span: SpanRecord) -> Step:
        tool_name = span.str_attr(semconv.OI_TOOL_NAME) or span.name
        raw_input = span.attributes.get(semconv.OI_INPUT_VALUE)
        arguments = parse_json(raw_input)
        output = span.attributes.get(semconv.OI_OUTPUT_VALUE)
        message = _tool_message(parse_json(output))
        payload: Any = message if message is not None else parse_json(output)
        result = as_text(message.get("content")) if message is not None else as_text(payload)
        payload_error = error_in_payload(payload)
        call_id = (message or {}).get("tool_call_id") or span.attributes.get(
            semconv.OI_TOOL_CALL_ID
        )
        failure = span_error(span)
        fields = self._base(span, "tool_call", tool_name)
        fields.update(
            tool_call_id=str(call_id) if call_id else None,
            arguments=arguments,
            result=result,
            error=failure or payload_error,
        )
        skill = skill_loader(tool_name, arguments)
        if skill is None and isinstance(arguments, str) and _is_file_read(tool_name):
            # A one-argument tool records the bare value instead of a JSON object.
            skill = skill_from_path(arguments)
        if skill is None:
            return Step(**fields)
        tool_status = (message or {}).get("status")
        status, reason = skill_load_status(
            has_result=output is not None,
            span_error=span.status == "error",
            tool_status=tool_status if isinstance(tool_status, str) else None,
            result_text=result,
            payload_error=payload_error,
        )
        fields.update(kind="skill_load", skill=skill, skill_status=status)
        if status == "loaded" and result is not None:
            fields["skill_body"] = _READ_WINDOW.sub("", result, count=1)
        elif status == "failed":
            fields["error"] = failure or payload_error or reason
        return Step(**fields)


# --- span attribute readers ------------------------------------------------------------------


def _metadata(span: SpanRecord) -> Mapping[str, Any]:
    value = parse_json(span.attributes.get(semconv.OI_METADATA))
    return value if isinstance(value, Mapping) else {}


def _is_turn_root(span: SpanRecord, kind: str) -> bool:
    """A chain or agent with no parent, a LangGraph run at the top of its graph, or an agent.

    Runs nested inside a LangGraph node inherit `langgraph_node` in their metadata (Deep Agents
    middleware nodes are AGENT spans of that sort); the graph's own root run does not, even when
    a web framework span is its parent. Turns nested inside another turn span are dropped again
    by session assembly, so an AGENT span of another framework may safely be offered as one.
    """
    if span.parent_span_id is None:
        return True
    meta = _metadata(span)
    if semconv.LC_META_GRAPH_NODE in meta:
        return False
    if kind == "AGENT":
        return True
    return semconv.LC_META_THREAD_ID in meta or semconv.LC_META_AGENT_NAME in meta


def _messages(span: SpanRecord, direction: str) -> list[_Message]:
    """Flattened `llm.{input,output}_messages.N.message.*` attributes, in index order."""
    roles: dict[int, str] = {}
    texts: dict[int, dict[int, str]] = {}
    for key, value in span.attributes.items():
        match = _MESSAGE_KEY.match(key)
        if match is None or match.group(1) != direction or not isinstance(value, str):
            continue
        index, rest = int(match.group(2)), match.group(3)
        if rest == "role":
            roles[index] = value.lower()
        elif rest == "content":
            texts.setdefault(index, {})[-1] = value
        elif (part := _CONTENT_TEXT.match(rest)) is not None:
            texts.setdefault(index, {})[int(part.group(1))] = value
    indices = sorted(set(roles) | set(texts))
    return [
        _Message(
            role=roles.get(i, ""),
            text="".join(t for _, t in sorted(texts[i].items())) if i in texts else None,
        )
        for i in indices
    ]


def _content_text(content: Any) -> str | None:
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


def _message_of(item: Any) -> tuple[str, str | None] | None:
    """(role, text) of one serialised LangChain message in any of its spellings."""
    if isinstance(item, Mapping):
        if item.get("lc") == 1 and isinstance(item.get("kwargs"), Mapping):
            ident = item.get("id") or []
            cls = str(ident[-1]) if isinstance(ident, list) and ident else ""
            kind = "user" if cls.startswith("Human") else cls.removesuffix("Message").lower()
            return kind, _content_text(item["kwargs"].get("content"))
        data = item.get("data")
        if isinstance(data, Mapping) and "content" in data:
            return str(item.get("type", "")).lower(), _content_text(data.get("content"))
        role = item.get("role") or item.get("type")
        if role is not None:
            return str(role).lower(), _content_text(item.get("content"))
    if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str):
        return item[0].lower(), _content_text(item[1])
    return None


def _user_request(span: SpanRecord) -> str | None:
    """The last user message of the turn's input (the new request of this turn)."""
    value = parse_json(span.attributes.get(semconv.OI_INPUT_VALUE))
    if isinstance(value, str) and value.strip():
        return value.strip()
    items: Any = value.get("messages", value.get("input")) if isinstance(value, Mapping) else value
    if isinstance(items, str):
        return items.strip() or None
    if isinstance(items, list):
        # LangChain batches chat inputs as a list of message lists.
        flat = [m for sub in items for m in sub] if items and isinstance(items[0], list) else items
        for item in reversed(flat):
            message = _message_of(item)
            if message is not None and message[0] in _USER_ROLES and message[1]:
                return message[1].strip()
    for msg in reversed(_messages(span, "input")):
        if msg.role in _USER_ROLES and msg.text:
            return msg.text.strip()
    return None


def _tool_message(payload: Any) -> dict[str, Any] | None:
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


def _tool_schemas(span: SpanRecord) -> dict[str, Any]:
    """Tool name -> JSON schema of its parameters, from `llm.tools.N.tool.json_schema`."""
    schemas: dict[str, Any] = {}
    for key, value in span.attributes.items():
        if _TOOL_SCHEMA_KEY.match(key) is None:
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


def _deepagents_catalogue(text: str | None) -> tuple[CatalogueEntry, ...]:
    if not text:
        return ()
    heading = _AVAILABLE_HEADING.search(text)
    if heading is None:
        return ()
    section = text[heading.end() :]
    end = _NEXT_HEADING.search(section)
    section = section[: end.start()] if end else section
    return tuple(
        CatalogueEntry(name=n.strip(), description=d) for n, d in _BOLD_SKILL.findall(section)
    )


def _is_file_read(tool_name: str) -> bool:
    return tool_name in FILE_READ_TOOLS or tool_name.endswith("read_file")


# --- finalise helpers ------------------------------------------------------------------------


def _parent_calls(parent: SpanRecord | None) -> list[Mapping[str, Any]]:
    """Tool calls recorded on a LangGraph ToolNode (`tools`) span's input."""
    if parent is None:
        return []
    value = parse_json(parent.attributes.get(semconv.OI_INPUT_VALUE))
    if isinstance(value, Mapping):
        value = value.get("tool_calls") or value.get("input")
    if not isinstance(value, list):
        return []
    return [c for c in value if isinstance(c, Mapping) and "name" in c and "args" in c]


def _with_call_from_parent(step: Step, by_id: Mapping[str, SpanRecord]) -> Step:
    if step.preset != PRESET or step.kind not in ("tool_call", "skill_load"):
        return step
    if step.tool_call_id is not None and isinstance(step.arguments, Mapping):
        return step
    parent = by_id.get(step.parent_span_id) if step.parent_span_id else None
    calls = [c for c in _parent_calls(parent) if c.get("name") == step.name]
    if step.tool_call_id is not None:
        calls = [c for c in calls if c.get("id") == step.tool_call_id] or calls
    if len(calls) != 1:
        return step
    call = calls[0]
    arguments = call["args"] if isinstance(call["args"], Mapping) else step.arguments
    call_id = step.tool_call_id or (str(call["id"]) if call.get("id") else None)
    return dataclasses.replace(step, arguments=arguments, tool_call_id=call_id)


def _pinned_skill_loads(steps: Sequence[Step], by_id: Mapping[str, SpanRecord]) -> list[Step]:
    """Skills pinned as `<skill name=...>` user messages: one load where each first appears."""
    seen = {s.skill for s in steps if s.kind == "skill_load" and s.name == "pinned_skill"}
    loads = []
    for step in sorted(steps, key=lambda s: s.start_unix_nano):
        span = by_id.get(step.span_id)
        if step.preset != PRESET or step.kind != "model_call" or span is None:
            continue
        for message in _messages(span, "input"):
            match = _PINNED.match(message.text or "") if message.role in _USER_ROLES else None
            if match is None or match.group(1) in seen:
                continue
            seen.add(match.group(1))
            loads.append(
                dataclasses.replace(
                    step,
                    kind="skill_load",
                    name="pinned_skill",
                    seq=step.seq - 1,
                    skill=match.group(1),
                    skill_status="loaded",
                    skill_body=match.group(3),
                    arguments={"path": match.group(2)},
                    result=None,
                    text=None,
                    catalogue=(),
                    tool_schemas={},
                    model=None,
                    input_tokens=None,
                    output_tokens=None,
                    finish_reason=None,
                    error=None,
                    status="ok",
                )
            )
    return loads


def _final_answers(steps: Sequence[Step]) -> list[Step]:
    """Per turn (trace): the last LLM output with a stop finish reason, unless one exists."""
    turn_traces = {s.trace_id for s in steps if s.preset == PRESET and s.kind == "agent_turn"}
    answered = {s.trace_id for s in steps if s.kind == "final_answer"}
    last: dict[str, Step] = {}
    for step in steps:
        if (
            step.preset == PRESET
            and step.kind == "model_call"
            and step.trace_id in turn_traces
            and step.text
            and (step.finish_reason or "").lower() in _STOP_REASONS
        ):
            known = last.get(step.trace_id)
            if known is None or step.end_unix_nano >= known.end_unix_nano:
                last[step.trace_id] = step
    return [
        dataclasses.replace(
            step,
            kind="final_answer",
            name="final_answer",
            seq=step.seq + 1,
            text=step.text.strip() if step.text else None,
            catalogue=(),
            tool_schemas={},
            input_tokens=None,
            output_tokens=None,
        )
        for trace_id, step in last.items()
        if trace_id not in answered
    ]


__all__ = ["OpenInferenceRecogniser"]
