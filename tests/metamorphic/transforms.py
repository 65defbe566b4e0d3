"""Rewrites of an OTLP/JSON export request that change how a session is written, not what
happened in it. Each takes the decoded request and what the untouched report said about the
file (its catalogue, its tool names) and returns the rewritten request."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

from tests.support.catalogue_layouts import render

Entries = tuple[tuple[str, str], ...]
StringMap = Callable[[str], str]

_AVAILABLE = re.compile(r"<available_skills>.*?</available_skills>", re.S)
_ANNOUNCING = re.compile(r"skill|capabilit", re.I)
# A SKILL.md body (front matter, or the tags harnesses wrap a loaded body in) is left alone.
_SKILL_BODY = re.compile(r"^\s*---\s*\n\s*name:|<skill_content|<skill name=", re.M)


def spans(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in request.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            yield from scope.get("spans", ())


def log_records(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in request.get("resourceLogs", ()):
        for scope in resource.get("scopeLogs", ()):
            yield from scope.get("logRecords", ())


def map_strings(request: dict[str, Any], change: StringMap, *, span_names: bool) -> None:
    """Apply ``change`` to every string attribute value (and to every string inside an attribute
    value that is JSON) of spans, span events and log records, to log records' bodies, and to
    span names when ``span_names``."""
    for span in spans(request):
        if span_names:
            span["name"] = change(span["name"])
        for attribute in span.get("attributes", ()):
            _map_value(attribute["value"], change)
        for event in span.get("events", ()):
            for attribute in event.get("attributes", ()):
                _map_value(attribute["value"], change)
    for record in log_records(request):
        for attribute in record.get("attributes", ()):
            _map_value(attribute["value"], change)
        if "body" in record:
            _map_value(record["body"], change)


def _map_value(value: dict[str, Any], change: StringMap) -> None:
    if "stringValue" in value:
        value["stringValue"] = _map_text(value["stringValue"], change)
    for item in value.get("arrayValue", {}).get("values", ()):
        _map_value(item, change)
    for item in value.get("kvlistValue", {}).get("values", ()):
        _map_value(item["value"], change)


def _map_text(text: str, change: StringMap) -> str:
    if text[:1] in "[{":
        try:
            decoded = json.loads(text)
        except ValueError:
            return change(text)
        mapped = _map_json(decoded, change)
        return text if mapped == decoded else json.dumps(mapped, ensure_ascii=False)
    return change(text)


def _map_json(value: Any, change: StringMap) -> Any:
    if isinstance(value, str):
        return _map_text(value, change)
    if isinstance(value, list):
        return [_map_json(v, change) for v in value]
    if isinstance(value, dict):
        return {k: _map_json(v, change) for k, v in value.items()}
    return value


# -- the catalogue, re-rendered --------------------------------------------------------------


def rerender_catalogue(layout: str, entries: Entries) -> StringMap:
    """The catalogue's region of a text (its `<available_skills>` block, or the lines from the
    first entry to the last with the heading that announces them) written in ``layout``."""
    names = [name for name, _ in entries]
    rendered = render(layout, entries)

    def change(text: str) -> str:
        if sum(1 for name in names if name in text) < len(names) or _SKILL_BODY.search(text):
            return text
        if _AVAILABLE.search(text):
            return _AVAILABLE.sub(lambda _: rendered, text, count=1)
        lines = text.split("\n")
        rows = [i for i, line in enumerate(lines) if _entry_line(line, names)]
        if len({_entry_line(lines[i], names) for i in rows}) < len(names):
            return text
        first, last = rows[0], rows[-1]
        while (
            last + 1 < len(lines) and lines[last + 1][:1] in (" ", "\t") and lines[last + 1].strip()
        ):
            last += 1  # "  -> Read `/skills/x/SKILL.md`" continues the last entry
        while first > 0 and (not lines[first - 1].strip() or _ANNOUNCING.search(lines[first - 1])):
            first -= 1
            if lines[first].strip():
                break  # the announcing line itself
        return "\n".join([*lines[:first], rendered, *lines[last + 1 :]])

    return change


def _continues(line: str) -> bool:
    return line[:1] in (" ", "\t") and bool(line.strip())


def _entry_line(line: str, names: list[str]) -> str | None:
    stripped = line.strip().lstrip("-*0123456789.) ").strip("*`")
    for name in names:
        if stripped.startswith(name) and stripped[len(name) : len(name) + 4].strip(" *`")[:1] in (
            ":",
            "-",
            "\u2014",
        ):
            return name
    return None


# -- tool names under a namespace ---------------------------------------------------------


def namespace_tools(prefix: str, tools: frozenset[str]) -> StringMap:
    """Every string that is a tool's name, and a span name's word that is one, prefixed."""

    def change(text: str) -> str:
        if text in tools:
            return prefix + text
        if _SKILL_BODY.search(text):
            return text
        head, _, tail = text.rpartition(" ")
        if head and tail in tools and len(head.split()) == 1:  # "execute_tool read_csv"
            return f"{head} {prefix}{tail}"
        return text

    return change


# -- order ---------------------------------------------------------------------------------


def shuffle_order(request: dict[str, Any], rng: random.Random) -> None:
    """Attributes of every span and resource, and the spans of every scope, in another order."""
    for resource in request.get("resourceSpans", ()):
        rng.shuffle(resource.get("resource", {}).get("attributes", []))
        for scope in resource.get("scopeSpans", ()):
            rng.shuffle(scope.get("spans", []))
    for span in spans(request):
        rng.shuffle(span.get("attributes", []))


# -- the session id, moved ----------------------------------------------------------------

SESSION_KEYS = ("gen_ai.conversation.id", "session.id")


def _trace_sessions(requests: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """trace id -> (key attribute, value) for traces whose spans carry one session key (on a
    span or its resource) with one value; traces with none, or with several, are left out."""
    seen: dict[str, set[tuple[str, str]]] = {}
    for request in requests:
        for resource in request.get("resourceSpans", ()):
            on_resource = _keys(resource.get("resource", {}).get("attributes", ()))
            for scope in resource.get("scopeSpans", ()):
                for span in scope.get("spans", ()):
                    found = seen.setdefault(span["traceId"], set())
                    found |= _keys(span.get("attributes", ())) | on_resource
    return {trace: next(iter(pairs)) for trace, pairs in seen.items() if len(pairs) == 1}


def _keys(attributes: Any) -> set[tuple[str, str]]:
    return {
        (a["key"], a["value"]["stringValue"])
        for a in attributes
        if a["key"] in SESSION_KEYS and "stringValue" in a["value"]
    }


def _without_keys(attributes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [a for a in attributes if a["key"] not in SESSION_KEYS]


def session_id_on_resource(requests: list[dict[str, Any]]) -> None:
    """Each session's id on the resource of its spans (a resource per session), on no span."""
    traces = _trace_sessions(requests)
    for request in requests:
        regrouped = []
        for resource in request.get("resourceSpans", ()):
            groups: dict[tuple[str, str] | None, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
            for scope in resource.get("scopeSpans", ()):
                for span in scope.get("spans", ()):
                    groups.setdefault(traces.get(span["traceId"]), []).append((scope, span))
            for pair, members in groups.items():
                attributes = list(resource.get("resource", {}).get("attributes", ()))
                if pair is not None:
                    key, value = pair
                    attributes = _without_keys(attributes)
                    attributes.append({"key": key, "value": {"stringValue": value}})
                scopes: dict[int, dict[str, Any]] = {}
                for scope, span in members:
                    if pair is not None:
                        span["attributes"] = _without_keys(span.get("attributes", []))
                    into = scopes.setdefault(id(scope), {**scope, "spans": []})
                    into["spans"].append(span)
                regrouped.append(
                    {
                        **resource,
                        "resource": {**resource.get("resource", {}), "attributes": attributes},
                        "scopeSpans": list(scopes.values()),
                    }
                )
        if "resourceSpans" in request:  # (a logs request stays one)
            request["resourceSpans"] = regrouped


def session_id_on_every_span(requests: list[dict[str, Any]]) -> None:
    """Each session's id copied onto every span of its traces, as a baggage span processor
    does, and off the resource."""
    traces = _trace_sessions(requests)
    for request in requests:
        for resource in request.get("resourceSpans", ()):
            held = resource.get("resource", {})
            spans_of = [
                s for scope in resource.get("scopeSpans", ()) for s in scope.get("spans", ())
            ]
            if held.get("attributes") and all(s["traceId"] in traces for s in spans_of):
                held["attributes"] = _without_keys(held["attributes"])
            for span in spans_of:
                pair = traces.get(span["traceId"])
                if pair is not None:
                    key, value = pair
                    span["attributes"] = _without_keys(span.get("attributes", []))
                    span["attributes"].append({"key": key, "value": {"stringValue": value}})


def session_id_on_root_spans(requests: list[dict[str, Any]]) -> None:
    """Each session's id only on the root spans of its traces (where the agent's code set it
    on the span it started), off every other span."""
    traces = _trace_sessions(requests)
    rooted = {
        span["traceId"]
        for request in requests
        for span in spans(request)
        if not span.get("parentSpanId") and span["traceId"] in traces
    }
    for request in requests:
        for span in spans(request):
            pair = traces.get(span["traceId"])
            if pair is None or span["traceId"] not in rooted:
                continue
            span["attributes"] = _without_keys(span.get("attributes", []))
            if not span.get("parentSpanId"):
                key, value = pair
                span["attributes"].append({"key": key, "value": {"stringValue": value}})


def session_id_namespaced(requests: list[dict[str, Any]]) -> None:
    """Each session key renamed under a namespace (`app.session.id`, `app.conversation.id`), as
    a tracing library records the session id it was given under its own prefix."""
    for request in requests:
        for resource in request.get("resourceSpans", ()):
            held = [resource.get("resource", {}).get("attributes", ())]
            held += [s.get("attributes", ()) for s in _resource_spans(resource)]
            for attributes in held:
                for attribute in attributes:
                    if attribute["key"] in SESSION_KEYS:
                        attribute["key"] = "app." + attribute["key"].removeprefix("gen_ai.")


def session_id_as_keyword(requests: list[dict[str, Any]]) -> None:
    """Each session's id on every span of its traces under the name a keyword argument gives
    it (`session_id`, `conversation_id`), as Logfire's baggage and span attributes write it."""
    session_id_on_every_span(requests)
    for request in requests:
        for resource in request.get("resourceSpans", ()):
            held = [resource.get("resource", {}).get("attributes", ())]
            held += [s.get("attributes", ()) for s in _resource_spans(resource)]
            for attributes in held:
                for attribute in attributes:
                    if attribute["key"] in SESSION_KEYS:
                        keyword = attribute["key"].removeprefix("gen_ai.").replace(".", "_")
                        attribute["key"] = keyword


def session_id_as_metadata(requests: list[dict[str, Any]]) -> None:
    """Each session key renamed into a bag of metadata the user filled
    (`app.association.properties.session_id`, `app.telemetry.metadata.conversationId`), as
    OpenLLMetry's association properties and Vercel AI's telemetry metadata carry it."""
    renamed = {
        "session.id": "app.association.properties.session_id",
        "gen_ai.conversation.id": "app.telemetry.metadata.conversationId",
    }
    for request in requests:
        for resource in request.get("resourceSpans", ()):
            held = [resource.get("resource", {}).get("attributes", ())]
            held += [s.get("attributes", ()) for s in _resource_spans(resource)]
            for attributes in held:
                for attribute in attributes:
                    if attribute["key"] in renamed:
                        attribute["key"] = renamed[attribute["key"]]


def _resource_spans(resource: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for scope in resource.get("scopeSpans", ()) for s in scope.get("spans", ())]


# -- message content, moved to span events ------------------------------------------------

CONTENT_KEYS = ("gen_ai.system_instructions", "gen_ai.input.messages", "gen_ai.output.messages")
INFERENCE_DETAILS = "gen_ai.client.inference.operation.details"


def content_to_events(request: dict[str, Any]) -> None:
    """GenAI message content recorded as span attributes moved to an inference-details event
    of the same span (the latest conventions allow both)."""
    for span in spans(request):
        moved = [a for a in span.get("attributes", ()) if a["key"] in CONTENT_KEYS]
        if not moved:
            continue
        span["attributes"] = [a for a in span["attributes"] if a["key"] not in CONTENT_KEYS]
        at = span.get("endTimeUnixNano") or span.get("startTimeUnixNano")
        event = {"timeUnixNano": at, "name": INFERENCE_DETAILS, "attributes": moved}
        span["events"] = [*span.get("events", ()), event]


# -- answers, split into parts ------------------------------------------------------------

# where an answer is cut in two: after its first sentence, else after its first comma
_CUTS = (re.compile(r"(?<=[.!?])\s+(?=\S)"), re.compile(r"(?<=,)\s+(?=\S)"))
_OI_CONTENT = re.compile(r"^(llm\.output_messages\.\d+\.message\.)content$")
_OI_PART = re.compile(r"^(llm\.output_messages\.\d+\.message\.contents\.)0\.message_content\.text$")


def split_answers(request: dict[str, Any]) -> None:
    """Every assistant output text of more than one sentence written as a message of several
    text parts, one per sentence run (GenAI `parts`, v1.36 choice blocks, OpenInference
    `message.contents`): the same text, in parts."""
    for span in spans(request):
        if _is_tool(span):
            continue  # a tool's result is no answer
        for attribute in span.get("attributes", ()):
            _split_attribute(span, attribute)
        for event in span.get("events", ()):
            for attribute in event.get("attributes", ()):
                if event["name"] != "gen_ai.choice" and attribute["key"] == "message":
                    continue
                _split_attribute(None, attribute)


def _is_tool(span: dict[str, Any]) -> bool:
    return span["name"].startswith("execute_tool") or any(
        a["key"] == "gen_ai.operation.name" and a["value"].get("stringValue") == "execute_tool"
        for a in span.get("attributes", ())
    )


def _split_attribute(span: dict[str, Any] | None, attribute: dict[str, Any]) -> None:
    value = attribute["value"]
    text = value.get("stringValue")
    if not isinstance(text, str):
        return
    key = attribute["key"]
    if key == "gen_ai.output.messages" or key == "message":
        try:
            decoded = json.loads(text)
        except ValueError:
            return
        split = _split_messages(decoded) if key != "message" else _split_blocks(decoded)
        if split != decoded:
            value["stringValue"] = json.dumps(split, ensure_ascii=False)
    elif span is not None and (part := _OI_PART.match(key)) is not None:
        _split_part(span, attribute, part.group(1))
    elif span is not None and (match := _OI_CONTENT.match(key)) is not None:
        pieces = _pieces(text)
        parts = f"{match.group(1)}contents."
        if len(pieces) > 1 and not any(a["key"].startswith(parts) for a in span["attributes"]):
            # OpenInference joins `message.contents` parts as they are: keep the spaces
            span["attributes"] = [a for a in span["attributes"] if a is not attribute] + [
                {
                    "key": f"{match.group(1)}contents.{i}.message_content.{field}",
                    "value": {"stringValue": piece if field == "text" else "text"},
                }
                for i, piece in enumerate(_pieces(text, keep_space=True))
                for field in ("type", "text")
            ]


def _split_part(span: dict[str, Any], attribute: dict[str, Any], prefix: str) -> None:
    """An OpenInference message's only text part (`contents.0`) as two parts."""
    if any(a["key"].startswith(f"{prefix}1.") for a in span["attributes"]):
        return
    pieces = _pieces(attribute["value"]["stringValue"], keep_space=True)
    if len(pieces) < 2:
        return
    attribute["value"] = {"stringValue": pieces[0]}
    span["attributes"] = [
        *span["attributes"],
        {"key": f"{prefix}1.message_content.type", "value": {"stringValue": "text"}},
        {"key": f"{prefix}1.message_content.text", "value": {"stringValue": pieces[1]}},
    ]


def _split_messages(messages: Any) -> Any:
    if not isinstance(messages, list):
        return messages
    out = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") in (None, "assistant", "model"):
            parts = []
            for part in message.get("parts") or ():
                if isinstance(part, dict) and part.get("type") == "text":
                    pieces = _pieces(str(part.get("content", "")))
                    parts += [{**part, "content": piece} for piece in pieces]
                else:
                    parts.append(part)
            if "parts" in message:
                message = {**message, "parts": parts}
        out.append(message)
    return out


def _split_blocks(blocks: Any) -> Any:
    """v1.36 `gen_ai.choice` content: a list of `{"text": ...}` blocks."""
    if not isinstance(blocks, list):
        return blocks
    out = []
    for block in blocks:
        if isinstance(block, dict) and set(block) == {"text"} and isinstance(block["text"], str):
            out += [{"text": piece} for piece in _pieces(block["text"])]
        else:
            out.append(block)
    return out


def _pieces(text: str, *, keep_space: bool = False) -> list[str]:
    """``text`` cut in two after its first sentence or comma, or whole."""
    stripped = text.strip()
    match = next((m for cut in _CUTS if (m := cut.search(stripped)) is not None), None)
    if match is None:
        return [text]
    if keep_space:
        return [stripped[: match.start()], stripped[match.start() :]]
    return [stripped[: match.start()], stripped[match.end() :]]


# -- message content as OpenAI-format per-message events ----------------------------------


def content_to_chat_events(request: dict[str, Any]) -> None:
    """GenAI message content (attributes or an inference-details event) of every model call
    recorded instead as the per-message events of the older conventions, in the chat
    completions shape the OpenAI instrumentations give them: `gen_ai.system.message`,
    `gen_ai.user.message`, `gen_ai.assistant.message` (its `tool_calls`, each a `function` with
    JSON `arguments`), `gen_ai.tool.message` (`id`, `content`), and one `gen_ai.choice` per
    output message (`message` with `content` and `tool_calls`, `finish_reason`, `index`).
    Tool spans keep theirs: the events are a model call's."""
    for span in spans(request):
        if _is_tool(span):
            continue
        found: dict[str, Any] = {}
        kept_events = []
        for event in span.get("events", ()):
            if event["name"] == INFERENCE_DETAILS:
                for attribute in event.get("attributes", ()):
                    found.setdefault(attribute["key"], attribute["value"].get("stringValue"))
            else:
                kept_events.append(event)
        for attribute in span.get("attributes", ()):
            if attribute["key"] in CONTENT_KEYS:
                found.setdefault(attribute["key"], attribute["value"].get("stringValue"))
        decoded = {k: _loaded(v) for k, v in found.items() if isinstance(v, str)}
        inputs = decoded.get("gen_ai.input.messages")
        outputs = decoded.get("gen_ai.output.messages")
        if not isinstance(inputs, list) or not isinstance(outputs, list):
            continue  # only a model call's whole exchange is rewritten
        outputs = [_chosen_message(m) for m in outputs]
        if not all(_chat_expressible(m) for m in [*inputs, *outputs]):
            continue  # (an approval, a file, ... has no chat completions form)
        at = span.get("endTimeUnixNano") or span.get("startTimeUnixNano")
        events: list[dict[str, Any]] = []
        system = decoded.get("gen_ai.system_instructions")
        if system is not None:
            events.append(_event(at, "gen_ai.system.message", content=_joined(system)))
        for message in inputs:
            events += _chat_events(at, message)
        for index, message in enumerate(_one_per_say(outputs)):
            text, calls, _ = _chat_parts(message)
            body: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                body["tool_calls"] = calls
            reason = message.get("finish_reason") or ("tool_calls" if calls else "stop")
            events.append(
                _event(
                    at,
                    "gen_ai.choice",
                    index=index,
                    finish_reason=reason,
                    message=json.dumps(body, ensure_ascii=False),
                )
            )
        span["attributes"] = [a for a in span["attributes"] if a["key"] not in CONTENT_KEYS]
        span["events"] = [*kept_events, *events]


def _chosen_message(output: Any) -> Any:
    """An output written as a chat completion's choice, as the message it holds (with the
    choice's finish reason)."""
    if (
        isinstance(output, dict)
        and "role" not in output
        and isinstance(output.get("message"), dict)
    ):
        return {**output["message"], "finish_reason": output.get("finish_reason")}
    return output


def _one_per_say(outputs: list[Any]) -> list[dict[str, Any]]:
    """Consecutive assistant output messages as one (a chat completion says its parallel tool
    calls in one message)."""
    out: list[dict[str, Any]] = []
    for message in outputs:
        if not isinstance(message, dict):
            continue
        if out and message.get("role") == out[-1].get("role") == "assistant":
            last = out[-1]
            out[-1] = {
                **last,
                **message,
                "parts": [*(last.get("parts") or ()), *(message.get("parts") or ())],
            }
        else:
            out.append(message)
    return out


_CHAT_PARTS = frozenset(("text", "tool_call", "tool_call_response"))


def _chat_expressible(message: Any) -> bool:
    return isinstance(message, dict) and all(
        isinstance(p, dict) and p.get("type") in _CHAT_PARTS for p in message.get("parts") or ()
    )


def _loaded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _joined(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            str(p.get("content", "")) if isinstance(p, dict) else str(p) for p in value
        )
    return json.dumps(value)


def _chat_parts(message: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]], list[Any]]:
    """(text, OpenAI `tool_calls`, tool responses as (id, content)) of one GenAI message, or
    of one already in the chat completions shape (its own `content`, `tool_calls` and, for a
    tool's answer, `tool_call_id`), or of GenAI parts beside those chat completions fields."""
    if "parts" not in message:
        content = message.get("content")
        text = content if isinstance(content, str) else None
        held = message.get("tool_calls")
        own_calls = [c for c in held if isinstance(c, dict)] if isinstance(held, list) else []
        if message.get("role") == "tool":
            return None, own_calls, [(message.get("tool_call_id"), text)]
        return text, own_calls, []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    responses: list[Any] = []
    for part in message.get("parts") or ():
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("content", "")))
        elif kind == "tool_call":
            arguments = part.get("arguments")
            calls.append(
                {
                    "id": part.get("id"),
                    "type": "function",
                    "function": {
                        "name": part.get("name"),
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments, ensure_ascii=False),
                    },
                }
            )
        elif kind == "tool_call_response":
            response = part.get("response", part.get("result"))
            responses.append(
                (
                    part.get("id"),
                    response
                    if isinstance(response, str)
                    else json.dumps(response, ensure_ascii=False),
                )
            )
    held = message.get("tool_calls")
    calls += [c for c in held if isinstance(c, dict)] if isinstance(held, list) else []
    text = "\n".join(texts) if texts else None
    if message.get("role") == "tool" and message.get("tool_call_id") and not responses:
        return None, calls, [(message["tool_call_id"], text)]
    return text, calls, responses


