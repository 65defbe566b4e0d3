"""OpenTelemetry GenAI semantic conventions, including Strands Agents and Google ADK specifics.

Three spellings of the same facts are read (ARCHITECTURE.md section 2):
- v1.36 events: `gen_ai.user.message`, `gen_ai.system.message`, `gen_ai.tool.message`,
  `gen_ai.choice` (Strands' default), a choice's message under `message` or, as a google-genai
  `Content` (`role`, `parts`), under `content` (ADK Go's log records);
- latest experimental: `gen_ai.client.inference.operation.details` events carrying
  `gen_ai.input.messages` / `gen_ai.output.messages` / `gen_ai.system_instructions`;
- attributes only: the same keys as span attributes (Strands' `gen_ai_span_attributes_only`,
  ADK, hand-instrumented code).

Strands specifics: agent spans carry cumulative token totals (never counted as model calls),
`execute_event_loop_cycle` spans are claimed without steps, and the AgentSkills `skills` tool
answers an unknown skill with a success status and refusal text.

The message readers below read every spelling, and fall back to OpenLLMetry's indexed attributes
(`indexed_messages`) and ADK 1.x's `LlmRequest` (`vertex_agent`); the Traceloop preset and the
continuity check read messages through them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from spanjudge import semconv as sc
from spanjudge.recognition import vertex_agent
from spanjudge.recognition.answers import assistant_text, is_message, message_text
from spanjudge.recognition.base import (
    as_text,
    call_message,
    first_attr,
    instructions_opening,
    int_attr,
    marked_failed,
    parse_arguments,
    parse_json,
    read_json,
    shared_json,
    span_error,
    span_fields,
)
from spanjudge.recognition.catalogue import (
    described_catalogue,
    offered_beside_a_loader,
    parse_catalogue,
    tool_catalogue,
)
from spanjudge.recognition.evidence import bodies_in, tool_step
from spanjudge.recognition.indexed_messages import MARKERS as INDEXED_MARKERS
from spanjudge.recognition.indexed_messages import (
    block_parts,
    indexed_messages,
    indexed_tool_definitions,
)
from spanjudge.remembered import remembered_within
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.assemble import is_stop_reason
from spanjudge.trajectory.steps import CatalogueEntry, Step, ToolRequest, ToolResult

TOOL_PREFIX = "execute_tool "
GEN_AI_PREFIX = "gen_ai."


# --------------------------------------------------------------------------- payload helpers


# The span whose messages were decoded last, with them by key: a preset reads a span's input
# and output messages for several facts in a row. (A tuple read and replaced whole: threads
# that recognise different spans each keep their own.)
_last: tuple[SpanRecord | None, dict[str, list[dict[str, Any]]]] = (None, {})


def messages(span: SpanRecord, key: str) -> list[dict[str, Any]]:
    """Decoded `gen_ai.input.messages` / `gen_ai.output.messages` (latest conventions).
    Callers never change what it returns (it is shared by the calls on one span)."""
    global _last
    memo = _last
    if memo[0] is not span:
        memo = (span, _none_recorded(span))
        _last = memo
    found = memo[1].get(key)
    if found is None:
        found = memo[1][key] = _messages(span, key)
    return found


# The attributes `_messages` reads messages from, in any of its forms.
_MESSAGE_KEYS = frozenset(
    (
        sc.GEN_AI_INPUT_MESSAGES,
        sc.GEN_AI_OUTPUT_MESSAGES,
        sc.GCP_VERTEX_AGENT_LLM_REQUEST,
        sc.GEN_AI_LEGACY_PROMPT,
        sc.GEN_AI_LEGACY_COMPLETION,
        *INDEXED_MARKERS,
    )
)


def _none_recorded(span: SpanRecord) -> dict[str, list[dict[str, Any]]]:
    """Both message lists when the span records messages in none of the forms `_messages`
    reads (most spans: v1.36 events, or no content at all), with one look at it; else {}."""
    if not span.attributes.keys().isdisjoint(_MESSAGE_KEYS):
        return {}
    for event in span.events:
        if event.name == sc.EV_GEN_AI_INFERENCE_DETAILS:
            return {}
    return {sc.GEN_AI_INPUT_MESSAGES: [], sc.GEN_AI_OUTPUT_MESSAGES: []}


def _messages(span: SpanRecord, key: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    attributes = span.attributes
    found = attributes.get(key)  # `values`, inline: twice per span
    if found is not None:
        out.extend(_decoded(found) if isinstance(found, str) else _message_list(found))
    for event in span.events:
        if event.name == sc.EV_GEN_AI_INFERENCE_DETAILS:
            found = event.attributes.get(key)
            if found is not None:
                out.extend(_decoded(found) if isinstance(found, str) else _message_list(found))
    if out:
        return out
    if not attributes.keys().isdisjoint(INDEXED_MARKERS):
        return indexed_messages(span, key)
    if sc.GCP_VERTEX_AGENT_LLM_REQUEST in attributes:  # ADK 1.x's LlmRequest
        return vertex_agent.vertex_messages(span, key)
    return _whole_legacy(attributes, key)


def _whole_legacy(attributes: Any, key: str) -> list[dict[str, Any]]:
    """Messages an older spelling keeps whole in `gen_ai.prompt` (a message list, or a request
    object with `messages`) and `gen_ai.completion` (the response object: its `text`)."""
    legacy = (
        sc.GEN_AI_LEGACY_PROMPT if key == sc.GEN_AI_INPUT_MESSAGES else sc.GEN_AI_LEGACY_COMPLETION
    )
    found = attributes.get(legacy)
    decoded = read_json(found) if isinstance(found, str) else None
    if isinstance(decoded, dict) and key == sc.GEN_AI_INPUT_MESSAGES:
        decoded = decoded.get("messages")
    elif isinstance(decoded, dict) and "role" not in decoded:
        decoded = [{**decoded, "role": "assistant"}]
    return list(_message_list(decoded)) if isinstance(decoded, (list, dict)) else []


@remembered_within()  # the same span's messages are read for its text, tools and turn shape
def _decoded(value: str) -> tuple[dict[str, Any], ...]:
    return _message_list(read_json(value))


def _message_list(decoded: Any) -> tuple[dict[str, Any], ...]:
    if isinstance(decoded, dict):
        decoded = [decoded]
    if isinstance(decoded, (list, tuple)):
        return tuple(_with_parts(_chosen(m)) for m in decoded if isinstance(m, dict))
    return ()


def _chosen(entry: dict[str, Any]) -> dict[str, Any]:
    """An output written as a chat completion's choice (`{"finish_reason", "index",
    "message": {"role", "content", "tool_calls"}}`, the response's `choices` as they are) is
    the message it holds, with the choice's finish reason; an entry that is a message itself
    is left as it is."""
    message = entry.get("message")
    if not isinstance(message, dict) or is_message(entry):
        return entry
    if not is_message(message) and "tool_calls" not in message:
        return entry
    reason = entry.get("finish_reason")
    return {**message, "finish_reason": reason} if reason else message


def _with_parts(message: dict[str, Any]) -> dict[str, Any]:
    """A message written with a provider's content blocks that call tools or answer them
    (`tool_use`, `tool_result`), given the GenAI parts they stand for."""
    if "parts" in message:
        return message
    blocks = block_parts(message.get("content"))
    return message if blocks is None else {**message, "parts": blocks}


def block_text(block: Any) -> str | None:
    """Text of one content block: OTel part, Strands/Bedrock block or plain string."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return None
    if block.get("type") in (None, "text") and isinstance(block.get("content"), str):
        return str(block["content"])
    if isinstance(block.get("text"), str):
        return str(block["text"])
    if "json" in block:
        return as_text(block["json"])
    return None


def content_text(content: Any) -> str | None:
    """Join the text of a message's content (a string, a block list, or a JSON string of them)."""
    if isinstance(content, str):
        return _text_of(content)
    return _content_text(content)


@remembered_within()  # every model call repeats the conversation so far (and its system
def _text_of(content: str) -> str | None:  # prompt): each message's text is joined once
    return _content_text(read_json(content))


def _content_text(content: Any) -> str | None:
    if isinstance(content, dict):
        if "parts" in content:  # an OTel message
            return content_text(content["parts"])
        if isinstance(content.get("content"), (list, tuple)):  # a v1.36 message with blocks
            return content_text(content["content"])
        return block_text(content)
    if isinstance(content, (list, tuple)):
        texts = [t for t in (block_text(b) for b in content) if t]
        return "\n".join(texts) if texts else None
    return content if isinstance(content, str) else None


def parts(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [p for p in _parts(message) if isinstance(p, dict) and p.get("type") == kind]


def _parts(message: dict[str, Any]) -> Any:
    """A message's `parts`; anything but a list of them (`"parts": true`) holds none."""
    found = message.get("parts")
    return found if isinstance(found, (list, tuple)) else ()


def last_user_text(span: SpanRecord) -> str | None:
    for message in reversed(messages(span, sc.GEN_AI_INPUT_MESSAGES)):
        if message.get("role") == "user" and parts(message, "text"):
            return content_text(parts(message, "text"))
    for event in reversed(span.events):
        if event.name == sc.EV_GEN_AI_USER_MESSAGE:
            text = content_text(event.attributes.get("content"))
            if text:
                return text
    return None


def _plain_user_text(content: Any) -> str | None:
    """The text of a user message written with content and no parts (a string, or text
    blocks); None when a block in it carries a tool's result."""
    blocks = _blocks(content) if not isinstance(content, str) else ()
    if any(isinstance(b, dict) and _holds_tool(b) for b in blocks):
        return None
    text = content_text(content)
    return text.strip() or None if text else None


def _holds_tool(block: dict[str, Any]) -> bool:
    return "tool" in str(block.get("type") or "").lower() or any("tool" in k.lower() for k in block)


def _works_on(span: SpanRecord) -> str | None:
    """The last user request among a model call's input messages (`Step.works_on`)."""
    for message in reversed(messages(span, sc.GEN_AI_INPUT_MESSAGES)):
        if message.get("role") != "user":
            continue
        if parts(message, "text"):
            return content_text(parts(message, "text"))
        if not _parts(message) and (text := _plain_user_text(message.get("content"))):
            return text
    return last_user_text(span)


def new_request(span: SpanRecord) -> str | None:
    """The user request a model call's input ends with: the text of its last message when that
    is a user message holding no tool result. None when the input ends with tool results (the
    request before goes on) or records no messages."""
    inputs = messages(span, sc.GEN_AI_INPUT_MESSAGES)
    if inputs:
        last = inputs[-1]
        if last.get("role") != "user" or parts(last, "tool_call_response"):
            return None
        if _parts(last):
            return content_text(parts(last, "text")) or None
        return _plain_user_text(last.get("content"))
    for event in reversed(span.events):
        if event.name == sc.EV_GEN_AI_CHOICE:  # this call's output
            continue
        if event.name != sc.EV_GEN_AI_USER_MESSAGE:
            return None
        content = event.attributes.get("content")
        if any(isinstance(b, dict) and "toolResult" in b for b in _blocks(content)):
            return None
        return content_text(content) or None
    return None


def input_texts(span: SpanRecord) -> list[str]:
    """Texts that may be SKILL.md documents among the messages new in a model call's input
    (those after the model last spoke: older ones were seen by an earlier call)."""
    texts: list[str] = []
    for message in reversed(messages(span, sc.GEN_AI_INPUT_MESSAGES)):
        if message.get("role") in ("assistant", "model", "system"):
            break
        for part in _parts(message):
            if isinstance(part, dict):
                found = (part.get("content"), as_text(part.get("response")))
                texts += [str(t) for t in found if _maybe_md(t)]
    for event in reversed(span.events):
        if event.name == sc.EV_GEN_AI_ASSISTANT_MESSAGE:  # (a choice is this call's output)
            break
        if event.name in (sc.EV_GEN_AI_USER_MESSAGE, sc.EV_GEN_AI_TOOL_MESSAGE):
            content = event.attributes.get("content")
            if _maybe_md(content):
                text = content_text(content)
                if _maybe_md(text):
                    texts.append(str(text))
    return texts


def _maybe_md(text: Any) -> bool:
    """Cheap pre-check for `evidence.bodies_in`: front matter, or a "# Skill: name" title."""
    if not isinstance(text, str):
        return False
    return ("---" in text[:600] and "name:" in text) or "Skill:" in text[:300]


def continues_turn(span: SpanRecord) -> bool:
    """The span's new input is only tool results or approval responses, no user text: a
    round-trip inside the request before it (Agent Framework's approval flow), not a new one."""
    inputs = messages(span, sc.GEN_AI_INPUT_MESSAGES)
    if not inputs:
        return _continues_in_events(span)
    last = inputs[-1]
    kinds = [p.get("type") for p in _parts(last) if isinstance(p, dict)]
    return bool(kinds) and "text" not in kinds and last.get("role") in ("user", "tool")


def _continues_in_events(span: SpanRecord) -> bool:
    """`continues_turn` for per-message events: after the model last spoke there are tool
    results and no user message."""
    tools = False
    for event in reversed(span.events):
        if event.name in (sc.EV_GEN_AI_ASSISTANT_MESSAGE, sc.EV_GEN_AI_SYSTEM_MESSAGE):
            break
        if event.name == sc.EV_GEN_AI_USER_MESSAGE:
            return False
        tools = tools or event.name == sc.EV_GEN_AI_TOOL_MESSAGE
    return tools


def output(span: SpanRecord) -> tuple[str | None, str | None, bool]:
    """(text, finish reason, asked for tools) of the span's model or agent output."""
    text, reason, asked, _ = model_output(span, requests=False)
    return text, reason, asked


def tool_requests(span: SpanRecord) -> tuple[ToolRequest, ...]:
    """The tool calls the model's last output asked for (`tool_call` parts, `toolUse` blocks,
    chat completions `tool_calls`)."""
    return model_output(span)[3]


def model_output(
    span: SpanRecord, *, requests: bool = True
) -> tuple[str | None, str | None, bool, tuple[ToolRequest, ...]]:
    """`output` and `tool_requests` of one span, from one look for its last output (a model
    call needs both). ``requests=False`` leaves the tool requests out (empty)."""
    outputs = messages(span, sc.GEN_AI_OUTPUT_MESSAGES)
    for at in range(len(outputs) - 1, -1, -1):
        said = outputs[at]
        if said.get("role") in (None, "assistant", "model"):
            reason = said.get("finish_reason")
            text = content_text(parts(said, "text"))
            if text is None and not _parts(said):  # a framework's own message shape
                text = assistant_text(said)
            calls = _last_calls(outputs, at)
            asked = _requested(calls if requests else [])
            if not calls:  # a chat completions message: its `tool_calls`
                asked = chat_tool_calls(said.get("tool_calls"))
                return text, str(reason) if reason else None, bool(asked), asked * requests
            return text, str(reason) if reason else None, bool(calls), asked
    for event in reversed(span.events):
        if event.name == sc.EV_GEN_AI_CHOICE:
            message = event.attributes.get("message")
            reason = event.attributes.get("finish_reason")
            # a choice without `message` holds the model's content object as its `content`
            # (`role`, `parts` of text and function calls: a google-genai Content)
            content = (
                None
                if message is not None
                else vertex_agent.content_message(event.attributes.get("content"))
            )
            if content is not None:
                calls = parts(content, "tool_call")
                text = content_text(parts(content, "text"))
                asked = _requested(calls if requests else [])
                return text, str(reason) if reason else None, bool(calls), asked
            decoded = read_json(message) if isinstance(message, str) else message
            asked_tools = False
            uses = []  # (one pass over the blocks for both)
            for block in decoded if isinstance(decoded, (list, tuple)) else ():
                if isinstance(block, dict):
                    if "toolUse" in block:
                        asked_tools = True
                        uses.append(block["toolUse"])
                    elif block.get("type") == "tool_call":
                        asked_tools = True
            asked = (
                tuple(
                    ToolRequest(
                        name=str(u.get("name") or ""),
                        call_id=str(u["toolUseId"]) if u.get("toolUseId") else None,
                        arguments=u.get("input"),
                    )
                    for u in uses
                    if isinstance(u, dict)
                )
                if requests and uses
                else ()
            )
            if not asked_tools:  # a chat completions choice: its message's `tool_calls`
                held = decoded.get("tool_calls") if isinstance(decoded, dict) else None
                asked = chat_tool_calls(held or event.attributes.get("tool_calls"))
                asked_tools = bool(asked)
            text = content_text(message)
            if text is None and isinstance(decoded, dict):  # a framework's own message shape
                text = assistant_text(decoded)
            return text, str(reason) if reason else None, asked_tools, asked
    return None, None, False, ()


def _requested(calls: Sequence[dict[str, Any]]) -> tuple[ToolRequest, ...]:
    """GenAI `tool_call` parts as the tool requests they are."""
    return tuple(
        ToolRequest(
            name=str(p.get("name") or ""),
            call_id=str(p["id"]) if p.get("id") else None,
            arguments=parse_arguments(p.get("arguments")),
        )
        for p in calls
    )


def _last_calls(outputs: Sequence[dict[str, Any]], at: int) -> list[dict[str, Any]]:
    """The `tool_call` parts of the model's last say: the assistant message at ``at`` and
    those right before it (an output of one message per parallel call)."""
    calls: list[dict[str, Any]] = []
    while at >= 0 and outputs[at].get("role") in (None, "assistant", "model"):
        calls[:0] = parts(outputs[at], "tool_call")
        at -= 1
    return calls


def chat_tool_calls(value: Any) -> tuple[ToolRequest, ...]:
    """The tool requests of a chat completions message's `tool_calls` (a list, or its JSON):
    each `{"id", "type": "function", "function": {"name", "arguments"}}`, or the same fields
    flat. An entry without a name is no request."""
    decoded = read_json(value) if isinstance(value, str) else value
    if not isinstance(decoded, (list, tuple)):
        return ()
    out = []
    for call in decoded:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        held = function if isinstance(function, dict) else call
        name = held.get("name")
        if not isinstance(name, str) or not name:
            continue
        out.append(
            ToolRequest(
                name=name,
                call_id=str(call["id"]) if call.get("id") else None,
                arguments=parse_arguments(held.get("arguments")),
            )
        )
    return tuple(out)


def history_requests(span: SpanRecord) -> tuple[ToolRequest, ...]:
    """The tool calls with a call id that the assistant messages of the span's input hold
    (`tool_call` parts, chat completions `tool_calls`, in messages or `gen_ai.assistant.message`
    events): what the model asked for earlier in the conversation, as its history repeats it."""
    found: list[ToolRequest] = []
    for event in span.events:
        if event.name == sc.EV_GEN_AI_ASSISTANT_MESSAGE:
            found += [r for r in chat_tool_calls(event.attributes.get("tool_calls")) if r.call_id]
    for message in messages(span, sc.GEN_AI_INPUT_MESSAGES):
        if message.get("role") not in ("assistant", "model"):
            continue
        found += [r for r in _requested(parts(message, "tool_call")) if r.call_id]
        found += [r for r in chat_tool_calls(message.get("tool_calls")) if r.call_id]
    return tuple(found)


def tool_results(span: SpanRecord) -> tuple[ToolResult, ...]:
    """The tool results the agent sent back that the span's messages hold, by call id:
    `tool_call_response` parts, chat completions tool messages (`tool_call_id`), a Bedrock
    `toolResult` block, and `gen_ai.tool.message` events (`id`, `content`)."""
    found: dict[str, ToolResult] = {}
    for key in (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES):
        for message in messages(span, key):
            for part in parts(message, "tool_call_response"):
                response = part.get("response", part.get("result"))
                failed = marked_failed(part) or marked_failed(message)
                _add_result(found, part.get("id"), result_text(response), failed)
            # a chat completions tool message, its text in parts or content, its call id its own
            if message.get("role") == "tool" and not parts(message, "tool_call_response"):
                failed = marked_failed(message) or any(
                    marked_failed(b) for b in _content_parts(message.get("content"))
                )
                _add_result(found, message.get("tool_call_id"), content_text(message), failed)
    for event in span.events:
        if event.name == sc.EV_GEN_AI_TOOL_MESSAGE and event.attributes.get("id") is not None:
            content = event.attributes.get("content")
            text = _sent_back_text(content) if isinstance(content, str) else result_text(content)
            _add_result(found, event.attributes.get("id"), text)
        elif event.name in (sc.EV_GEN_AI_USER_MESSAGE, sc.EV_GEN_AI_TOOL_MESSAGE):
            # Bedrock `toolResult` blocks, in a user message or a tool message with no `id`
            content = event.attributes.get("content")
            held = _held_results(content) if isinstance(content, str) else _block_results(content)
            for result in held:
                if result.call_id not in found:
                    found[result.call_id] = result
    return tuple(found.values())


# Every model call's input repeats the results sent back before it: each message's results are
# read once (the results are frozen values, shared by the steps that hold them). A session is
# recognised at once, so a few hundred messages cover its history; the bound keeps the memory
# the cached texts hold small.
@remembered_within()
def _sent_back_text(content: str) -> str | None:
    return result_text(read_json(content))


@remembered_within()
def _held_results(content: str) -> tuple[ToolResult, ...]:
    return _block_results(content)


def _block_results(content: Any) -> tuple[ToolResult, ...]:
    """The results in a message's Bedrock `toolResult` blocks with a call id, in order."""
    found = []
    for block in _blocks(content):
        held = block.get("toolResult") if isinstance(block, dict) else None
        if isinstance(held, dict):
            text = content_text(held.get("content"))
            if str(held.get("status", "")).lower() == "error":
                text = as_text({"status": "error", "error": text})
            call_id = held.get("toolUseId")
            if isinstance(call_id, str) and call_id:
                found.append(ToolResult(call_id=call_id, text=text))
    return tuple(found)


# What a content part holds its text or result under: a dict with none is a record of the
# result's payload, not a part of the message.
_PART_HOLDS = ("text", "content", "output", "result", "response")


def _content_parts(content: Any) -> list[dict[str, Any]]:
    """The typed parts a message's content is made of (`[{"type": "text", "text": ...}]`),
    where the content is a list of them; a content written as text (a JSON result among
    them) is the result's payload, and the records inside it are data."""
    if not isinstance(content, (list, tuple)):
        return []
    return [
        b
        for b in content
        if isinstance(b, dict)
        and isinstance(b.get("type"), str)
        and any(k in b for k in _PART_HOLDS)
    ]


def _blocks(content: Any) -> tuple[Any, ...]:
    decoded = read_json(content) if isinstance(content, str) else content
    return tuple(decoded) if isinstance(decoded, (list, tuple)) else ()


def _add_result(
    found: dict[str, ToolResult], call_id: Any, text: str | None, failed: bool = False
) -> None:
    if isinstance(call_id, str) and call_id and call_id not in found:
        found[call_id] = ToolResult(call_id=call_id, text=text, failed=failed)


def system_text(span: SpanRecord) -> str | None:
    # `values` of the system instructions, then the system message events: one pass
    texts: list[str] = []
    events: list[str] = []
    found = span.attributes.get(sc.GEN_AI_SYSTEM_INSTRUCTIONS)
    if found is not None and (text := content_text(found)):
        texts.append(text)
    for event in span.events:
        name = event.name
        if name == sc.EV_GEN_AI_SYSTEM_MESSAGE:
            if text := content_text(event.attributes.get("content")):
                events.append(text)
        elif name == sc.EV_GEN_AI_INFERENCE_DETAILS:
            found = event.attributes.get(sc.GEN_AI_SYSTEM_INSTRUCTIONS)
            if found is not None and (text := content_text(found)):
                texts.append(text)
    if texts or events:
        return "\n".join(texts + events)
    inputs = messages(span, sc.GEN_AI_INPUT_MESSAGES)
    if inputs:  # legacy conventions: the system prompt is an input message
        joined = "\n".join(
            t
            for m in inputs
            if m.get("role") == "system"
            and (t := content_text(parts(m, "text")) or message_text(m))
        )
        if joined:
            return joined
    return vertex_agent.system_text(span)


def catalogue(span: SpanRecord, system: str | None = None) -> tuple[CatalogueEntry, ...]:
    """The skills offered in the span's system text (``system``, when already read) and in
    its tool definitions; a list in the system text that no word announces, when the tools
    offered beside it include a loader."""
    if system is None:
        system = system_text(span)
    offered = parse_catalogue(system)
    definitions = span.attributes.get(sc.GEN_AI_TOOL_DEFINITIONS)
    described = tool_catalogue(definitions) if isinstance(definitions, str) else ()
    if not offered and not described and definitions is not None:
        offered = offered_beside_a_loader(system, tool_descriptions(span))
    return offered + tuple(e for e in described if e not in offered) if described else offered


def tool_definitions(span: SpanRecord) -> Any:
    """The tools offered to the model: `gen_ai.tool.definitions` decoded, else the legacy
    indexed attributes (`gen_ai.request.functions.N.*`)."""
    found = span.attributes.get(sc.GEN_AI_TOOL_DEFINITIONS)
    return shared_json(found) if found is not None else indexed_tool_definitions(span)


def tool_schemas(span: SpanRecord, tool_name: str | None = None) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    definitions = tool_definitions(span)
    if isinstance(definitions, (list, tuple)):
        for item in definitions:
            if not isinstance(item, dict):
                continue
            nested = item.get("function")  # OpenAI-style {"type": "function", "function": {...}}
            function: dict[str, Any] = nested if isinstance(nested, dict) else item
            name = function.get("name")
            schema = function.get("parameters", function.get("inputSchema"))
            if isinstance(schema, dict) and isinstance(schema.get("json"), dict):
                schema = schema["json"]  # Strands/Bedrock wrap the JSON schema
            if isinstance(name, str) and schema is not None:
                schemas[name] = schema
    found = span.attributes.get(sc.GEN_AI_TOOL_JSON_SCHEMA) if tool_name else None
    if found is not None:  # (nothing recorded: nothing to decode)
        schema = shared_json(found)
        if tool_name and isinstance(schema, dict):
            schemas[tool_name] = schema
    return schemas


def tool_descriptions(span: SpanRecord) -> dict[str, str]:
    """Tool name -> description, from `tool_definitions` (flat or OpenAI-style)."""
    found: dict[str, str] = {}
    definitions = tool_definitions(span)
    for item in definitions if isinstance(definitions, (list, tuple)) else ():
        nested = item.get("function") if isinstance(item, dict) else None
        function = nested if isinstance(nested, dict) else item
        if isinstance(function, dict):
            name, description = function.get("name"), function.get("description")
            if isinstance(name, str) and isinstance(description, str) and description:
                found[name] = description
    return found


def tool_field(span: SpanRecord, key: str) -> Any:
    """A GenAI tool-call attribute of an `execute_tool` span, else its one copy under another
    prefix (`<prefix>.tool.call.arguments` for `gen_ai.tool.call.arguments`): a framework whose
    own observations name the operation by the conventions may keep the call's fields under its
    own namespace (Spring AI's `spring.ai.tool.call.*`). On a span already said to execute a
    tool, a key that ends in the convention's own field name can only be that field; two such
    copies say nothing certain and none is taken."""
    value = span.attributes.get(key)
    if value is not None:
        return value
    suffix = "." + key.removeprefix(GEN_AI_PREFIX)
    copies = [v for k, v in span.attributes.items() if k.endswith(suffix)]
    return copies[0] if len(copies) == 1 else None


def tool_io(span: SpanRecord) -> tuple[Any, Any, bool]:
    """(arguments, result payload, has result) of an `execute_tool` span, in any convention."""
    raw_args = tool_field(span, sc.GEN_AI_TOOL_CALL_ARGUMENTS)
    arguments: Any = None if raw_args is None else parse_arguments(raw_args)
    raw_result = tool_field(span, sc.GEN_AI_TOOL_CALL_RESULT)
    has_result = raw_result is not None
    result: Any = parse_json(raw_result) if has_result else None
    if arguments is not None and has_result:
        return arguments, result, True  # (the messages and events below fill only what lacks)
    for message in messages(span, sc.GEN_AI_INPUT_MESSAGES):
        for part in parts(message, "tool_call"):
            if arguments is None:
                arguments = parse_arguments(part.get("arguments"))
    for message in messages(span, sc.GEN_AI_OUTPUT_MESSAGES):
        for part in parts(message, "tool_call_response"):
            if not has_result:
                result, has_result = parse_json(part.get("response")), True
    for event in span.events:
        if event.name == sc.EV_GEN_AI_TOOL_MESSAGE and arguments is None:
            arguments = parse_arguments(event.attributes.get("content"))
        elif event.name == sc.EV_GEN_AI_CHOICE and not has_result:
            result, has_result = parse_json(event.attributes.get("message")), True
    if arguments is None and not has_result:
        return vertex_agent.tool_io(span)
    return arguments, result, has_result


def result_text(result: Any) -> str | None:
    """Tool result as text: Strands `[{"text": ...}]` content is unwrapped, JSON kept as JSON."""
    if (
        isinstance(result, (list, tuple))
        and result
        and all(isinstance(b, dict) and ("text" in b or "json" in b) for b in result)
    ):
        return content_text(result)
    return as_text(result)


# The text attributes a tool span's step takes (`_texts`), in the order `_tool` unpacks them.
_TOOL_TEXTS = (
    sc.GEN_AI_SKILL_NAME,
    sc.GEN_AI_TOOL_STATUS,
    sc.ERROR_TYPE,
    sc.GEN_AI_TOOL_CALL_ID,
    sc.GEN_AI_AGENT_NAME,
    sc.GEN_AI_TOOL_DESCRIPTION,
)


def _texts(span: SpanRecord, keys: tuple[str, ...]) -> list[str | None]:
    """`SpanRecord.str_attr` of each of ``keys``, read in one pass."""
    return [
        value if value is None or isinstance(value, str) else str(value)
        for value in map(span.attributes.get, keys)
    ]


# --------------------------------------------------------------------------- the recogniser


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
            tool = span.str_attr(sc.GEN_AI_TOOL_NAME)
            if tool == sc.ADK_MERGED_TOOLS:
                return []
            return [self._tool(span, tool or span.name[len(TOOL_PREFIX) :].split(" ")[0])]
        # With no operation named, counted input tokens say a model call, under the current
        # name or the older `gen_ai.usage.prompt_tokens` that `_model` reads as the same count.
        if op in sc.MODEL_OPERATIONS or (
            op is None
            and int_attr(span, sc.GEN_AI_USAGE_INPUT_TOKENS, sc.GEN_AI_USAGE_PROMPT_TOKENS)
        ):
            return [self._model(span)]
        # an operation the conventions do not name as agent activity (event-loop cycles, memory,
        # a framework's own `tool.execute`): left to the shape fallback
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
                tool_results=tool_results(span),
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
        system = system_text(span)
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
            catalogue=catalogue(span, system),
            tool_schemas=tool_schemas(span),
            tool_requests=requests,
            history_requests=history_requests(span),
            tool_results=tool_results(span),
            tool_descriptions=tool_descriptions(span),
            bodies_seen=bodies_in(input_texts(span)),
            request=new_request(span),
            works_on=_works_on(span),
            instructions=instructions_opening(system),
            error=span_error(span),
            **self._base(span),
        )

    def _tool(self, span: SpanRecord, tool: str) -> Step:
        arguments, result, has_result = tool_io(span)
        declared, status, error_type, call_id, agent, description = _texts(span, _TOOL_TEXTS)
        if call_id is None:
            copied = tool_field(span, sc.GEN_AI_TOOL_CALL_ID)
            call_id = None if copied is None else str(copied)
        # ADK stamps gen_ai.skill.name on resource reads and skill scripts too; those carry
        # gen_ai.skill.resource.name and are tool calls, not loads.
        if span.attributes.get(sc.GEN_AI_SKILL_RESOURCE_NAME) is not None:
            declared = None
        # a result recorded as the repr of this call's message (LangChain's ToolMessage): the
        # tool returned its content, and a status in it counts as the tool's own
        message = None
        if isinstance(result, str):
            message = call_message(result, call_id=call_id, tool=tool)
        if message is not None:
            result = parse_json(message["content"])  # (as a result recorded on its own is)
            if not status and isinstance(message.get("status"), str):
                status = message["status"]
        step = tool_step(
            span,
            self.name,
            tool=tool,
            arguments=arguments,
            result=result,
            result_text=result_text(result) if has_result else None,
            has_result=has_result,
            failure=span_error(span),
            tool_status=status or None,
            error_type=error_type if span.status != "error" else None,
            declared_skill=declared or None,
            call_id=call_id,
            agent_name=agent,
            tool_schemas=tool_schemas(span, tool),
            description=description,
        )
        offered = described_catalogue(description)
        return replace(step, catalogue=offered) if offered else step

    def finalise(self, steps: list[Step], spans: Sequence[SpanRecord]) -> list[Step]:
        """Fill what a turn span did not record: the request and the final answer.

        Some instrumentations (Google ADK) record messages only on model-call spans: the request
        is then the last user text of the trace's first model call, and the final answer the
        last model output with text and a stop finish reason that asked for no tool.
        """
        models: dict[str, list[Step]] = {}
        for step in steps:
            if step.kind == "model_call" and step.preset == self.name:
                models.setdefault(step.trace_id, []).append(step)
        if not models:  # both fill from this preset's model calls: with none, nothing to fill
            return steps
        answered = {s.trace_id for s in steps if s.kind == "final_answer" and s.preset == self.name}
        turn_traces = {s.trace_id for s in steps if s.kind == "agent_turn"}
        if turn_traces.issubset(answered) and all(
            s.text for s in steps if s.kind == "agent_turn" and s.preset == self.name
        ):
            return steps  # every turn has its request and its answer: nothing to fill
        out: list[Step] = []
        by_id = {s.span_id: s for s in spans}
        for calls in models.values():
            calls.sort(key=lambda s: (s.start_unix_nano, s.end_unix_nano))
        for step in steps:
            if step.kind == "agent_turn" and step.preset == self.name and not step.text:
                first = models.get(step.trace_id, [])
                span = by_id.get(first[0].span_id) if first else None
                if span is not None and (request := last_user_text(span)):
                    step = replace(step, text=request)
            out.append(step)
        for trace_id, calls in models.items():
            if trace_id in answered or trace_id not in turn_traces:
                continue
            for call in sorted(calls, key=lambda s: s.end_unix_nano, reverse=True):
                span = by_id.get(call.span_id)
                if span is None:
                    continue
                text, reason, asked_tools = output(span)
                if text and text.strip() and not asked_tools:
                    if is_stop_reason(reason):
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
