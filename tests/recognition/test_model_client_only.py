"""Sessions traced only at the model client: no agent span, no tool span, only the model calls
with the messages they were given and gave back (an LLM SDK's instrumentation, the agent's
own loop untraced).

Each case is a real fixture file with every span but its model calls removed, compared with
what happened (the fixture set's scenarios.json): the turns, the tool calls and loads the
messages show, the errors and the final answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.metamorphic.log_records import CONTENT_FORMS, in_content_form
from tests.metamorphic.transforms import map_strings
from tests.support.rewritten import drop_spans, file_requests, file_truth, report_of, spans

# Fixture files whose model calls' messages show every call and its outcome
FILES = (
    ("genai_manual", "genai_manual.jsonl"),
    ("agent_framework", "agent_framework.jsonl"),
    ("strands", "strands_latest.jsonl"),
    ("strands", "strands_attributes_only.jsonl"),
    ("strands", "strands_default.jsonl"),
    ("strands", "strands_trajectory.jsonl"),
    ("mcp", "mcp_openllmetry.jsonl"),
    ("openllmetry", "openllmetry.jsonl"),
    ("adk", "adk.jsonl"),
    ("langgraph", "langgraph.jsonl"),
    ("deepagents", "deepagents.jsonl"),
    ("openai_agents_custom_loader", "custom_loader_openllmetry.jsonl"),
    ("openai_agents", "openai_agents_eager_openinference.jsonl"),
    ("openai_agents", "openai_agents_eager_openllmetry.jsonl"),
    ("openai_agents", "openai_agents_lazy_openinference.jsonl"),
    ("openai_agents", "openai_agents_lazy_openllmetry.jsonl"),
)
# Fixture files whose model calls show the turns but not every call:
# - smolagents: a code agent, its tools called from the code in the model's text (no
#   structured call to read), its answer the argument of `final_answer` in that code;
# - mastra: one model span per run recording only the run's final text; the run's calls
#   reach the messages only of the next run, and never those of a session's last run.
# Left out, vercel_ai: its provider calls (`doGenerate`) keep their messages under the AI SDK's
# own `ai.prompt.messages` / `ai.response.*` keys, which the GenAI reading that claims those
# spans (by `gen_ai.system`) does not take; the SDK records them under the `generateText`
# span it always emits, and that span is read.
TURNS_ONLY = (("smolagents", "smolagents.jsonl"), ("mastra", "mastra.jsonl"))
_MODEL_OPERATIONS = ("chat", "text_completion", "generate_content")
_SESSION_KEYS = ("session.id", "gen_ai.conversation.id")


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: a["value"].get("stringValue") for a in span.get("attributes", ())}


def _is_model_call(span: dict[str, Any]) -> bool:
    attrs = _attrs(span)
    return (
        attrs.get("gen_ai.operation.name") in _MODEL_OPERATIONS
        or attrs.get("openinference.span.kind") == "LLM"
        or "llm.request.type" in attrs
        or str(attrs.get("ai.operationId")).endswith((".doGenerate", ".doStream"))
    )


def model_calls_only(requests: list[dict[str, Any]]) -> None:
    """Every span but the model calls removed; each model call a root span carrying the
    session id its trace's spans had (else its resource keeps it)."""
    session_of: dict[str, str] = {}
    for request in requests:
        for span in spans(request):
            attrs = _attrs(span)
            found = next((attrs[k] for k in _SESSION_KEYS if attrs.get(k)), None)
            if found is not None:
                session_of.setdefault(span["traceId"], found)
    drop_spans(requests, lambda s: not _is_model_call(s))
    for request in requests:
        for span in spans(request):
            span["parentSpanId"] = ""
            if span["traceId"] in session_of and not any(k in _attrs(span) for k in _SESSION_KEYS):
                value = {"stringValue": session_of[span["traceId"]]}
                span.setdefault("attributes", []).append({"key": "session.id", "value": value})


@pytest.mark.parametrize("form", CONTENT_FORMS)
@pytest.mark.parametrize(("framework", "name"), FILES)
def test_a_session_of_model_calls_only_has_its_turns_calls_and_answer(
    framework: str, name: str, form: str, tmp_path: Path
) -> None:
    requests = file_requests(framework, name)
    model_calls_only(requests)
    assert all(_is_model_call(s) for r in requests for s in spans(r))
    requests = in_content_form(requests, form)
    truth = file_truth(framework, name)
    report = report_of(requests, tmp_path, f"{framework}/expectations.yaml")
    seen = {
        s["session_id"]: (
            s["stats"]["turns"],
            s["stats"]["tool_calls"],
            [(x["skill"], x["status"]) for x in s["skill_loads"]],
            s["stats"]["errors"],
            (s["final_answer"] or "").strip(),
        )
        for s in report["sessions"]
    }
    assert seen == {
        sid: (
            s["turns"],
            s["tool_calls"],
            [(x["skill"], x["status"]) for x in s["skill_loads"]],
            s["errors"],
            (s["final_answer"] or "").strip(),
        )
        for sid, s in truth.items()
    }


