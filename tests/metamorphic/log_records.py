"""A rewrite of an OTLP/JSON export request that moves message content off the spans into OTLP
log records, as an instrumentation does that records content as events through the Logs API
(the GenAI conventions' `gen_ai.client.inference.operation.details` and per-message events)."""

from __future__ import annotations

import json
from typing import Any

from tests.metamorphic.transforms import content_to_chat_events

# Span attributes an instrumentation in event mode records on the inference-details event instead
_CONTENT_ATTRIBUTES = frozenset(
    ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")
)
_DETAILS = "gen_ai.client.inference.operation.details"
# Span events the Logs API carries instead; the per-message events keep their fields in the body
_CONTENT_EVENTS = frozenset(
    (
        _DETAILS,
        "gen_ai.system.message",
        "gen_ai.user.message",
        "gen_ai.assistant.message",
        "gen_ai.tool.message",
        "gen_ai.choice",
    )
)
_BODY_FIELDS = frozenset(("content", "message", "finish_reason", "index", "tool_calls", "id"))


def any_value(value: Any) -> dict[str, Any]:
    """A decoded JSON value as an OTLP/JSON AnyValue (structured, as the SDK sends it)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {
            "kvlistValue": {"values": [{"key": k, "value": any_value(v)} for k, v in value.items()]}
        }
    return {}


def _structured(attribute: dict[str, Any]) -> dict[str, Any]:
    """A JSON-string message attribute as the structured value the Logs API records."""
    text = attribute.get("value", {}).get("stringValue")
    if isinstance(text, str):
        try:
            decoded = json.loads(text)
        except ValueError:
            return attribute
        if isinstance(decoded, (list, dict)):
            return {"key": attribute["key"], "value": any_value(decoded)}
    return attribute


def content_to_log_records(
    request: dict[str, Any], *, framework: str | None = None, json_text: bool = False
) -> dict[str, Any] | None:
    """Move the GenAI message content of every span of ``request`` (in place) into log records
    naming that span; returns the logs export request, or None when there was no content.
    Records name their event in turn by `eventName` and by the older `event.name` attribute.
    With ``framework``, every record is that framework's own event (`<framework>.content`)
    whose body says what it is by its shape alone: a message's role, a choice's
    `finish_reason`, the message lists. With ``json_text``, every body is the JSON text of that
    object, as Python logging through the SDK's `LoggingHandler` records a message."""
    resource_logs = []
    turn = 0
    for resource in request.get("resourceSpans", ()):
        scope_logs = []
        for scope in resource.get("scopeSpans", ()):
            records: list[dict[str, Any]] = []
            for span in scope.get("spans", ()):
                context = {"traceId": span["traceId"], "spanId": span["spanId"]}
                attributes = span.get("attributes", [])
                moved = [a for a in attributes if a.get("key") in _CONTENT_ATTRIBUTES]
                if moved:
                    span["attributes"] = [a for a in attributes if a not in moved]
                    structured = [_structured(a) for a in moved]
                    records.append(
                        _record(
                            context,
                            span.get("endTimeUnixNano"),
                            _DETAILS,
                            [] if framework else structured,
                            structured if framework else None,
                            turn,
                            framework,
                            json_text,
                        )
                    )
                    turn += 1
                kept = []
                for event in span.get("events", ()):
                    name = event.get("name")
                    if name not in _CONTENT_EVENTS:
                        kept.append(event)
                        continue
                    fields = event.get("attributes", [])
                    body = [a for a in fields if a.get("key") in _BODY_FIELDS]
                    rest = [a for a in fields if a not in body]
                    if name == _DETAILS:
                        rest, body = [_structured(a) for a in fields], []
                        if framework:
                            rest, body = [], rest
                    elif framework and name != "gen_ai.choice":
                        role = name.split(".")[1]  # gen_ai.<role>.message
                        body = [*body, {"key": "role", "value": any_value(role)}]
                    records.append(
                        _record(
                            context,
                            event.get("timeUnixNano"),
                            name,
                            rest,
                            body,
                            turn,
                            framework,
                            json_text,
                        )
                    )
                    turn += 1
                if len(kept) != len(span.get("events", ())):
                    span["events"] = kept
            if records:
                scope_logs.append({"scope": scope.get("scope", {}), "logRecords": records})
        if scope_logs:
            resource_logs.append(
                {"resource": resource.get("resource", {}), "scopeLogs": scope_logs}
            )
    return {"resourceLogs": resource_logs} if resource_logs else None