def _chat_events(at: Any, message: Any) -> list[dict[str, Any]]:
    if not isinstance(message, dict):
        return []
    role = message.get("role")
    text, calls, responses = _chat_parts(message)
    out = [_event(at, "gen_ai.tool.message", id=i, content=c) for i, c in responses]
    if role in ("assistant", "model"):
        fields: dict[str, Any] = {"content": text}
        if calls:
            fields["tool_calls"] = json.dumps(calls, ensure_ascii=False)
        out.append(_event(at, "gen_ai.assistant.message", **fields))
    elif text is not None and role in ("system", "user"):
        out.append(_event(at, f"gen_ai.{role}.message", content=text))
    return out


def _event(at: Any, name: str, **fields: Any) -> dict[str, Any]:
    attributes = [
        {
            "key": key,
            "value": {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value},
        }
        for key, value in fields.items()
        if value is not None
    ]
    return {"timeUnixNano": at, "name": name, "attributes": attributes}


# -- output messages as a chat completion's choices ---------------------------------------


def outputs_as_chat_choices(request: dict[str, Any]) -> None:
    """Every model call's GenAI output messages (attribute or inference-details event)
    written as the `choices` of a chat completions response, as an instrumentation does that
    records the response as it came: `[{"finish_reason", "index", "message": {"role",
    "content", "tool_calls"}}]`, the finish reason only on the choice (the span's
    `gen_ai.response.finish_reasons` left off)."""
    for span in spans(request):
        reasons = [
            item.get("stringValue")
            for a in span.get("attributes", ())
            if a["key"] == "gen_ai.response.finish_reasons"
            for item in a["value"].get("arrayValue", {}).get("values", ())
        ]
        holders = [span, *(e for e in span.get("events", ()) if e["name"] == INFERENCE_DETAILS)]
        changed = False
        for holder in holders:
            for attribute in holder.get("attributes", ()):
                if attribute["key"] != "gen_ai.output.messages":
                    continue
                choices = _choices(_loaded(attribute["value"].get("stringValue") or ""), reasons)
                if choices is not None:
                    attribute["value"] = {"stringValue": json.dumps(choices, ensure_ascii=False)}
                    changed = True
        if changed:
            span["attributes"] = [
                a for a in span["attributes"] if a["key"] != "gen_ai.response.finish_reasons"
            ]


