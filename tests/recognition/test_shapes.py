"""Spans of a namespace nobody listed are read from their shape.

A real Strands session (fixtures/strands) is rewritten the way an agent library's own tracing
writes it, with no GenAI or OpenInference key left: the agent span carries
`<prefix>.prompt.messages` and `<prefix>.response.text`, each tool span
`<prefix>.toolCall.name` / `.args` / `.result`, each model-call span its prompt, response text,
requested tool calls and token counts. The report must find the same turn, model and tool calls,
skill load and answer as for the original session, and say how many spans it read by their
shape. Each shape the rules name is
also recorded with a real tracer, beside a span that only looks like one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from opentelemetry.trace import Tracer

from tests.conftest import load_schema
from tests.recognition.agent_spans import trajectory_of
from tests.support.rewritten import (
    attribute,
    report_of,
    session_requests,
    spans,
    string_attributes,
)

FILE = "strands/strands_latest.jsonl"
EXPECTATIONS = "strands/expectations.yaml"
SESSION = "strands-latest-required-skill-followed"
_KEEP = ("session.id", "spanjudge.expected_skills")


def _event_value(span: dict[str, Any], key: str) -> str | None:
    for event in span.get("events", ()):
        for a in event.get("attributes", ()):
            if a["key"] == key:
                value: str = a["value"]["stringValue"]
                return value
    return None


def _system_prompt(requests: list[dict[str, Any]]) -> str:
    for request in requests:
        for span in spans(request):
            found = _event_value(span, "gen_ai.system_instructions")
            if found:
                return "\n".join(p["content"] for p in json.loads(found))
    raise AssertionError("no system prompt")


def _in_own_namespace(prefix: str, tool_key: str) -> list[dict[str, Any]]:
    requests = session_requests(FILE, SESSION)
    system = _system_prompt(requests)
    for request in requests:
        for span in spans(request):
            kept = [a for a in span.get("attributes", ()) if a["key"] in _KEEP]
            if span["name"].startswith("invoke_agent"):
                inputs = json.loads(_event_value(span, "gen_ai.input.messages") or "[]")
                (output,) = json.loads(_event_value(span, "gen_ai.output.messages") or "[]")
                prompt = [{"role": "system", "content": system}] + [
                    {"role": m["role"], "content": m["parts"][0]["content"]} for m in inputs
                ]
                answer = output["parts"][0]["content"]
                kept += string_attributes({f"{prefix}.prompt.messages": json.dumps(prompt)})
                kept += string_attributes({f"{prefix}.response.text": answer})
                span["name"] = f"{prefix}.run"
            elif span["name"].startswith("execute_tool"):
                kept += string_attributes(
                    {
                        f"{prefix}.{tool_key}.name": attribute(span, "gen_ai.tool.name"),
                        f"{prefix}.{tool_key}.args": attribute(span, "gen_ai.tool.call.arguments"),
                        f"{prefix}.{tool_key}.result": attribute(span, "gen_ai.tool.call.result"),
                    }
                )
                span["name"] = f"{prefix}.step"
            elif span["name"] == "chat":
                kept += _model_call(span, prefix, system)
                span["name"] = f"{prefix}.model"
            else:
                span["name"] = f"{prefix}.internal"
            span["attributes"] = kept
            span["events"] = []
    text = json.dumps(requests)
    assert "gen_ai." not in text and "openinference" not in text
    return requests


def _model_call(span: dict[str, Any], prefix: str, system: str) -> list[dict[str, Any]]:
    inputs = json.loads(_event_value(span, "gen_ai.input.messages") or "[]")
    (output,) = json.loads(_event_value(span, "gen_ai.output.messages") or "[]")
    texts = [p["content"] for p in output["parts"] if p["type"] == "text"]
    asked = [
        {"toolCallId": p["id"], "toolName": p["name"], "args": json.dumps(p["arguments"])}
        for p in output["parts"]
        if p["type"] == "tool_call"
    ]
    tokens = {a["key"]: a["value"]["intValue"] for a in span["attributes"] if "usage" in a["key"]}
    out = string_attributes(
        {
            f"{prefix}.prompt.messages": json.dumps(
                [{"role": "system", "content": system}, *inputs]
            ),
            f"{prefix}.response.text": "\n".join(texts) or None,
            f"{prefix}.response.toolCalls": json.dumps(asked),
        }
    )
    return [
        *out,
        {
            "key": f"{prefix}.usage.promptTokens",
            "value": {"intValue": tokens["gen_ai.usage.input_tokens"]},
        },
        {
            "key": f"{prefix}.usage.completionTokens",
            "value": {"intValue": tokens["gen_ai.usage.output_tokens"]},
        },
    ]


def _what_happened(session: dict[str, Any]) -> dict[str, Any]:
    return {
        "turns": session["stats"]["turns"],
        "model_calls": session["stats"]["model_calls"],
        "tokens": (session["stats"]["input_tokens"], session["stats"]["output_tokens"]),
        "tool_calls": [
            (s["name"], s["arguments"]) for s in session["steps"] if s["kind"] == "tool_call"
        ],
        "skill_loads": [(x["skill"], x["status"]) for x in session["skill_loads"]],
        "final_answer": session["final_answer"],
        "request": next(s["text"] for s in session["steps"] if s["kind"] == "agent_turn"),
    }


@pytest.mark.parametrize(("prefix", "tool_key"), [("agentlib", "toolCall"), ("x.agent", "tool")])
def test_a_plain_namespace_is_read_by_its_shape(prefix: str, tool_key: str, tmp_path: Path) -> None:
    original = report_of(session_requests(FILE, SESSION), tmp_path, EXPECTATIONS)["sessions"][0]
    rewritten = _in_own_namespace(prefix, tool_key)
    report = report_of(rewritten, tmp_path, EXPECTATIONS)
    jsonschema.validate(report, load_schema())
    (got,) = report["sessions"]
    assert _what_happened(got) == _what_happened(original)
    assert got["final_answer"].startswith("The grand total is 2500")
    # the agent span, the five model calls and the four tool spans (the loader among them)
    assert got["coverage"]["fallback_spans"] == 10
    assert original["coverage"]["fallback_spans"] == 0
    verdicts = {v["evaluator"]: v for v in got["verdicts"]}
    assert (verdicts["skill_loaded"]["outcome"], verdicts["skill_loaded"]["label"]) == (
        "pass",
        "loaded",
    )


def test_a_turn_by_shape_under_a_web_servers_span(tmp_path: Path) -> None:
    """The same session, its agent span a child of the web server's request span (which says
    nothing of agents): the topmost span read by shape is still the turn."""
    original = report_of(session_requests(FILE, SESSION), tmp_path, EXPECTATIONS)["sessions"][0]
    rewritten = _in_own_namespace("agentlib", "toolCall")
    (request,) = [r for r in rewritten if any(not s.get("parentSpanId") for s in spans(r))]
    (root,) = [s for s in spans(request) if not s.get("parentSpanId")]
    server = {
        "traceId": root["traceId"],
        "spanId": "00000000000000f1",
        "name": "POST /chat",
        "kind": 2,
        "startTimeUnixNano": root["startTimeUnixNano"],
        "endTimeUnixNano": root["endTimeUnixNano"],
        "attributes": [
            {"key": "http.request.method", "value": {"stringValue": "POST"}},
            {"key": "http.route", "value": {"stringValue": "/chat"}},
            *[a for a in root["attributes"] if a["key"] in _KEEP],
        ],
    }
    root["parentSpanId"] = server["spanId"]
    request["resourceSpans"][0]["scopeSpans"][0]["spans"].append(server)
    (got,) = report_of(rewritten, tmp_path, EXPECTATIONS)["sessions"]
    assert got["stats"]["turns"] == 1
    assert _what_happened(got) == _what_happened(original)
    assert got["final_answer"].startswith("The grand total is 2500")


def test_a_session_of_model_calls_read_by_shape(tmp_path: Path) -> None:
    """The same session traced at the model client only: no agent span, no tool span, each
    model call a root span. Its turn, calls, load and answer come from the model calls'
    prompts and responses (before: every model call was a turn of its own, with no tool
    call)."""
    original = report_of(session_requests(FILE, SESSION), tmp_path, EXPECTATIONS)["sessions"][0]
    rewritten = _in_own_namespace("agentlib", "toolCall")
    for request in rewritten:
        for resource in request["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                scope["spans"] = [s for s in scope["spans"] if s["name"] == "agentlib.model"]
                for span in scope["spans"]:
                    span["parentSpanId"] = ""
    (got,) = report_of(rewritten, tmp_path, EXPECTATIONS)["sessions"]
    assert got["stats"]["model_calls"] == 5
    assert _what_happened(got) == _what_happened(original)
    assert got["final_answer"].startswith("The grand total is 2500")


def _shapes(tracer: Tracer) -> None:
    prompt = json.dumps([{"role": "user", "content": "What is 2 + 2?"}])
    answer = json.dumps([{"role": "assistant", "content": [{"type": "text", "text": "4"}]}])
    with tracer.start_as_current_span("run", attributes={"app.prompt": prompt}) as root:
        with tracer.start_as_current_span("step", attributes={"x.tool.name": "add"}) as step:
            step.set_attribute("x.tool.arguments", json.dumps({"a": 2, "b": 2}))
        with tracer.start_as_current_span("function call", attributes={"tool_name": "check"}):
            pass
        # a function's name alone (OTel code attributes) says no tool was called
        with tracer.start_as_current_span("helper", attributes={"code.function.name": "fmt"}):
            pass
        root.set_attribute("app.response", answer)


def test_each_shape_of_a_tool_call_and_a_turn() -> None:
    trajectory = trajectory_of(_shapes)
    calls = [(s.name, s.arguments) for s in trajectory.steps if s.kind == "tool_call"]
    assert calls == [("add", {"a": 2, "b": 2}), ("check", None)]
    assert [t.request for t in trajectory.turns] == ["What is 2 + 2?"]
    assert trajectory.final_answer == "4"


def test_a_prompt_object_holding_the_system_text_and_the_request() -> None:
    """`<prefix>.prompt` as one JSON object with the system text (its catalogue) and the
    request, beside `<prefix>.response.text`."""
    system = (
        "You can use these skills:\n- csv-report: Summarise a CSV file.\n"
        "- incident-triage: Triage an incident."
    )

    def run(tracer: Tracer) -> None:
        prompt = json.dumps({"system": system, "prompt": "Summarise data/sales.csv."})
        with tracer.start_as_current_span("generate", attributes={"sdk.prompt": prompt}) as root:
            root.set_attribute("sdk.response.text", "The total is 2500.")

    trajectory = trajectory_of(run)
    assert [t.request for t in trajectory.turns] == ["Summarise data/sales.csv."]
    assert [e.name for e in trajectory.catalogue] == ["csv-report", "incident-triage"]
    assert trajectory.final_answer == "The total is 2500."
