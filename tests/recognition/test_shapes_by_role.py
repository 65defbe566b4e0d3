"""Spans that say their own role are read by it, under any prefix.

Every session of a real GenAI trace (fixtures/genai_manual: an agent span with its model and tool
calls as direct children) is rewritten the way a tracing SDK's observations record it, with no
GenAI key left and a prefix nobody listed: each span carries `acme.observation.type` (`agent`,
`generation`, `tool`) beside `acme.observation.input` / `.output`. The agent's input is the
function call's `{"args": [...], "kwargs": {}}` envelope and its output the answer's text; a model
call's input is `{"tools": [...], "messages": [...]}` in chat-completions form, its output the
assistant message (with its `tool_calls`), its token counts one JSON value
(`acme.observation.usage_details`), and no finish reason; a tool span is named after its tool, its
input the envelope of keyword arguments, its output the result. The report must find the same
turns, steps, skill loads, answers and verdicts as for the original sessions; also with the
model calls' role left unsaid (their input's messages say it), with the agent's output left
out (the answer is then the last model output with text and no tool calls), also with each
model output the client's whole response object (`{"choices": [{"message": ...}]}`), with each
tool span typed as a span (`acme.span.type`: `tool`) beside its own unprefixed `input` (the
arguments) and `output` (the result), its tool's name and parameter schema under
`acme.tool.*`, and every span saying what it belongs to (`acme.entity.type`: `agent`): the
schema is no call's arguments and the entity's type no span's role; with each agent
handing its turn to a sub-agent nested under it; and with each agent first reading its memory
(a span typed `memory`, its own `input` a query and `output` the messages found): no model
call; with the run's token counts on each agent and only its last model call counting its own
(the counts are the run's); and with each agent's last model call recording only its role,
model and counts (still a model call); and with every model call's prompt messages under a key
no shape names and its response left out (its catalogue still read).
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
PREFIX = "acme.observation"
_KEEP = ("session.id", "spanjudge.expected_skills")


def _text(parts: list[dict[str, Any]]) -> str | None:
    texts = [p["content"] for p in parts if p.get("type") == "text"]
    return "\n".join(texts) or None


def _chat_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GenAI messages (`parts`) in chat-completions form."""
    out: list[dict[str, Any]] = []
    for message in messages:
        parts = message["parts"]
        if message["role"] == "tool":
            for part in parts:
                result = part.get("result", part.get("response"))
                content = result if isinstance(result, str) else json.dumps(result)
                out.append({"role": "tool", "tool_call_id": part["id"], "content": content})
            continue
        said: dict[str, Any] = {"role": message["role"], "content": _text(parts)}
        calls = [
            {
                "id": p["id"],
                "type": "function",
                "function": {"name": p["name"], "arguments": json.dumps(p["arguments"])},
            }
            for p in parts
            if p.get("type") == "tool_call"
        ]
        if calls:
            said["tool_calls"] = calls
        out.append(said)
    return out


def _int(span: dict[str, Any], key: str) -> int | None:
    for a in span.get("attributes", ()):
        if a["key"] == key:
            return int(a["value"]["intValue"])
    return None