def _choices(outputs: Any, reasons: list[Any]) -> list[dict[str, Any]] | None:
    if not isinstance(outputs, list) or not all(
        _chat_expressible(m) and m.get("parts") for m in outputs
    ):
        return None
    said = _one_per_say(outputs)
    if not said or any(m.get("role") not in (None, "assistant", "model") for m in said):
        return None
    choices = []
    for index, message in enumerate(said):
        text, calls, _ = _chat_parts(message)
        body: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            body["tool_calls"] = calls
        reason = message.get("finish_reason") or (
            reasons[index] if index < len(reasons) else ("tool_calls" if calls else "stop")
        )
        choices.append({"finish_reason": reason, "index": index, "message": body})
    return choices


# -- tool descriptions only in the model's tool definitions ------------------------------

_DESCRIPTION_KEYS = ("gen_ai.tool.description", "tool.description")
_TOOL_NAME_KEYS = ("gen_ai.tool.name", "tool.name")
_LLM_TOOL = re.compile(r"^llm\.tools\.\d+\.tool\.json_schema$")


def descriptions_only_in_definitions(request: dict[str, Any]) -> None:
    """A tool span's own description left off where the model's tool definitions in the same
    trace (`gen_ai.tool.definitions`, `llm.tools.N.tool.json_schema`) describe that tool, as
    instrumentations do that record the tool list on the model call only."""
    defined: dict[str, set[str]] = {}
    for span in spans(request):
        for attribute in span.get("attributes", ()):
            key = attribute["key"]
            if key == "gen_ai.tool.definitions" or _LLM_TOOL.match(key):
                decoded = _loaded(attribute["value"].get("stringValue", ""))
                items = decoded if isinstance(decoded, list) else [decoded]
                for item in items:
                    if not isinstance(item, dict):
                        continue
                    nested = item.get("function")
                    function = nested if isinstance(nested, dict) else item
                    if function.get("name") and function.get("description"):
                        defined.setdefault(span["traceId"], set()).add(str(function["name"]))
    for span in spans(request):
        names = defined.get(span["traceId"], set())
        attributes = span.get("attributes", [])
        tool = next(
            (
                a["value"].get("stringValue")
                for a in attributes
                if a["key"] in _TOOL_NAME_KEYS and a["value"].get("stringValue") in names
            ),
            None,
        )
        if tool is not None:
            span["attributes"] = [a for a in attributes if a["key"] not in _DESCRIPTION_KEYS]