@pytest.mark.parametrize(("framework", "name"), TURNS_ONLY)
def test_a_session_of_model_calls_only_has_its_turns(
    framework: str, name: str, tmp_path: Path
) -> None:
    """Each run's model calls begin a turn at the user's request; a managed agent's run, given
    a task its manager wrapped in a longer prompt, is no turn of its own (the manager's next
    call goes on with the user's request)."""
    requests = file_requests(framework, name)
    model_calls_only(requests)
    report = report_of(requests, tmp_path, f"{framework}/expectations.yaml")
    seen = {s["session_id"]: s["stats"]["turns"] for s in report["sessions"]}
    truth = {sid: s["turns"] for sid, s in file_truth(framework, name).items()}
    assert seen == truth
    assert max(truth.values()) > 1


def _session(framework: str, name: str, session_id: str, tmp_path: Path) -> dict[str, Any]:
    requests = file_requests(framework, name)
    model_calls_only(requests)
    report = report_of(requests, tmp_path, f"{framework}/expectations.yaml")
    (session,) = [s for s in report["sessions"] if s["session_id"] == session_id]
    return session


@pytest.mark.parametrize("instrumentation", ["openinference", "openllmetry"])
def test_a_call_the_run_ended_after_is_a_call_without_a_result(
    instrumentation: str, tmp_path: Path
) -> None:
    """The turn limit ended the run right after the model asked for a tool: no result ever
    came back. The call is counted, neither failed nor answered (before: no call at all)."""
    name = f"openai_agents_lazy_{instrumentation}.jsonl"
    session_id = f"oa-lazy-{instrumentation}-aborted-run"
    truth = file_truth("openai_agents", name)[session_id]
    session = _session("openai_agents", name, session_id, tmp_path)
    calls = [s for s in session["steps"] if s["kind"] == "tool_call"]
    assert [c["name"] for c in calls] == [c["tool"] for c in truth["calls"]] == ["get_weather"]
    assert (calls[0].get("result"), calls[0].get("error")) == (None, None)
    assert (session["stats"]["tool_calls"], session["stats"]["errors"]) == (1, 0)


@pytest.mark.parametrize("instrumentation", ["openinference", "openllmetry"])
def test_a_call_whose_result_goes_to_another_agent_is_a_handoff(
    instrumentation: str, tmp_path: Path
) -> None:
    """The model call given the transfer's result speaks with other system instructions:
    another agent took over, and the transfer is no tool call (before: two tool calls)."""
    name = f"custom_loader_{instrumentation}.jsonl"
    session_id = f"oa-custom-{instrumentation}-handoff"
    truth = file_truth("openai_agents_custom_loader", name)[session_id]
    session = _session("openai_agents_custom_loader", name, session_id, tmp_path)
    calls = [s["name"] for s in session["steps"] if s["kind"] == "tool_call"]
    assert calls == [c["tool"] for c in truth["calls"]] == ["get_weather"]
    assert session["final_answer"] == truth["final_answer"]


@pytest.mark.parametrize("instrumentation", ["openinference", "openllmetry"])
def test_an_agent_run_as_a_tool_is_still_a_tool_call(instrumentation: str, tmp_path: Path) -> None:
    """The sub-agent's model calls speak with other instructions, but its result goes back to
    the agent that asked: both calls count, and the sub-agent's request opens no turn."""
    name = f"custom_loader_{instrumentation}.jsonl"
    session_id = f"oa-custom-{instrumentation}-agents-as-tools"
    truth = file_truth("openai_agents_custom_loader", name)[session_id]
    session = _session("openai_agents_custom_loader", name, session_id, tmp_path)
    calls = [s["name"] for s in session["steps"] if s["kind"] == "tool_call"]
    assert calls == [c["tool"] for c in truth["calls"]]
    assert len(calls) == 2
    assert session["stats"]["turns"] == truth["turns"] == 1


