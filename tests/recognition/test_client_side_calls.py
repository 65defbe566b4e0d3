"""Model and tool calls traced at the model client, in the older GenAI names, are read.

Every session of a real GenAI trace (fixtures/genai_manual: an agent span with its model and tool
calls as direct children) is rewritten the way a model client's instrumentation records them:
- a model call names no operation and counts its tokens under the older
  `gen_ai.usage.prompt_tokens` / `gen_ai.usage.completion_tokens`;
- a tool call is the span the client opens for each call the model asked for: `tool.name`,
  `tool.parameters` and the call's id as `tool.call.id`, with no result and no status (the
  result reaches the trace only as the tool message of the next model call's prompt, under
  that id).
The report must find the same turns, steps, skill loads, answers and verdicts as for the original
sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.rewritten import attribute, file_requests, file_truth, report_of, spans

FILE = ("genai_manual", "genai_manual.jsonl")
EXPECTATIONS = "genai_manual/expectations.yaml"
Span = dict[str, Any]
_RENAMED = {
    "gen_ai.usage.input_tokens": "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.output_tokens": "gen_ai.usage.completion_tokens",
}


def _older_usage(span: Span) -> None:
    """A model call with no operation named and its usage under the older names."""
    if attribute(span, "gen_ai.operation.name") != "chat":
        return
    span["name"] = "acme.chat.completion"
    kept = []
    for a in span["attributes"]:
        if a["key"] == "gen_ai.operation.name":
            continue
        kept.append({**a, "key": _RENAMED.get(a["key"], a["key"])})
    span["attributes"] = kept


def _asked_for(span: Span) -> None:
    """A tool call as the span of the model's request: its name, arguments and call id."""
    if attribute(span, "gen_ai.operation.name") != "execute_tool":
        return
    tool = attribute(span, "gen_ai.tool.name")
    values = {
        "tool.name": tool,
        "tool.parameters": attribute(span, "gen_ai.tool.call.arguments") or "{}",
        "tool.call.id": attribute(span, "gen_ai.tool.call.id"),
        "tool.call.type": "function",
    }
    assert values["tool.call.id"], span["name"]
    kept = [a for a in span["attributes"] if not a["key"].startswith("gen_ai.")]
    span["name"] = f"tool_call.{tool}"
    span["attributes"] = kept + [{"key": k, "value": {"stringValue": v}} for k, v in values.items()]
    span["events"] = []
    span.pop("status", None)


def _rewritten(change: Callable[[Span], None]) -> list[dict[str, Any]]:
    requests = file_requests(*FILE)
    for request in requests:
        for span in spans(request):
            change(span)
    return requests


def _what_happened(session: dict[str, Any]) -> dict[str, Any]:
    return {
        "turns": [s["text"] for s in session["steps"] if s["kind"] == "agent_turn"],
        "model_calls": session["stats"]["model_calls"],
        "tokens": (session["stats"]["input_tokens"], session["stats"]["output_tokens"]),
        "tool_calls": [
            (s["name"], s["arguments"], s["status"])
            for s in session["steps"]
            if s["kind"] == "tool_call"
        ],
        "errors": session["stats"]["errors"],
        "skill_loads": [(x["skill"], x["status"]) for x in session["skill_loads"]],
        "catalogue": session["coverage"]["catalogue_source"],
        "final_answer": session["final_answer"],
        "verdicts": [(v["evaluator"], v["outcome"], v["label"]) for v in session["verdicts"]],
    }


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = {}
    rewrites = {"original": None, "older_usage": _older_usage, "asked_for": _asked_for}
    for name, change in rewrites.items():
        folder: Path = tmp_path_factory.mktemp(name)
        requests = _rewritten(change) if change else file_requests(*FILE)
        report = report_of(requests, folder, EXPECTATIONS)
        out[name] = {s["session_id"]: s for s in report["sessions"]}
    return out


@pytest.mark.parametrize("rewrite", ["older_usage", "asked_for"])
@pytest.mark.parametrize("session_id", sorted(file_truth(*FILE)))
def test_steps_and_verdicts_do_not_move(
    session_id: str, rewrite: str, reports: dict[str, dict[str, Any]]
) -> None:
    original = reports["original"][session_id]
    assert _what_happened(reports[rewrite][session_id]) == _what_happened(original)


def test_the_tool_calls_were_read_by_shape(reports: dict[str, dict[str, Any]]) -> None:
    read = [s["coverage"]["fallback_spans"] for s in reports["asked_for"].values()]
    assert sum(read) > 0