# -- a tool span's content only in the model's messages ----------------------------------

_CALL_ID_KEY = "gen_ai.tool.call.id"
_TOOL_CONTENT_KEYS = ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result")


def tool_content_only_in_messages(requests: list[dict[str, Any]]) -> None:
    """A tool span's arguments and result left off where its call id is in the model calls'
    messages (the request that asked for it, the result sent back), as an instrumentation does
    that records the tool span by name and call id and logs the content with the model calls."""
    in_messages: set[str] = set()
    tool_spans = []
    for request in requests:
        for span in spans(request):
            attributes = span.get("attributes", [])
            call_id = next(
                (a["value"].get("stringValue") for a in attributes if a["key"] == _CALL_ID_KEY),
                None,
            )
            if call_id:
                tool_spans.append((span, call_id))
                continue
            values = [a["value"] for a in attributes]
            values += [a["value"] for e in span.get("events", ()) for a in e.get("attributes", ())]
            text = json.dumps(values)
            in_messages.update(i for i in _quoted_ids(text))
    for span, call_id in tool_spans:
        if call_id in in_messages:
            span["attributes"] = [
                a for a in span.get("attributes", []) if a["key"] not in _TOOL_CONTENT_KEYS
            ]


_QUOTED_ID = re.compile(r'\\"(?:id|tool_call_id|call_id)\\": \\"([^"\\]{1,200})\\"')