@pytest.mark.parametrize("instrumentation", ["openinference", "openllmetry"])
def test_a_skill_md_sent_back_is_a_load_whatever_the_call_asked(
    instrumentation: str, tmp_path: Path
) -> None:
    """`fetch_playbook(topic=...)` names no skill, but the SKILL.md it returned did: a load of
    that skill, not a tool call beside a skill pinned into the prompt."""
    name = f"custom_loader_{instrumentation}.jsonl"
    session_id = f"oa-custom-{instrumentation}-playbook-followed"
    truth = file_truth("openai_agents_custom_loader", name)[session_id]
    session = _session("openai_agents_custom_loader", name, session_id, tmp_path)
    loads = [(x["skill"], x["tool_name"], x["status"]) for x in session["skill_loads"]]
    assert loads == [("csv-report", "fetch_playbook", "loaded")]
    assert session["stats"]["tool_calls"] == truth["tool_calls"]


def _failed_call_ids(requests: list[dict[str, Any]], failed: list[dict[str, Any]]) -> set[str]:
    """The ids the model gave the calls the scenario says failed (tool and arguments)."""
    ids = set()
    for request in requests:
        for span in spans(request):
            for text in _attrs(span).values():
                for message in _messages(text):
                    for part in message.get("parts", ()):
                        if part.get("type") == "tool_call" and any(
                            part.get("name") == c["tool"]
                            and c["args"].items() <= (part.get("arguments") or {}).items()
                            for c in failed
                        ):
                            ids.add(part["id"])
    return ids


def _messages(text: str | None) -> list[dict[str, Any]]:
    if not text or not text.startswith("[{"):
        return []
    decoded = json.loads(text)
    return [m for m in decoded if isinstance(m, dict)]


def _mark_results(requests: list[dict[str, Any]], ids: set[str], mark: dict[str, Any]) -> int:
    """Add ``mark`` to each `tool_call_response` part answering one of ``ids``."""
    marked = 0
    for request in requests:
        for span in spans(request):
            for attribute in span.get("attributes", ()):
                found = _messages(attribute["value"].get("stringValue"))
                for message in found:
                    for part in message.get("parts", ()):
                        if part.get("type") == "tool_call_response" and part.get("id") in ids:
                            part.update(mark)
                            marked += 1
                if found:
                    attribute["value"]["stringValue"] = json.dumps(found)
    return marked


@pytest.mark.parametrize("mark", [{"is_error": True}, {"status": "error"}])
def test_a_result_marked_failed_is_a_failed_call_whatever_its_text(
    mark: dict[str, Any], tmp_path: Path
) -> None:
    """The result sent back reads "Read-only file system: '/out/report.md'" (no word of
    failure). Where the part holding it marks it failed, the call failed, and the corrected
    call after it is a retry (before: an ordinary result, no error, no retry)."""
    session_id = "pydantic-ai-tool-error-retry"
    truth = file_truth("pydantic_ai", "pydantic_ai.jsonl")[session_id]
    requests = file_requests("pydantic_ai", "pydantic_ai.jsonl")
    model_calls_only(requests)
    failed = [c for c in truth["calls"] if not c["ok"]]
    assert _mark_results(requests, _failed_call_ids(requests, failed), mark) > 0
    report = report_of(requests, tmp_path, "pydantic_ai/expectations.yaml")
    (session,) = [s for s in report["sessions"] if s["session_id"] == session_id]
    stats = session["stats"]
    assert (stats["tool_calls"], stats["errors"], stats["retries"]) == (
        truth["tool_calls"],
        truth["errors"],
        truth["retries"],
    )
    errors = [s["error"] for s in session["steps"] if s["kind"] == "tool_call" and s.get("error")]
    assert errors == ["Read-only file system: '/out/report.md'"]


def test_a_clock_atop_the_instructions_is_still_the_same_agent(tmp_path: Path) -> None:
    """Each model call's system instructions open with the time of the call: the same agent
    speaks on, and every call it made counts (no handoff read from the changing clock)."""
    name = "custom_loader_openllmetry.jsonl"
    session_id = "oa-custom-openllmetry-playbook-followed"
    truth = file_truth("openai_agents_custom_loader", name)[session_id]
    requests = file_requests("openai_agents_custom_loader", name)
    model_calls_only(requests)
    stamped = 0
    for request in requests:
        for span in spans(request):
            for attribute in span.get("attributes", ()):
                found = _messages(attribute["value"].get("stringValue"))
                for message in found:
                    for part in message.get("parts", ()) if message.get("role") == "system" else ():
                        stamped += 1
                        part["content"] = f"Current time: 10:00:{stamped:02d}.\n{part['content']}"
                if found:
                    attribute["value"]["stringValue"] = json.dumps(found)
    assert stamped > 3
    report = report_of(requests, tmp_path, "openai_agents_custom_loader/expectations.yaml")
    (session,) = [s for s in report["sessions"] if s["session_id"] == session_id]
    calls = [s["name"] for s in session["steps"] if s["kind"] in ("tool_call", "skill_load")]
    assert calls == [c["tool"] for c in truth["calls"]]


