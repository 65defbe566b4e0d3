"""OpenInference preset: LangChain, LangGraph, Deep Agents and other OpenInference tracers.

ARCHITECTURE.md section 2, row OpenInference. What the spans look like (Deep Agents 0.7 through
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

Messages are read from `llm.{input,output}_messages.N.message.*`, from the serialised LangChain
messages in `input.value` / `output.value`, and tool schemas from `llm.tools.N.tool.json_schema`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from spanjudge import semconv
from spanjudge.recognition.answers import (
    ASSISTANT_ROLES,
    aborted_after,
    assistant_text,
    may_answer,
    object_repr,
)
from spanjudge.recognition.base import (
    ClaimEvidence,
    as_text,
    call_record_arguments,
    instructions_opening,
    int_attr,
    parse_json,
    shared_json,
    span_error,
    span_fields,
)
from spanjudge.recognition.catalogue import (
    offered_beside_a_loader,
    parse_catalogue,
    tool_catalogue,
)
from spanjudge.recognition.evidence import bodies_in, tool_step
from spanjudge.remembered import remembered_within
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import CatalogueEntry, Step, ToolRequest, ToolResult

PRESET = "openinference"
_TURN_KINDS = frozenset({"CHAIN", "AGENT"})
# A skill pinned as a user message: `<skill name="..." path="...">body</skill>`.
_PINNED = re.compile(r'\A<skill name="([^"]+)" path="([^"]*)">\n?(.*?)\n?</skill>\s*\Z', re.S)
_MESSAGE_KEY = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")
_CONTENT_TEXT = re.compile(r"^contents\.(\d+)\.message_content\.text$")
_TOOL_CALL_KEY = re.compile(
    r"^tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)$"
)
_TOOL_SCHEMA_KEY = re.compile(r"^llm\.tools\.(\d+)\.tool\.json_schema$")
# Deep Agents' SkillsMiddleware catalogue: "- **name**: description" under "**Available Skills:**".
_AVAILABLE_HEADING = re.compile(r"^\*\*Available Skills:?\*\*:?\s*$", re.M)
_NEXT_HEADING = re.compile(r"^\*\*", re.M)
_BOLD_SKILL = re.compile(r"^[-*]\s+\*\*([^*\n]+?)\*\*:\s*(.+?)\s*$", re.M)
USER_ROLES = frozenset({"user", "human"})


class OpenInferenceRecogniser:
    """Spans carrying `openinference.span.kind`; every other span is left to the next preset."""

    name = PRESET
    claim_evidence = ClaimEvidence(attributes=(semconv.OI_SPAN_KIND,))

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        kind = span.attributes.get(semconv.OI_SPAN_KIND)
        if not isinstance(kind, str):
            return None
        kind = kind.upper()
        if kind == "TOOL":
            return [self._tool(span)]
        if kind == "LLM":
            return [self._model_call(span)] if not _request_only(span) else []
        if kind in _TURN_KINDS and _is_turn_root(span, kind):
            return self._turn(span)
        return []

    def finalise(self, steps: list[Step], spans: Sequence[SpanRecord]) -> list[Step]:
        """Tool call ids and arguments from the parent ToolNode span; pinned skills; answers."""
        if not any(step.preset == PRESET for step in steps):
            # the first four below change and add only this preset's steps; these two read
            # every step (the spans by id only where a handoff may be)
            return _without_handoffs(_without_answer_channel(steps), spans)
        by_id = {s.span_id: s for s in spans}
        steps = self._tools_named_by_the_session(steps, by_id)
        out = _requests_from_model_input(
            [_with_call_from_parent(step, by_id) for step in steps], by_id
        )
        out.extend(_pinned_skill_loads(out, by_id))
        out.extend(_answers_from_output_records(out, by_id))
        answers = _final_answers(out)
        if answers:  # the model's last text replaces a turn output that printed an object
            replaced = {s.trace_id for s in answers}
            out = [s for s in out if not (s.trace_id in replaced and _printed_object(s))]
        out.extend(answers)
        out = _without_stop_signal(_without_failure_records(out, by_id), by_id)
        return _without_handoffs(_without_answer_channel(out), spans, by_id)

    def _tools_named_by_the_session(
        self, steps: list[Step], by_id: Mapping[str, SpanRecord]
    ) -> list[Step]:
        """A TOOL span that names no tool is named after the method it traced
        (`load_skill.__call__`): where the rest of the session names the tool by the part
        before the method (the model was offered it, asked for it, or its prompt lists it),
        and names neither the method nor the whole span name, the call is one of that tool.
        A namespaced name (`plugin.function`), whose last part the session names, stays. A
        dunder (`__call__`) is a Python protocol method, never a tool, whatever a traceback
        in the session says."""
        unnamed = [
            s
            for s in steps
            if s.preset == PRESET
            and s.kind in ("tool_call", "skill_load")
            and "." in s.name
            and (span := by_id.get(s.span_id)) is not None
            and semconv.OI_TOOL_NAME not in span.attributes
        ]
        if not unnamed:
            return steps
        offered, texts = _tools_and_texts(steps, by_id)
        renamed: dict[str, Step] = {}
        for step in unnamed:
            if _named(step.name, offered, texts):
                continue
            owner = step.name
            while "." in owner:
                owner = owner.rpartition(".")[0]
                method = step.name[len(owner) + 1 :]
                if not _dunder(method) and _named(method, offered, texts):
                    break
                if owner and _named(owner, offered, texts):
                    renamed[step.span_id] = self._tool(by_id[step.span_id], tool=owner)
                    break
        if not renamed:
            return steps
        return [renamed.get(s.span_id, s) if s.kind != "model_call" else s for s in steps]

    # --- one span -> one step -------------------------------------------------------------

    def _base(self, span: SpanRecord, kind: Any, name: str) -> dict[str, Any]:
        return {"kind": kind, "name": name, **span_fields(span, PRESET)}

    def _turn(self, span: SpanRecord) -> list[Step]:
        meta = _metadata(span)
        agent = span.attributes.get(semconv.OI_AGENT_NAME) or meta.get(semconv.LC_META_AGENT_NAME)
        turn = Step(
            **self._base(span, "agent_turn", span.name),
            text=user_request(span),
            agent_name=agent if isinstance(agent, str) and agent else None,
            error=span_error(span),
        )
        # What the agent itself returned (smolagents, Claude Agent SDK: plain text) wins over
        # raw model text; a graph's state (JSON) is no answer.
        output = span.attributes.get(semconv.OI_OUTPUT_VALUE)
        if not isinstance(output, str) or not output.strip():
            return [turn]
        # a framework's message JSON gives its last assistant text; other JSON, none
        text = output.strip() if parse_json(output) is output else assistant_text(output)
        if not text:
            return [turn]
        return [turn, replace(turn, kind="final_answer", text=text, seq=1)]

    def _model_call(self, span: SpanRecord) -> Step:
        model = span.attributes.get(semconv.OI_LLM_MODEL_NAME)
        inputs = messages(span, "input")
        outputs = messages(span, "output")
        texts = [m.text for m in outputs if m.text and m.role in ("assistant", "ai", "")]
        finish = span.attributes.get(semconv.OI_LLM_FINISH_REASON)
        catalogue: dict[str, CatalogueEntry] = {}
        for message in inputs:
            if message.role in ("system", "developer"):
                for entry in (*parse_catalogue(message.text), *deepagents_catalogue(message.text)):
                    catalogue.setdefault(entry.name, entry)
        for entry in tool_catalogue(_tool_definitions(span)):
            catalogue.setdefault(entry.name, entry)
        descriptions = tool_descriptions(span)
        if not catalogue and descriptions:
            system = "\n".join(m.text or "" for m in inputs if m.role in ("system", "developer"))
            for entry in offered_beside_a_loader(system, descriptions):
                catalogue.setdefault(entry.name, entry)
        return Step(
            **self._base(span, "model_call", model if isinstance(model, str) else span.name),
            model=model if isinstance(model, str) else None,
            input_tokens=int_attr(span, semconv.OI_LLM_TOKEN_PROMPT),
            output_tokens=int_attr(span, semconv.OI_LLM_TOKEN_COMPLETION),
            finish_reason=str(finish) if finish is not None else None,
            text="\n".join(texts) if texts else None,
            catalogue=tuple(catalogue.values()),
            tool_schemas=tool_schemas(span),
            tool_descriptions=descriptions,
            tool_requests=tuple(r for m in outputs for r in m.tool_calls),
            tool_results=tuple(
                ToolResult(call_id=m.tool_call_id, text=m.text)
                for m in inputs
                if m.role == "tool" and m.tool_call_id
            ),
            bodies_seen=bodies_in(m.text for m in inputs if m.role not in ("system", "developer")),
            request=_new_request(inputs),
            works_on=next(
                (m.text.strip() for m in reversed(inputs) if m.role in USER_ROLES and m.text),
                None,
            ),
            instructions=instructions_opening(
                "\n".join(m.text or "" for m in inputs if m.role in ("system", "developer"))
            ),
            error=span_error(span),
        )

    def _tool(self, span: SpanRecord, tool: str | None = None) -> Step:
        """The step of one TOOL span (``tool``: the tool's name, where the session shows it)."""
        output = span.attributes.get(semconv.OI_OUTPUT_VALUE)
        message = tool_message(parse_json(output))
        payload: Any = message if message is not None else parse_json(output)
        result = as_text(message.get("content")) if message is not None else as_text(payload)
        call_id = (message or {}).get("tool_call_id") or span.attributes.get(
            semconv.OI_TOOL_CALL_ID
        )
        tool_status = (message or {}).get("status")
        return tool_step(
            span,
            PRESET,
            tool=tool or span.str_attr(semconv.OI_TOOL_NAME) or span.name,
            arguments=fitting_arguments(
                call_record_arguments(parse_json(span.attributes.get(semconv.OI_INPUT_VALUE))),
                shared_json(span.attributes.get(semconv.OI_TOOL_JSON_SCHEMA)),
            ),
            # a ToolMessage's own status says whether the tool failed; its content is the result
            result=payload if message is None else message.get("content"),
            result_text=result,
            has_result=output is not None,
            failure=span_error(span),
            tool_status=tool_status if isinstance(tool_status, str) else None,
            error_type=span.str_attr(semconv.ERROR_TYPE) if span.status != "error" else None,
            call_id=str(call_id) if call_id else None,
            description=span.str_attr(semconv.OI_TOOL_DESCRIPTION),
        )


# --- span attribute readers ------------------------------------------------------------------


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
    prefix = f"llm.{direction}_messages."  # what every key _MESSAGE_KEY takes for it starts with
    for key in span.attributes:
        if key.startswith(prefix):
            break
    else:  # no message in this direction (every span of another convention): nothing to gather
        return []
    roles: dict[int, str] = {}
    content: dict[int, str] = {}
    texts: dict[int, dict[int, str]] = {}
    calls: dict[int, dict[int, dict[str, str]]] = {}
    call_ids: dict[int, str] = {}
    for key, value in span.attributes.items():
        if not key.startswith(prefix):
            continue
        match = _MESSAGE_KEY.match(key)
        if match is None or match.group(1) != direction or not isinstance(value, str):
            continue
        index, rest = int(match.group(2)), match.group(3)
        if rest == "role":
            roles[index] = value.lower()
        elif rest == "content":
            content[index] = value
        elif (part := _CONTENT_TEXT.match(rest)) is not None:
            texts.setdefault(index, {})[int(part.group(1))] = value
        elif (call := _TOOL_CALL_KEY.match(rest)) is not None:
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


def _new_request(inputs: list[Message]) -> str | None:
    """The user request a model call's input ends with (None: it ends with a tool result)."""
    last = inputs[-1] if inputs else None
    if last is None or last.role not in USER_ROLES or last.tool_call_id or not last.text:
        return None
    return last.text.strip() or None


def user_request(span: SpanRecord) -> str | None:
    """The last user message of the turn's input (the new request of this turn)."""
    value = parse_json(span.attributes.get(semconv.OI_INPUT_VALUE))
    if isinstance(value, str) and value.strip():
        return value.strip()
    items: Any = value
    if isinstance(value, Mapping):
        keys = ("messages", "input", "task", "query", "question", "prompt")
        items = next((value[k] for k in keys if value.get(k)), None)
        inner = [v for v in value.values() if isinstance(v, Mapping)]
        if items is None and len(inner) == 1:  # the run's arguments under one key of their own
            items = next((inner[0][k] for k in keys if inner[0].get(k)), None)
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
        if _TOOL_SCHEMA_KEY.match(key) is None:
            continue
        schema = shared_json(value)
        if not isinstance(schema, Mapping):
            continue
        nested = schema.get("function")
        function: Mapping[str, Any] = nested if isinstance(nested, Mapping) else schema
        name = function.get("name")
        if isinstance(name, str):
            schemas[name] = function.get("parameters") or function.get("input_schema") or {}
    return schemas


def tool_descriptions(span: SpanRecord) -> dict[str, str]:
    """Tool name -> description, from `llm.tools.N.tool.json_schema`."""
    found: dict[str, str] = {}
    for key, value in span.attributes.items():
        if _TOOL_SCHEMA_KEY.match(key) is None:
            continue
        schema = shared_json(value)
        nested = schema.get("function") if isinstance(schema, Mapping) else None
        function = nested if isinstance(nested, Mapping) else schema
        if isinstance(function, Mapping):
            name, description = function.get("name"), function.get("description")
            if isinstance(name, str) and isinstance(description, str) and description:
                found[name] = description
    return found


@remembered_within()  # the same system prompt reaches every LLM span of a session
def deepagents_catalogue(text: str | None) -> tuple[CatalogueEntry, ...]:
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


def fitting_arguments(value: Any, schema: Any) -> Any:
    """The arguments a tool was called with, where its span recorded the framework's call
    around them (BeeAI's `Tool.run(input, options)`: `{"input": {...}, "options": null}`):
    when ``value`` does not fit the tool's own parameter ``schema`` and exactly one mapping
    nested in it does, that mapping is the arguments. Otherwise ``value`` as recorded."""
    if not isinstance(value, Mapping) or not isinstance(schema, Mapping):
        return value
    if _fits(value, schema):
        return value
    fitting = [v for v in value.values() if isinstance(v, Mapping) and _fits(v, schema)]
    return fitting[0] if len(fitting) == 1 else value


def _fits(value: Mapping[str, Any], schema: Mapping[str, Any]) -> bool:
    """``value`` holds every property ``schema`` requires and, unless the schema allows
    others, none it does not name."""
    required = schema.get("required")
    if isinstance(required, list) and not {r for r in required if isinstance(r, str)} <= set(value):
        return False
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or schema.get("additionalProperties"):
        return True
    return set(value) <= set(properties)


def _tool_definitions(span: SpanRecord) -> str | None:
    """`llm.tools.N.tool.json_schema` as one JSON list (for skills listed in descriptions)."""
    raw = [
        v for k, v in span.attributes.items() if k.startswith("llm.tools.") and "skill" in str(v)
    ]
    return "[" + ",".join(str(v) for v in raw) + "]" if raw else None


def _request_only(span: SpanRecord) -> bool:
    """An LLM span that built a model request and got no response (LlamaIndex's
    `_prepare_chat_with_tools`): no token counts, finish reason or output messages, no error,
    and its output is the request itself, a `messages` list that does not end with the
    assistant's reply. A call whose instrumentation recorded less than that stays a call."""
    if span.status == "error" or any(
        key.startswith(("llm.token_count.", "llm.output_messages.")) for key in span.attributes
    ):
        return False
    if semconv.OI_LLM_FINISH_REASON in span.attributes:
        return False
    output = parse_json(span.attributes.get(semconv.OI_OUTPUT_VALUE))
    sent = output.get("messages") if isinstance(output, Mapping) else None
    if not isinstance(sent, list) or not sent:
        return False
    said = message_of(sent[-1])  # None: a message written as an object's repr
    return said is None or said[0] not in ASSISTANT_ROLES


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
    return replace(step, arguments=arguments, tool_call_id=call_id)


def _requests_from_model_input(steps: list[Step], by_id: Mapping[str, SpanRecord]) -> list[Step]:
    """A turn span that recorded no request (OpenAI Agents' AGENT spans, LlamaIndex's workflow
    run) takes the last user message of its trace's first LLM call that recorded one: a
    wrapper call around the client's may record no input messages."""
    if all(s.text for s in steps if s.kind == "agent_turn" and s.preset == PRESET):
        return steps
    first: dict[str, tuple[int, str]] = {}
    for step in steps:
        if step.kind != "model_call" or step.preset != PRESET:
            continue
        known = first.get(step.trace_id)
        if known is not None and known[0] <= step.start_unix_nano:
            continue
        span = by_id.get(step.span_id)
        if span is None:
            continue
        users = [m.text for m in messages(span, "input") if m.role in USER_ROLES and m.text]
        if users:
            first[step.trace_id] = (step.start_unix_nano, users[-1].strip())
    out = []
    for step in steps:
        found = first.get(step.trace_id)
        if step.kind == "agent_turn" and step.preset == PRESET and not step.text and found:
            step = replace(step, text=found[1])
        out.append(step)
    return out


def _pinned_skill_loads(steps: Sequence[Step], by_id: Mapping[str, SpanRecord]) -> list[Step]:
    """Skills pinned as `<skill name=...>` user messages: one load where each first appears."""
    calls = [s for s in steps if s.preset == PRESET and s.kind == "model_call"]
    if not calls:
        return []
    seen = {s.skill for s in steps if s.kind == "skill_load" and s.name == "pinned_skill"}
    loads = []
    for step in sorted(calls, key=lambda s: s.start_unix_nano):
        span = by_id.get(step.span_id)
        if span is None:
            continue
        for message in messages(span, "input"):
            match = _PINNED.match(message.text or "") if message.role in USER_ROLES else None
            if match is None or match.group(1) in seen:
                continue
            seen.add(match.group(1))
            loads.append(
                replace(
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


def _without_answer_channel(steps: list[Step]) -> list[Step]:
    """A tool the agent hands its answer to is how the answer was delivered, not a tool call:
    its argument is the turn's recorded answer, and either its result is that answer too
    (smolagents' `final_answer`) or no model asked for it (BeeAI's `final_answer`, which the
    agent calls itself with the model's last text: the model calls of its turn recorded what
    they asked for, and none asked for this tool by name or by call id)."""
    answers = {
        (s.trace_id, s.text) for s in steps if s.kind == "final_answer" and s.name != "final_answer"
    }
    if not answers:
        return steps
    heard: set[str] = set()  # traces whose model calls recorded what they said or asked for
    asked: set[tuple[str, str]] = set()
    for step in steps:
        if step.kind == "model_call" and (step.text or step.tool_requests):
            heard.add(step.trace_id)
            for request in step.tool_requests:
                asked.add((step.trace_id, request.name))
                if request.call_id:
                    asked.add((step.trace_id, request.call_id))
    return [s for s in steps if not _delivers_answer(s, answers, heard, asked)]


def _delivers_answer(
    step: Step,
    answers: set[tuple[str, str | None]],
    heard: set[str],
    asked: set[tuple[str, str]],
) -> bool:
    if step.kind != "tool_call":
        return False
    texts = _argument_texts(step.arguments)
    if step.result is not None and (step.trace_id, step.result.strip()) in answers:
        return step.result.strip() in texts
    unasked = (
        step.trace_id in heard
        and (step.trace_id, step.name) not in asked
        and (step.tool_call_id is None or (step.trace_id, step.tool_call_id) not in asked)
    )
    return unasked and len(texts) == 1 and (step.trace_id, texts[0]) in answers


def _without_failure_records(steps: list[Step], by_id: Mapping[str, SpanRecord]) -> list[Step]:
    """A TOOL span inside a TOOL span that names no tool of its own and repeats the outer
    call's arguments (BeeAI's `error` event span, `{"error": ..., "input": {...}}`) records
    the outer call's failure; it is no second call."""
    records = set()
    for step in steps:
        span = by_id.get(step.span_id) if step.kind == "tool_call" else None
        if span is None or semconv.OI_TOOL_NAME in span.attributes:
            continue
        parent = by_id.get(span.parent_span_id) if span.parent_span_id else None
        if parent is None or str(parent.attributes.get(semconv.OI_SPAN_KIND)).upper() != "TOOL":
            continue
        outer = fitting_arguments(
            call_record_arguments(parse_json(parent.attributes.get(semconv.OI_INPUT_VALUE))),
            shared_json(parent.attributes.get(semconv.OI_TOOL_JSON_SCHEMA)),
        )
        held = step.arguments
        if outer and isinstance(held, Mapping) and (held == outer or outer in held.values()):
            records.add(step.span_id)
    return [s for s in steps if s.span_id not in records] if records else steps


def _without_handoffs(
    steps: list[Step],
    spans: Sequence[SpanRecord],
    by_id: Mapping[str, SpanRecord] | None = None,
) -> list[Step]:
    """A TOOL span that names no tool and whose output is an agent that runs after it in the
    trace (OpenAI Agents' `handoff to <agent>`) moved the conversation; it ran no tool.
    (``by_id``: the spans by id, when already at hand.)"""
    if not any(
        semconv.OI_OUTPUT_VALUE in s.attributes and semconv.OI_TOOL_NAME not in s.attributes
        for s in spans
    ):  # only a span that records an output and names no tool can hand off
        return steps
    agents = [
        (s.trace_id, s.agent_name, s.start_unix_nano)
        for s in steps
        if s.kind == "agent_turn" and s.agent_name
    ]
    if not agents or not any(s.kind == "tool_call" for s in steps):
        return steps
    if by_id is None:
        by_id = {s.span_id: s for s in spans}
    handoffs = set()
    for step in steps:
        if step.kind != "tool_call":
            continue
        span = by_id.get(step.span_id)
        if span is None or semconv.OI_TOOL_NAME in span.attributes:
            continue
        output = span.attributes.get(semconv.OI_OUTPUT_VALUE)
        if output is None:  # no agent name to hand off to
            continue
        target = as_text(output)
        if any(
            t == step.trace_id and name == target and start >= step.start_unix_nano
            for t, name, start in agents
        ):
            handoffs.add(id(step))
    if not handoffs:
        return steps
    return [s for s in steps if id(s) not in handoffs]


def _argument_texts(arguments: Any) -> list[str]:
    """The texts a tool was called with: the arguments themselves, the values of a mapping or
    the items of a list; a number or a boolean holds none."""
    if isinstance(arguments, str):
        return [arguments.strip()]
    if isinstance(arguments, Mapping):
        values: Iterable[Any] = arguments.values()
    elif isinstance(arguments, (list, tuple)):
        values = arguments
    else:
        return []
    return [v.strip() for v in values if isinstance(v, str)]


def _final_answers(steps: Sequence[Step]) -> list[Step]:
    """Per turn (trace) without a recorded answer: the last LLM output, when it has a stop
    finish reason and asked for no tool, and the run was not aborted after it."""
    turns = [s for s in steps if s.preset == PRESET and s.kind == "agent_turn"]
    turn_traces = {s.trace_id for s in turns}
    answered = {s.trace_id for s in steps if s.kind == "final_answer" and not _printed_object(s)}
    last: dict[str, Step] = {}
    for step in steps:
        if (
            step.preset == PRESET
            and step.kind == "model_call"
            and step.trace_id in turn_traces
            and (step.text or step.tool_requests)
        ):
            known = last.get(step.trace_id)
            if known is None or step.end_unix_nano >= known.end_unix_nano:
                last[step.trace_id] = step
    return [
        replace(
            step,
            kind="final_answer",
            name="final_answer",
            seq=step.seq + 1,
            text=step.text.strip() if step.text else None,
            catalogue=(),
            tool_schemas={},
            tool_requests=(),
            bodies_seen=(),
            input_tokens=None,
            output_tokens=None,
        )
        for trace_id, step in last.items()
        if trace_id not in answered
        and may_answer(step, unrecorded_stops=False)
        and not aborted_after(step, turns)
    ]


def _tools_and_texts(
    steps: Sequence[Step], by_id: Mapping[str, SpanRecord]
) -> tuple[frozenset[str], list[str]]:
    """The tools the session's model calls were offered or asked for, and the texts of their
    messages (prompts that list tools, outputs that name the tool to run)."""
    offered: set[str] = set()
    texts: list[str] = []
    for step in steps:
        if step.preset != PRESET or step.kind != "model_call":
            continue
        offered.update(r.name for r in step.tool_requests)
        offered.update(step.tool_schemas)
        offered.update(step.tool_descriptions)
        span = by_id.get(step.span_id)
        if span is not None:
            for direction in ("input", "output"):
                texts.extend(m.text for m in messages(span, direction) if m.text)
    return frozenset(offered), texts


def _named(name: str, offered: frozenset[str], texts: Sequence[str]) -> bool:
    """The session names the tool ``name``: offered to or asked for by a model, or a word of
    its messages' texts."""
    if name in offered:
        return True
    word = re.compile(r"(?<![\w.])" + re.escape(name) + r"(?!\w)")
    return any(name in text and word.search(text) for text in texts)


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _printed_object(step: Step) -> bool:
    """A turn output of this preset that printed a result object (see `object_repr`)."""
    return step.kind == "final_answer" and step.preset == PRESET and object_repr(step.text)


def _answers_from_output_records(
    steps: Sequence[Step], by_id: Mapping[str, SpanRecord]
) -> list[Step]:
    """A turn whose output is a record of fields (`{"reasoning": ..., "answer": ...}`) that
    its last model text says field by field, each on lines of its own: the answer is the
    field the model said last, never the model's sectioned text whole."""
    answered = {s.trace_id for s in steps if s.kind == "final_answer"}
    last: dict[str, Step] = {}
    for step in steps:
        if step.preset == PRESET and step.kind == "model_call" and step.text:
            known = last.get(step.trace_id)
            if known is None or step.end_unix_nano >= known.end_unix_nano:
                last[step.trace_id] = step
    out = []
    for turn in sorted(steps, key=lambda s: s.start_unix_nano):
        said = last.get(turn.trace_id)
        span = by_id.get(turn.span_id)
        if (
            turn.preset != PRESET
            or turn.kind != "agent_turn"
            or turn.trace_id in answered
            or said is None
            or span is None
        ):
            continue
        record = parse_json(span.attributes.get(semconv.OI_OUTPUT_VALUE))
        text = _said_last(record, said.text or "") if isinstance(record, Mapping) else None
        # a model that said only the answer gives it the ordinary way (`_final_answers`)
        if text is not None and text != (said.text or "").strip():
            answered.add(turn.trace_id)
            out.append(replace(turn, kind="final_answer", text=text, seq=1))
    return out


def _said_last(record: Mapping[str, Any], said: str) -> str | None:
    """The text field of ``record`` that ``said`` holds last, where ``said`` holds every text
    field of it as lines of their own (None: the record is not what the model said)."""
    values = [v.strip() for v in record.values() if isinstance(v, str) and v.strip()]
    lines = "\n" + "\n".join(line.strip() for line in said.splitlines()) + "\n"
    found = [(lines.rfind("\n" + v + "\n"), v) for v in values]
    if not found or any(at < 0 for at, _ in found):
        return None
    return max(found)[1]


# A tool description that says calling it ends the task ("Marks the task as complete").
_ENDS_THE_TASK = re.compile(
    r"\b(?:marks?|signals?)\b[^.\n]{0,60}\b(?:complete|completed|finished|done|over|end)\b", re.I
)


def _without_stop_signal(steps: list[Step], by_id: Mapping[str, SpanRecord]) -> list[Step]:
    """The call a loop ends with (ReAct's `finish`) is its stop signal, not a tool call: a
    call with no arguments, the last of its trace, of a tool whose description (on the span,
    in the model's tool definitions, or on the prompt line that lists it) says calling it
    marks the task complete."""
    last: dict[str, Step] = {}
    for step in steps:
        if step.kind in ("tool_call", "skill_load"):
            known = last.get(step.trace_id)
            if known is None or step.start_unix_nano >= known.start_unix_nano:
                last[step.trace_id] = step
    signals = [
        s for s in last.values() if s.preset == PRESET and s.kind == "tool_call" and not s.arguments
    ]
    if not signals:
        return steps
    stops = {id(s) for s in signals if _ends_the_task(s, steps, by_id)}
    return [s for s in steps if id(s) not in stops] if stops else steps


def _ends_the_task(call: Step, steps: Sequence[Step], by_id: Mapping[str, SpanRecord]) -> bool:
    span = by_id.get(call.span_id)
    described = [span.str_attr(semconv.OI_TOOL_DESCRIPTION) if span is not None else None]
    word = re.compile(r"(?<![\w.])" + re.escape(call.name) + r"(?!\w)")
    for step in steps:
        if step.kind != "model_call" or step.trace_id != call.trace_id:
            continue
        described.append(step.tool_descriptions.get(call.name))
        model_span = by_id.get(step.span_id)
        for message in messages(model_span, "input") if model_span is not None else ():
            text = message.text or ""
            for match in word.finditer(text) if call.name in text else ():
                end = text.find("\n", match.end())
                described.append(text[match.end() : end if end >= 0 else len(text)])
    return any(d and _ENDS_THE_TASK.search(d) for d in described)