def _quoted_ids(text: str) -> list[str]:
    """The call ids a JSON-encoded message attribute names (`"id": "..."` in its text)."""
    return _QUOTED_ID.findall(text)


# -- tool descriptions only on the tool spans ------------------------------------------------


def descriptions_only_on_tool_spans(request: dict[str, Any]) -> None:
    """The description of every tool a trace calls left out of the model's tool definitions
    (`gen_ai.tool.definitions`) and recorded on the tool's spans (`gen_ai.tool.description`)
    instead, as a run records it whose model calls keep no tool list (a chat service's
    function-calling loop with no agent span)."""
    called: dict[str, set[str]] = {}
    for span in spans(request):
        tool = _string(span, "gen_ai.tool.name")
        if tool and _string(span, "gen_ai.operation.name") == "execute_tool":
            called.setdefault(span["traceId"], set()).add(tool)
    moved: dict[tuple[str, str], str] = {}
    for span in spans(request):
        names = called.get(span["traceId"], set())
        for attribute in span.get("attributes", ()):
            if attribute["key"] != "gen_ai.tool.definitions":
                continue
            decoded = _loaded(attribute["value"].get("stringValue", ""))
            if not isinstance(decoded, list):
                continue
            changed = False
            for item in decoded:
                nested = item.get("function") if isinstance(item, dict) else None
                function = nested if isinstance(nested, dict) else item
                if isinstance(function, dict) and function.get("name") in names:
                    description = function.pop("description", None)
                    if isinstance(description, str):
                        moved[(span["traceId"], function["name"])] = description
                        changed = True
            if changed:
                attribute["value"] = {"stringValue": json.dumps(decoded, ensure_ascii=False)}
    for span in spans(request):
        tool = _string(span, "gen_ai.tool.name")
        description = moved.get((span["traceId"], tool or ""))
        if description is not None and _string(span, "gen_ai.tool.description") is None:
            span.setdefault("attributes", []).append(
                {"key": "gen_ai.tool.description", "value": {"stringValue": description}}
            )