def _as_content_blocks(span: dict[str, Any]) -> None:
    """A model call's indexed prompt messages rewritten the way an instrumentation of a
    content-block API writes them: each assistant tool call a `tool_use` block, each tool
    message a user message holding a `tool_result` block (`is_error` where the result was an
    error payload), the blocks JSON in the message's `content`."""
    attrs = {a["key"]: a["value"] for a in span["attributes"]}
    kept = []
    for a in span["attributes"]:
        key = a["key"]
        parts = key.split(".")
        if not key.startswith("gen_ai.prompt.") or len(parts) < 4:
            kept.append(a)
            continue
        base = ".".join(parts[:3])
        role = attrs.get(f"{base}.role", {}).get("stringValue")
        if role == "tool":
            if key.endswith(".role"):
                kept.append({"key": key, "value": {"stringValue": "user"}})
            elif key.endswith(".content"):
                text = a["value"]["stringValue"]
                call_id = attrs[f"{base}.tool_call_id"]["stringValue"]
                payload = json.loads(text) if text.startswith("{") else None
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
                if isinstance(payload, dict) and payload.get("status") == "error":
                    block.update(is_error=True, content=payload["error"])
                else:
                    block["content"] = [{"type": "text", "text": text}]
                kept.append({"key": key, "value": {"stringValue": json.dumps([block])}})
        elif role == "assistant" and ".tool_calls." in key:
            if key.endswith(".name"):
                m = key.split(".tool_calls.")[1].split(".")[0]
                call = f"{base}.tool_calls.{m}"
                use = {
                    "type": "tool_use",
                    "id": attrs[f"{call}.id"]["stringValue"],
                    "name": a["value"]["stringValue"],
                    "input": json.loads(attrs[f"{call}.arguments"]["stringValue"]),
                }
                kept.append({"key": f"{base}.content", "value": {"stringValue": json.dumps([use])}})
        else:
            kept.append(a)
    span["attributes"] = kept


def test_tool_calls_in_content_blocks_are_read(tmp_path: Path) -> None:
    """The openllmetry fixture's model calls, their tool calls and results written as
    `tool_use` / `tool_result` content blocks: the same calls, loads and errors (before: no
    result was matched to its call, so no call counted but the last ones asked)."""
    truth = file_truth("openllmetry", "openllmetry.jsonl")
    requests = file_requests("openllmetry", "openllmetry.jsonl")
    model_calls_only(requests)
    for request in requests:
        for span in spans(request):
            _as_content_blocks(span)
    text = json.dumps(requests)
    assert "tool_result" in text and "tool_call_id" not in text
    report = report_of(requests, tmp_path, "openllmetry/expectations.yaml")
    seen = {
        s["session_id"]: (
            s["stats"]["tool_calls"],
            [(x["skill"], x["status"]) for x in s["skill_loads"]],
            s["stats"]["errors"],
        )
        for s in report["sessions"]
    }
    assert seen == {
        sid: (s["tool_calls"], [(x["skill"], x["status"]) for x in s["skill_loads"]], s["errors"])
        for sid, s in truth.items()
    }


def test_a_multi_line_request_given_to_an_agent_as_a_tool_opens_no_turn(tmp_path: Path) -> None:
    """The request the orchestrator gives its weather agent runs over two lines and quotes a
    word: the sub-agent's first model call still continues the user's turn."""
    name = "custom_loader_openllmetry.jsonl"
    session_id = "oa-custom-openllmetry-agents-as-tools"
    truth = file_truth("openai_agents_custom_loader", name)[session_id]
    requests = file_requests("openai_agents_custom_loader", name)
    model_calls_only(requests)
    given = 'Current weather in "Paris"\nAnswer in one line.'
    replaced: list[str] = []

    def rewrite(text: str) -> str:
        if text != "Current weather in Paris":
            return text
        replaced.append(text)
        return given

    for request in requests:
        map_strings(request, rewrite, span_names=False)
    assert len(replaced) >= 2  # what the tool was given, and the sub-agent's request
    report = report_of(requests, tmp_path, "openai_agents_custom_loader/expectations.yaml")
    (session,) = [s for s in report["sessions"] if s["session_id"] == session_id]
    assert session["stats"]["turns"] == truth["turns"] == 1
    assert session["final_answer"] == truth["final_answer"]