def _observation(span: dict[str, Any], variant: str) -> tuple[str, list[dict[str, Any]]]:
    """The span's new name and attributes (`VARIANTS`)."""
    operation = attribute(span, "gen_ai.operation.name")
    if operation == "execute_tool":
        arguments = json.loads(attribute(span, "gen_ai.tool.call.arguments") or "{}")
        name = attribute(span, "gen_ai.tool.name") or span["name"]
        if variant == "span_typed_tools":
            schema = {"type": "object", "properties": {k: {"type": "string"} for k in arguments}}
            return f"run-tool:{name}", string_attributes(
                {
                    "acme.span.type": "tool",
                    "acme.tool.name": name,
                    "acme.tool.parameters": json.dumps(schema),
                    "input": json.dumps(arguments),
                    "output": attribute(span, "gen_ai.tool.call.result"),
                }
            )
        return name, string_attributes(
            {
                f"{PREFIX}.type": "tool",
                f"{PREFIX}.input": json.dumps({"args": [], "kwargs": arguments}),
                f"{PREFIX}.output": attribute(span, "gen_ai.tool.call.result"),
            }
        )
    inputs = json.loads(attribute(span, "gen_ai.input.messages") or "[]")
    (output,) = json.loads(attribute(span, "gen_ai.output.messages") or "[]")
    if operation == "invoke_agent":
        (request,) = [_text(m["parts"]) for m in inputs if m["role"] == "user"][-1:]
        return "shop_ops_agent", string_attributes(
            {
                f"{PREFIX}.type": "agent",
                f"{PREFIX}.input": json.dumps({"args": [request], "kwargs": {}}),
                f"{PREFIX}.output": None
                if variant in ("no_agent_output", "client_responses")
                else _text(output["parts"]),
            }
        )
    system = json.loads(attribute(span, "gen_ai.system_instructions") or "[]")
    prompt = [{"role": "system", "content": _text(system)}] if system else []
    (answer,) = _chat_messages([output])
    usage = {
        "prompt_tokens": _int(span, "gen_ai.usage.input_tokens"),
        "completion_tokens": _int(span, "gen_ai.usage.output_tokens"),
    }
    return "model-generation", string_attributes(
        {
            f"{PREFIX}.type": None if variant == "model_role_unsaid" else "generation",
            f"{PREFIX}.input": json.dumps(
                {"tools": [], "messages": prompt + _chat_messages(inputs)}
            ),
            f"{PREFIX}.output": json.dumps(
                {"id": "resp-1", "choices": [{"index": 0, "message": answer}], "usage": usage}
                if variant == "client_responses"
                else answer
            ),
            f"{PREFIX}.model.name": attribute(span, "gen_ai.request.model"),
            f"{PREFIX}.usage_details": json.dumps(usage),
        }
    )


VARIANTS = (
    "as_recorded",
    "model_role_unsaid",
    "no_agent_output",
    "span_typed_tools",
    "delegated",
    "client_responses",
    "memory_reads",
    "run_totals",
    "answer_call_uncontented",
    "prompts_under_any_key",
)


def _delegated(request_spans: list[dict[str, Any]]) -> None:
    """Each agent observation hands its whole turn to a sub-agent: a nested `agent`
    observation, with the same input and output, becomes the parent of everything the agent
    did."""
    for span in list(request_spans):
        if attribute(span, f"{PREFIX}.type") != "agent":
            continue
        worker = json.loads(json.dumps(span))
        worker["spanId"] = span["spanId"][:-4] + "beef"
        worker["parentSpanId"] = span["spanId"]
        worker["name"] = "delegate_worker"
        for child in request_spans:
            if child.get("parentSpanId") == span["spanId"]:
                child["parentSpanId"] = worker["spanId"]
        request_spans.append(worker)


def _memory_reads(request_spans: list[dict[str, Any]]) -> None:
    """Each agent observation first reads its memory: a child span typed as a span
    (`acme.span.type`: `memory`) whose own `input` is the query and whose `output` the messages
    it found, a request and its answer."""
    for span in list(request_spans):
        if attribute(span, f"{PREFIX}.type") != "agent":
            continue
        found = [
            {"role": "user", "content": "What did we do last time?"},
            {"role": "assistant", "content": "We summarised last week's sales."},
        ]
        memory = json.loads(json.dumps(span))
        memory["spanId"] = span["spanId"][:-4] + "f00d"
        memory["parentSpanId"] = span["spanId"]
        memory["name"] = "memory.read"
        memory["attributes"] = [
            a for a in span["attributes"] if not a["key"].startswith(f"{PREFIX}.")
        ] + string_attributes(
            {
                "acme.span.type": "memory",
                "input": json.dumps({"query": "sales", "limit": 10}),
                "output": json.dumps(found),
            }
        )
        request_spans.append(memory)