def _string(span: dict[str, Any], key: str) -> str | None:
    return next(
        (a["value"].get("stringValue") for a in span.get("attributes", ()) if a["key"] == key),
        None,
    )


# -- finish reasons as enum members ------------------------------------------------------------


def finish_reasons_as_enum_names(request: dict[str, Any]) -> None:
    """Every finish reason written as Python's `str()` of an enum member (`FinishReason.STOP`
    for `stop`), as an instrumentation does that records the SDK's enum as it is: in
    `gen_ai.response.finish_reasons`, in the output messages, on choice events and in
    OpenInference's `llm.finish_reason`."""
    for span in spans(request):
        for attribute in span.get("attributes", ()):
            key, value = attribute["key"], attribute["value"]
            if key == "llm.finish_reason" and "stringValue" in value:
                value["stringValue"] = _enum_name(value["stringValue"])
            elif key == "gen_ai.response.finish_reasons":
                for item in value.get("arrayValue", {}).get("values", ()):
                    item["stringValue"] = _enum_name(item.get("stringValue"))
            elif key == "gen_ai.output.messages" and "stringValue" in value:
                decoded = _loaded(value["stringValue"])
                if isinstance(decoded, list) and any(
                    isinstance(m, dict) and m.get("finish_reason") for m in decoded
                ):
                    for message in decoded:
                        if isinstance(message, dict) and message.get("finish_reason"):
                            message["finish_reason"] = _enum_name(message["finish_reason"])
                    value["stringValue"] = json.dumps(decoded, ensure_ascii=False)
        for event in span.get("events", ()):
            for attribute in event.get("attributes", ()):
                if attribute["key"] == "finish_reason" and "stringValue" in attribute["value"]:
                    text = attribute["value"]["stringValue"]
                    attribute["value"]["stringValue"] = _enum_name(text)


