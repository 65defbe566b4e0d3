"""An agent run written as a workflow: a span that builds each model request beside the call,
a wrapper model span around the client's call, a run span whose input is a start event and
whose output is a printed result object. The run is the same; the report must be too.

Each case is a real Deep Agents session (fixtures/deepagents) rewritten the way LlamaIndex's
OpenInference instrumentation writes its FunctionAgent (fixtures/llamaindex).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.support.rewritten import (
    attribute,
    report_of,
    session_requests,
    set_attribute,
    spans,
)

FILE = "deepagents/deepagents.jsonl"
EXPECTATIONS = "deepagents/expectations.yaml"
SESSION = "deepagents-default-required-skill-followed"
Span = dict[str, Any]


def _requests() -> list[dict[str, Any]]:
    return session_requests(FILE, SESSION)


def _seen(requests: list[dict[str, Any]], tmp_path: Path) -> dict[str, Any]:
    """What a user reads in the session's report: its steps, answer, counts and verdicts."""
    (session,) = report_of(requests, tmp_path, EXPECTATIONS)["sessions"]
    stats = {k: v for k, v in session["stats"].items() if k != "duration_s"}
    return {
        "steps": [(s["kind"], s["name"], s.get("text")) for s in session["steps"]],
        "final_answer": session["final_answer"],
        "stats": stats,
        "verdicts": [(v["evaluator"], v["outcome"], v["explanation"]) for v in session["verdicts"]],
    }


def _model_spans(requests: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Span]]:
    """(the scope holding it, the span) of every LLM span."""
    found = []
    for request in requests:
        for resource in request["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    if attribute(span, "openinference.span.kind") == "LLM":
                        found.append((scope, span))
    return found


def _beside(span: Span, span_id: str, start: int, end: int, **values: str) -> Span:
    """A new LLM span of ``span``'s trace and session, holding only ``values``."""
    new = {key: span[key] for key in ("traceId", "parentSpanId", "kind", "status") if key in span}
    new |= {
        "spanId": span_id,
        "name": "Client.prepare_request",
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": [
            a
            for a in span["attributes"]
            if a["key"] in ("session.id", "openinference.span.kind", "llm.model_name")
        ],
    }
    for key, value in values.items():
        set_attribute(new, key.replace("_", "."), value)
    return new


def _sent(span: Span) -> list[dict[str, str]]:
    """The messages an LLM span records it was sent, as `{"role", "content"}` objects."""
    by_index: dict[int, dict[str, str]] = {}
    for a in span["attributes"]:
        parts = a["key"].split(".")
        if a["key"].startswith("llm.input_messages.") and parts[-1] in ("role", "content"):
            by_index.setdefault(int(parts[2]), {})[parts[-1]] = a["value"]["stringValue"]
    return [m for _, m in sorted(by_index.items())]


def test_a_span_that_builds_the_request_is_no_model_call(tmp_path: Path) -> None:
    """Before each model call, a sibling LLM span whose output is the request it built (the
    messages the call is sent) and which records no response: still one call per request."""
    original = _seen(_requests(), tmp_path)
    requests = _requests()
    for n, (scope, span) in enumerate(_model_spans(requests)):
        start = int(span["startTimeUnixNano"])
        scope["spans"].append(
            _beside(
                span,
                f"{n + 1:016x}",
                start - 2000,
                start - 1000,
                input_value=json.dumps({"tools": ["<FunctionTool object>"], "user_msg": None}),
                output_value=json.dumps({"messages": _sent(span), "tool_choice": "auto"}),
            )
        )
    assert _seen(requests, tmp_path) == original


def test_the_request_comes_from_the_first_call_that_recorded_it(tmp_path: Path) -> None:
    """The run span records a start event, not the request, and the first model call is a
    wrapper that recorded no input messages: the request is the user message of the call
    inside it."""
    original = _seen(_requests(), tmp_path)
    requests = _requests()
    for span in spans(requests[0]):
        if "parentSpanId" not in span or not span["parentSpanId"]:
            set_attribute(
                span,
                "input.value",
                json.dumps({"init_state": {"is_running": False}, "start_event": "StartEvent()"}),
            )
            span["attributes"] = [
                a for a in span["attributes"] if not a["key"].startswith("llm.input_messages.")
            ]
    scope, first = min(_model_spans(requests), key=lambda f: int(f[1]["startTimeUnixNano"]))
    wrapper = _beside(
        first,
        f"{1:016x}",
        int(first["startTimeUnixNano"]) - 1000,
        int(first["endTimeUnixNano"]) + 1000,
        input_value=json.dumps({"messages": [repr(m) for m in _sent(first)]}),
        output_value=json.dumps({"message": {"role": "assistant", "content": None}}),
    )
    wrapper["name"] = first["name"]
    scope["spans"].append(wrapper)
    first["parentSpanId"] = wrapper["spanId"]
    assert _seen(requests, tmp_path) == original


def test_a_printed_result_object_is_not_the_answer(tmp_path: Path) -> None:
    """The run span's output is its result object printed and cut at 200 characters: the
    answer is still the model's last text."""
    original = _seen(_requests(), tmp_path)
    answer = original["final_answer"]
    assert answer
    printed = (
        "StopEvent(result=AgentOutput(response=ChatMessage(role=<MessageRole.ASSISTANT: "
        "'assistant'>, additional_kwargs={}, blocks=[TextBlock(block_type='text', "
        f"text={answer!r})]), tool_calls=[], raw=None, current_agent_name='Agent'))"
    )
    requests = copy.deepcopy(_requests())
    for span in spans(requests[0]):
        if not span.get("parentSpanId"):
            set_attribute(span, "output.value", printed[:197] + "...")
            set_attribute(span, "output.mime_type", "text/plain")
    assert _seen(requests, tmp_path) == original