def _calls_of(request_spans: list[dict[str, Any]], agent: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent observation's model calls, first to last."""
    return sorted(
        (
            child
            for child in request_spans
            if child.get("parentSpanId") == agent["spanId"]
            and attribute(child, f"{PREFIX}.type") == "generation"
        ),
        key=lambda child: int(child["startTimeUnixNano"]),
    )


def _run_totals(request_spans: list[dict[str, Any]]) -> None:
    """Each agent observation carries its run's token counts, and of its model calls only the
    last one counts its own (as a tracer that records one model span per run writes them)."""
    for span in list(request_spans):
        if attribute(span, f"{PREFIX}.type") != "agent":
            continue
        calls = _calls_of(request_spans, span)
        totals = {"prompt_tokens": 0, "completion_tokens": 0}
        for call in calls:
            usage = json.loads(attribute(call, f"{PREFIX}.usage_details") or "{}")
            for key in totals:
                totals[key] += usage.get(key) or 0
        for call in calls[:-1]:
            call["attributes"] = [
                a for a in call["attributes"] if a["key"] != f"{PREFIX}.usage_details"
            ]
        span["attributes"] += [
            {"key": f"acme.usage.{key}", "value": {"intValue": str(count)}}
            for key, count in totals.items()
        ]


def _answer_call_uncontented(request_spans: list[dict[str, Any]]) -> None:
    """Each agent's last model call, after others that showed the prompt, records only its
    role, its model and its token counts (its content sits where no reader looks)."""
    for span in list(request_spans):
        if attribute(span, f"{PREFIX}.type") != "agent":
            continue
        calls = _calls_of(request_spans, span)
        for call in calls[-1:] if len(calls) > 1 else ():
            call["attributes"] = [
                a
                for a in call["attributes"]
                if a["key"] not in (f"{PREFIX}.input", f"{PREFIX}.output")
            ]


def _prompts_under_any_key(request_spans: list[dict[str, Any]]) -> None:
    """Every model call records the messages it was sent under a key no shape names
    (`acme.llm.messages`), and its response nowhere."""
    for call in request_spans:
        if attribute(call, f"{PREFIX}.type") != "generation":
            continue
        prompt = json.loads(attribute(call, f"{PREFIX}.input") or "{}")
        call["attributes"] = [
            a for a in call["attributes"] if a["key"] not in (f"{PREFIX}.input", f"{PREFIX}.output")
        ] + string_attributes({"acme.llm.messages": json.dumps(prompt["messages"])})


def _as_observations(variant: str) -> list[dict[str, Any]]:
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
            span["name"], observed = _observation(span, variant)
            if variant == "span_typed_tools":  # said first, as the span's other types are
                kept += string_attributes({"acme.entity.type": "agent"})
            span["attributes"] = kept + observed
            span["events"] = [e for e in span.get("events", ()) if e["name"] == "exception"]
        rewrite = _REWRITES.get(variant)
        if rewrite is not None:
            for scope_spans in (ss for rs in request["resourceSpans"] for ss in rs["scopeSpans"]):
                rewrite(scope_spans["spans"])
    text = json.dumps(requests)
    assert "gen_ai." not in text
    return requests


_REWRITES = {
    "delegated": _delegated,
    "memory_reads": _memory_reads,
    "run_totals": _run_totals,
    "answer_call_uncontented": _answer_call_uncontented,
    "prompts_under_any_key": _prompts_under_any_key,
}


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp_path: Path = tmp_path_factory.mktemp("original")
    report = report_of(file_requests(*FILE), tmp_path, EXPECTATIONS)
    return {s["session_id"]: s for s in report["sessions"]}


@pytest.fixture(scope="module", params=VARIANTS)
def reports(
    request: pytest.FixtureRequest,
    original: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, Any], dict[str, Any]]:
    tmp_path: Path = tmp_path_factory.mktemp(request.param)
    rewritten = report_of(_as_observations(request.param), tmp_path, EXPECTATIONS)
    return original, {s["session_id"]: s for s in rewritten["sessions"]}


def test_every_session_is_read_from_its_observations(
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