def _enum_name(reason: Any) -> Any:
    return f"FinishReason.{reason.upper()}" if isinstance(reason, str) and reason else reason


# -- tool results, written as Python frameworks record them --------------------------------

# (result, arguments, tool name) attributes of a tool span, GenAI and OpenInference
_TOOL_RECORDS = (
    ("gen_ai.tool.call.result", "gen_ai.tool.call.arguments", "gen_ai.tool.name"),
    ("output.value", "input.value", "tool.name"),
)


def _tool_record(span: dict[str, Any]) -> tuple[dict[str, Any], Any, str] | None:
    """A tool span's result attribute, its decoded arguments and the tool's name."""
    values = {a["key"]: a["value"].get("stringValue") for a in span.get("attributes", ())}
    if "output.value" in values and values.get("openinference.span.kind") != "TOOL":
        return None
    for result, arguments, name in _TOOL_RECORDS:
        found = next((a for a in span.get("attributes", ()) if a["key"] == result), None)
        if found is not None and isinstance(values.get(name), str):
            return found, _loaded(values.get(arguments) or ""), str(values[name])
    return None


def _failure(result: str) -> Any:
    """A tool result that tells a failure inside a JSON object (`{"status": "error", ...}`,
    `{"error": ...}`), decoded, else None."""
    decoded = _loaded(result)
    if not isinstance(decoded, dict):
        return None
    status = decoded.get("status")
    failed = isinstance(status, str) and status.lower() in ("error", "failed", "failure")
    return decoded if failed or decoded.get("error") else None


def results_as_python_literals(request: dict[str, Any]) -> None:
    """Every tool result that tells a failure in a JSON object written as Python's ``str()``
    of it (`{'status': 'error', ...}`), as frameworks record a tool's dict return."""
    for span in spans(request):
        record = _tool_record(span)
        if record is None:
            continue
        value = record[0]["value"]
        decoded = _failure(value.get("stringValue", ""))
        if decoded is not None:
            value["stringValue"] = str(decoded)


ENVELOPES: dict[str, Callable[[str, Any, Any], dict[str, Any]]] = {
    # the output beside the call's name and its input as a Python call, as text blocks (its
    # Python `str()`) and as returned, with a flag saying the tool raised nothing (LlamaIndex's
    # ToolOutput)
    "text blocks and raw output": lambda name, arguments, output: {
        "blocks": [{"text": str(output)}],
        "tool_name": name,
        "raw_input": {"args": [], "kwargs": arguments},
        "raw_output": output,
        "is_error": False,
    },
    "output beside name and input": lambda name, arguments, output: {
        "call": name,
        "input": arguments,
        "returned": output,
        "raised": False,
    },
    # the output as the text blocks of a tool's content, beside a state saying it ran (MCP's
    # CallToolResult, AgentScope's tool response): no name or input echoed
    "content text blocks": lambda name, arguments, output: {
        "content": [{"type": "text", "text": json.dumps(output)}],
        "state": "success",
        "metadata": {},
    },
    # the same, its blocks typed as OpenAI's Responses API types them
    "content output_text blocks": lambda name, arguments, output: {
        "content": [{"type": "output_text", "text": json.dumps(output)}],
        "state": "success",
    },
}


def results_in_envelopes(request: dict[str, Any], envelope: str) -> None:
    """Every tool result that tells a failure in a JSON object (of a call whose arguments are
    recorded as an object) wrapped, as JSON, with the call's name and input by
    ``ENVELOPES[envelope]``."""
    for span in spans(request):
        record = _tool_record(span)
        if record is None or not isinstance(record[1], dict):
            continue
        attribute, arguments, name = record
        output = _failure(attribute["value"].get("stringValue", ""))
        if output is not None:
            wrapped = ENVELOPES[envelope](name, arguments, output)
            attribute["value"] = {"stringValue": json.dumps(wrapped)}


# -- spans that say their own role, in another tracer's layout --------------------------------

_SAID_ROLE = re.compile(r"^(?P<p>.+)\.type$")
_ROLE_VALUES = frozenset(("tool", "generation", "agent"))


def _role_fields(span: dict[str, Any]) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """The prefix and the `type` / `input` / `output` / `name` attributes (by word) of a span
    that says its own role (`<prefix>.type` of tool, generation or agent beside its input or
    output)."""
    by_key = {a["key"]: a for a in span.get("attributes", ())}
    for key, attribute in by_key.items():
        said = _SAID_ROLE.match(key)
        if said is None or attribute["value"].get("stringValue") not in _ROLE_VALUES:
            continue
        prefix = said.group("p")
        words = ("type", "input", "output", "name")
        fields = {w: by_key[f"{prefix}.{w}"] for w in words if f"{prefix}.{w}" in by_key}
        if "input" in fields or "output" in fields:
            return prefix, fields
    return None


