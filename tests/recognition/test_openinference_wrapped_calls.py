"""Tool calls written through OpenInference by a framework that records its own call around the
tool's (BeeAI's `Tool.run(input, options)`): each TOOL span's `input.value` is
`{"input": <the arguments>, "options": null}` beside the tool's `tool.json_schema`; the agent
delivers its answer by calling an answer tool the model never asked for; a raising tool gets a
nested `error` TOOL span that repeats its input. The run is the same as one written the
ordinary way; the report must be too.

The cases are real sessions (fixtures/agno) rewritten the way BeeAI's instrumentation writes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.support.rewritten import attribute, file_requests, report_of, set_attribute, spans

Span = dict[str, Any]
EXPECTATIONS = "agno/expectations.yaml"


def _seen(requests: list[dict[str, Any]], tmp_path: Path) -> dict[str, Any]:
    """What a user reads in each session's report: steps, loads, answer, counts, verdicts."""
    out = {}
    for session in report_of(requests, tmp_path, EXPECTATIONS)["sessions"]:
        stats = {k: v for k, v in session["stats"].items() if k != "duration_s"}
        out[session["session_id"]] = {
            "steps": [
                (s["kind"], s["name"], s.get("text"), json.dumps(s.get("arguments")))
                for s in session["steps"]
            ],
            "skill_loads": [(x["skill"], x["status"]) for x in session["skill_loads"]],
            "final_answer": session["final_answer"],
            "stats": stats,
            "verdicts": [
                (v["evaluator"], v["outcome"], v["explanation"]) for v in session["verdicts"]
            ],
        }
    return out


def _agno() -> list[dict[str, Any]]:
    return file_requests("agno", "agno.jsonl")


def _kind(span: Span) -> str | None:
    return attribute(span, "openinference.span.kind")


def _schemas(requests: list[dict[str, Any]]) -> dict[str, Any]:
    """Tool name -> parameter schema, from the model calls' tool definitions."""
    found: dict[str, Any] = {}
    for request in requests:
        for span in spans(request):
            for a in span.get("attributes", ()):
                if a["key"].startswith("llm.tools.") and a["key"].endswith(".json_schema"):
                    schema = json.loads(a["value"]["stringValue"])
                    function = schema.get("function", schema)
                    found[function["name"]] = function.get("parameters") or {}
    return found


def _wrap_tool_inputs(requests: list[dict[str, Any]]) -> int:
    """Every TOOL span records `Tool.run(input, options)` beside the tool's own schema."""
    schemas = _schemas(requests)
    wrapped = 0
    for request in requests:
        for span in spans(request):
            tool = attribute(span, "tool.name")
            value = attribute(span, "input.value")
            if _kind(span) != "TOOL" or tool not in schemas or value is None:
                continue
            wrapped_value = {"input": json.loads(value), "options": None}
            set_attribute(span, "input.value", json.dumps(wrapped_value))
            set_attribute(span, "tool.json_schema", json.dumps(schemas[tool]))
            wrapped += 1
    return wrapped


def test_arguments_wrapped_in_the_frameworks_call_are_the_tools_own(tmp_path: Path) -> None:
    requests = _agno()
    before = _seen(requests, tmp_path)
    assert _wrap_tool_inputs(requests) >= 20
    assert _seen(requests, tmp_path) == before


def test_a_recorded_input_that_fits_the_schema_stays_whole(tmp_path: Path) -> None:
    requests = _agno()
    before = _seen(requests, tmp_path)
    schemas = _schemas(requests)
    for request in requests:  # the schema alone, the input as the tool took it
        for span in spans(request):
            tool = attribute(span, "tool.name")
            if _kind(span) == "TOOL" and tool in schemas:
                set_attribute(span, "tool.json_schema", json.dumps(schemas[tool]))
    assert _seen(requests, tmp_path) == before


def test_an_answer_tool_no_model_asked_for_delivers_the_answer(tmp_path: Path) -> None:
    requests = _agno()
    before = _seen(requests, tmp_path)
    _wrap_tool_inputs(requests)
    added = 0
    for request in requests:
        for scope in (s for r in request["resourceSpans"] for s in r["scopeSpans"]):
            for turn in [s for s in scope["spans"] if "parentSpanId" not in s]:
                answer = attribute(turn, "output.value")
                if _kind(turn) != "AGENT" or not answer:
                    continue
                sent = copy.deepcopy(turn)
                sent.update(
                    parentSpanId=turn["spanId"],
                    spanId=f"{int(turn['spanId'], 16) ^ 0x5EED:016x}",
                    name="deliver",
                    startTimeUnixNano=turn["endTimeUnixNano"],
                    attributes=[],
                )
                for key, value in (
                    ("openinference.span.kind", "TOOL"),
                    ("tool.name", "deliver"),
                    ("tool.description", "Sends the final answer to the user"),
                    ("input.value", json.dumps({"input": {"response": answer}, "options": None})),
                    ("tool.json_schema", json.dumps({"properties": {"response": {}}})),
                    ("output.value", "Message has been sent"),
                ):
                    set_attribute(sent, key, value)
                scope["spans"].append(sent)
                added += 1
    assert added >= 10
    assert _seen(requests, tmp_path) == before


def test_a_nested_span_repeating_a_calls_input_records_its_failure(tmp_path: Path) -> None:
    requests = _agno()
    _wrap_tool_inputs(requests)
    before = _seen(requests, tmp_path)
    added = 0
    for request in requests:
        for scope in (s for r in request["resourceSpans"] for s in r["scopeSpans"]):
            for tool in [s for s in scope["spans"] if _kind(s) == "TOOL"]:
                value = attribute(tool, "input.value")
                if value is None or not attribute(tool, "tool.json_schema"):
                    continue
                record = {
                    "parentSpanId": tool["spanId"],
                    "traceId": tool["traceId"],
                    "spanId": f"{int(tool['spanId'], 16) ^ 0xE77:016x}",
                    "name": "error",
                    "startTimeUnixNano": tool["endTimeUnixNano"],
                    "endTimeUnixNano": tool["endTimeUnixNano"],
                    "status": {"code": 2},
                    "attributes": [],
                }
                failed = {"error": "Tool Error", **json.loads(value)}
                set_attribute(record, "openinference.span.kind", "TOOL")
                set_attribute(record, "input.value", json.dumps(failed))
                set_attribute(record, "output.value", "ToolError: Tool Error")
                scope["spans"].append(record)
                added += 1
    assert added >= 20
    assert _seen(requests, tmp_path) == before