def _record(
    context: dict[str, str],
    time_unix_nano: Any,
    name: str,
    attributes: list[dict[str, Any]],
    body: list[dict[str, Any]] | None,
    turn: int,
    framework: str | None = None,
    json_text: bool = False,
) -> dict[str, Any]:
    record: dict[str, Any] = {"timeUnixNano": time_unix_nano, **context}
    if framework is not None:
        name = f"{framework}.content"
    if turn % 2 == 0:
        record["eventName"] = name
        record["attributes"] = attributes
    else:
        record["attributes"] = [*attributes, {"key": "event.name", "value": any_value(name)}]
    if body and json_text:
        fields = {a["key"]: _decoded(a["value"]) for a in body}
        record["body"] = {"stringValue": json.dumps(fields, ensure_ascii=False)}
    elif body:
        record["body"] = {"kvlistValue": {"values": body}}
    return record


def _decoded(value: dict[str, Any]) -> Any:
    """An OTLP/JSON AnyValue as the JSON value it holds (`any_value` reversed)."""
    if "arrayValue" in value:
        return [_decoded(v) for v in value["arrayValue"].get("values", ())]
    if "kvlistValue" in value:
        return {kv["key"]: _decoded(kv["value"]) for kv in value["kvlistValue"].get("values", ())}
    if "intValue" in value:
        return int(value["intValue"])
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    return None


# How model calls' messages are written: as recorded; as the per-message events of the chat
# completions instrumentations; and those events sent as OTLP log records (the content-capture
# mode that keeps content off the spans).
CONTENT_FORMS = ("as recorded", "chat completion events", "chat completion log records")


def in_content_form(requests: list[dict[str, Any]], form: str) -> list[dict[str, Any]]:
    """``requests`` with their model calls' messages written in ``form`` (one of
    `CONTENT_FORMS`; the requests are rewritten in place), and any log requests it adds."""
    if form != "as recorded":
        for request in requests:
            content_to_chat_events(request)
    if form == "chat completion log records":
        return requests + [
            found for r in requests if (found := content_to_log_records(r)) is not None
        ]
    return requests


def choices_as_contents(logs: dict[str, Any]) -> None:
    """Every `gen_ai.choice` record of a logs export request (in place) holding the model's
    output as a google-genai `Content` under `content` instead of a chat `message`, as ADK Go
    logs it: `{"role": "model", "parts": [{"text": ...}, {"functionCall": {"id", "name",
    "args"}}]}` beside `index` and `finish_reason`."""
    for resource in logs.get("resourceLogs", ()):
        for scope in resource.get("scopeLogs", ()):
            for record in scope.get("logRecords", ()):
                named = record.get("eventName") or next(
                    (
                        a["value"].get("stringValue")
                        for a in record.get("attributes", ())
                        if a.get("key") == "event.name"
                    ),
                    None,
                )
                fields = record.get("body", {}).get("kvlistValue", {}).get("values", [])
                if named != "gen_ai.choice":
                    continue
                for field in fields:
                    if field["key"] == "message":
                        field["key"] = "content"
                        field["value"] = any_value(_content(_decoded(field["value"])))


def _content(message: Any) -> dict[str, Any]:
    """A chat completions message (or its JSON text) as a google-genai `Content`."""
    if isinstance(message, str):
        message = json.loads(message)
    parts: list[dict[str, Any]] = []
    if isinstance(message.get("content"), str):
        parts.append({"text": message["content"]})
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        arguments = function.get("arguments")
        parts.append(
            {
                "functionCall": {
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "args": json.loads(arguments) if isinstance(arguments, str) else arguments,
                }
            }
        )
    return {"role": "model", "parts": parts}