def roles_in_stem_keys(request: dict[str, Any]) -> None:
    """Every span that says its own role rewritten as a tracer that JSON-encodes every value
    writes it: `acme.stepType`, `acme.stepInputs`, `acme.stepOutputs`, `acme.stepName`, each
    text a JSON string literal (a JSON object or list stays as it is)."""
    for span in spans(request):
        found = _role_fields(span)
        if found is None:
            continue
        for word, attribute in found[1].items():
            plural = "s" if word in ("input", "output") else ""
            attribute["key"] = f"acme.step{word.capitalize()}{plural}"
            value = attribute["value"]
            text = value.get("stringValue")
            if text is not None and not isinstance(_loaded(text), (dict, list)):
                value["stringValue"] = json.dumps(text)


_COMPOUND_ROLES = {"tool": "FUNCTION_TOOL", "generation": "CHAT_GENERATION", "agent": "REACT_AGENT"}


def roles_as_compound_words(request: dict[str, Any]) -> None:
    """Every role a span says written as a compound naming its kind (`CHAT_GENERATION` for
    `generation`)."""
    for span in spans(request):
        found = _role_fields(span)
        if found is not None:
            value = found[1]["type"]["value"]
            value["stringValue"] = _COMPOUND_ROLES[value["stringValue"]]


def turn_inputs_by_name(request: dict[str, Any]) -> None:
    """Every agent span's input recorded as a function's `{"args": [...], "kwargs": {}}` with
    one text argument written as the arguments by name (`{"question": ...}`), as tracers that
    bind a call's arguments to its parameters record it."""
    for span in spans(request):
        found = _role_fields(span)
        if found is None or found[1]["type"]["value"]["stringValue"] != "agent":
            continue
        given = found[1].get("input")
        decoded = _loaded(given["value"].get("stringValue", "")) if given else None
        if (
            isinstance(decoded, dict)
            and decoded.get("kwargs") == {}
            and isinstance(decoded.get("args"), list)
            and len(decoded["args"]) == 1
            and isinstance(decoded["args"][0], str)
        ):
            given["value"]["stringValue"] = json.dumps({"question": decoded["args"][0]})


# -- tool calls only in the history of the model calls' inputs ---------------------------------


def tool_calls_only_in_input_history(requests: list[dict[str, Any]]) -> None:
    """Every model call's GenAI messages as an instrumentation writes them that keeps only the
    text of the model's output and the chat completions request as sent: the output leaves off
    the `tool_call` parts a later input's history repeats (its parts may end empty); in the
    input, an assistant message holds its calls as chat completions `tool_calls`, and each
    result sent back is a `tool` message of its own with a text part and its `tool_call_id`."""
    in_history: set[str] = set()
    for request in requests:
        for attribute in _message_attributes(request, "gen_ai.input.messages"):
            for message in _loaded(attribute["value"].get("stringValue") or "") or ():
                if isinstance(message, dict):
                    in_history.update(str(p.get("id")) for p in _typed(message, "tool_call"))
    for request in requests:
        for attribute in _message_attributes(request, "gen_ai.output.messages"):
            outputs = _loaded(attribute["value"].get("stringValue") or "")
            if not isinstance(outputs, list):
                continue
            for message in outputs:
                if isinstance(message, dict) and isinstance(message.get("parts"), list):
                    message["parts"] = [
                        p
                        for p in message["parts"]
                        if not (
                            isinstance(p, dict)
                            and p.get("type") == "tool_call"
                            and str(p.get("id")) in in_history
                        )
                    ]
            attribute["value"] = {"stringValue": json.dumps(outputs, ensure_ascii=False)}
        for attribute in _message_attributes(request, "gen_ai.input.messages"):
            inputs = _loaded(attribute["value"].get("stringValue") or "")
            if isinstance(inputs, list):
                rewritten = [m for message in inputs for m in _as_chat_request(message)]
                attribute["value"] = {"stringValue": json.dumps(rewritten, ensure_ascii=False)}


def _message_attributes(request: dict[str, Any], key: str) -> Iterator[dict[str, Any]]:
    for span in spans(request):
        for attribute in span.get("attributes", ()):
            if attribute["key"] == key and "stringValue" in attribute["value"]:
                yield attribute


def _typed(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    held = message.get("parts")
    return [p for p in held if isinstance(p, dict) and p.get("type") == kind] if held else []


def _as_chat_request(message: Any) -> list[Any]:
    """One GenAI input message as the chat completions request wrote it (one or more)."""
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        return [message]
    calls = _typed(message, "tool_call")
    responses = _typed(message, "tool_call_response")
    if not calls and not responses:
        return [message]
    rest = [p for p in message["parts"] if p not in calls and p not in responses]
    out: list[Any] = []
    if calls:
        out.append(
            {
                **message,
                "parts": rest or [{"type": "text", "content": ""}],
                "tool_calls": [
                    {
                        "function": {
                            "arguments": _joined(c.get("arguments")),
                            "name": c.get("name"),
                        },
                        "id": c.get("id"),
                        "type": "function",
                    }
                    for c in calls
                ],
            }
        )
    elif rest:
        out.append({**message, "parts": rest})
    for response in responses:
        held = response.get("response", response.get("result"))
        text = held if isinstance(held, str) else json.dumps(held, ensure_ascii=False)
        out.append(
            {
                "role": "tool",
                "parts": [{"type": "text", "content": text}],
                "tool_call_id": response.get("id"),
            }
        )
    return out
