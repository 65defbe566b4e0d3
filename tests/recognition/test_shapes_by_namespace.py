"""Spans that say their own role in a nested namespace, with `:` between namespaces, are read
by it.

Every session of a real GenAI trace (fixtures/genai_manual: an agent span with its model and tool
calls as direct children) is rewritten the way a tracer of actions records them, with no GenAI
key left and a prefix nobody listed: each span carries `acme:type` = `action` (a kind of span,
no role) and its role in `acme:meta:subtype` (`agent`, `model`, `tool`), beside `acme:name`,
`acme:input` and `acme:output`. A tool's input is its arguments and its output its result; a
model call's input is `{"messages": [...]}` whose messages hold content parts (`{"text"}`,
`{"toolRequest"}`, `{"toolResponse"}`), its output the response holding its message (`role`
`model`) beside its own `usage` counts and finish reason; the agent's span records no input
(the request reaches it as a stream) and its output is the response holding the answer. The
report must find the same turns, steps, skill loads, answers and verdicts as for the original
sessions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.rewritten import (
    attribute,
    file_requests,
    file_truth,
    report_of,
    spans,
    string_attributes,
    what_happened,
)

FILE = ("genai_manual", "genai_manual.jsonl")
EXPECTATIONS = "genai_manual/expectations.yaml"
PREFIX = "acme"
_KEEP = ("session.id", "spanjudge.expected_skills")


def _content(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GenAI parts as content parts, each one object under the key that says what it is."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.get("type") == "text":
            out.append({"text": part["content"]})
        elif part.get("type") == "tool_call":
            request = {"name": part["name"], "ref": part["id"], "input": part["arguments"]}
            out.append({"toolRequest": request})
        elif part.get("type") == "tool_call_response":
            result = part.get("result", part.get("response"))
            out.append({"toolResponse": {"name": "", "ref": part["id"], "output": result}})
    return out


def _message(message: dict[str, Any]) -> dict[str, Any]:
    role = "model" if message["role"] == "assistant" else message["role"]
    return {"role": role, "content": _content(message["parts"])}


def _int(span: dict[str, Any], key: str) -> int | None:
    for a in span.get("attributes", ()):
        if a["key"] == key:
            return int(a["value"]["intValue"])
    return None


def _action(name: str, role: str, inputs: str | None, output: str | None) -> list[dict[str, Any]]:
    return string_attributes(
        {
            f"{PREFIX}:type": "action",
            f"{PREFIX}:meta:subtype": role,
            f"{PREFIX}:name": name,
            f"{PREFIX}:input": inputs,
            f"{PREFIX}:output": output,
        }
    )


def _rewritten(span: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The span's new name and attributes."""
    operation = attribute(span, "gen_ai.operation.name")
    if operation == "execute_tool":
        name = attribute(span, "gen_ai.tool.name") or span["name"]
        arguments = attribute(span, "gen_ai.tool.call.arguments") or "{}"
        return name, _action(name, "tool", arguments, attribute(span, "gen_ai.tool.call.result"))
    inputs = json.loads(attribute(span, "gen_ai.input.messages") or "[]")
    (output,) = json.loads(attribute(span, "gen_ai.output.messages") or "[]")
    response: dict[str, Any] = {"message": _message(output), "finishReason": "stop"}
    if operation == "invoke_agent":
        return "shopAgent", _action("shopAgent", "agent", None, json.dumps(response))
    system = json.loads(attribute(span, "gen_ai.system_instructions") or "[]")
    prompt = [{"role": "system", "content": _content(system)}] if system else []
    response["usage"] = {
        "inputTokens": _int(span, "gen_ai.usage.input_tokens"),
        "outputTokens": _int(span, "gen_ai.usage.output_tokens"),
    }
    messages = prompt + [_message(m) for m in inputs]
    return "acme/model-1", _action(
        "acme/model-1", "model", json.dumps({"messages": messages}), json.dumps(response)
    )


def _as_actions() -> list[dict[str, Any]]:
    requests = file_requests(*FILE)
    for request in requests:
        by_trace: dict[str, str] = {}
        for span in spans(request):
            key = attribute(span, "session.id") or attribute(span, "gen_ai.conversation.id")
            if key:
                by_trace[span["traceId"]] = key
        for span in spans(request):
            kept = [a for a in span.get("attributes", ()) if a["key"] in _KEEP[1:]]
            kept += string_attributes({"session.id": by_trace.get(span["traceId"])})
            span["name"], rewritten = _rewritten(span)
            span["attributes"] = kept + rewritten
            span["events"] = [e for e in span.get("events", ()) if e["name"] == "exception"]
    text = json.dumps(requests)
    assert "gen_ai." not in text
    return requests


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    original_dir: Path = tmp_path_factory.mktemp("original")
    original = report_of(file_requests(*FILE), original_dir, EXPECTATIONS)
    rewritten_dir: Path = tmp_path_factory.mktemp("actions")
    rewritten = report_of(_as_actions(), rewritten_dir, EXPECTATIONS)
    return (
        {s["session_id"]: s for s in original["sessions"]},
        {s["session_id"]: s for s in rewritten["sessions"]},
    )


def test_every_session_is_read_from_its_actions(
    reports: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    original, rewritten = reports
    assert sorted(rewritten) == sorted(original)
    for session in rewritten.values():
        assert session["coverage"]["fallback_spans"] > 0


@pytest.mark.parametrize("session_id", sorted(file_truth(*FILE)))
def test_steps_and_verdicts_do_not_move(
    session_id: str, reports: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    original, rewritten = reports
    assert what_happened(rewritten[session_id]) == what_happened(original[session_id])
