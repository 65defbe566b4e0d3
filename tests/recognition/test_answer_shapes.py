"""The final answer is the last assistant text of the agent's output, whatever its shape, and
never the run's texts run together.

Each case is a real Strands session (fixtures/strands) whose agent span's output is rewritten
into a shape other agent frameworks write; the answer must stay the one the scenario records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.rewritten import FIXTURES, report_of, session_requests, spans

FILE = "strands/strands_latest.jsonl"
EXPECTATIONS = "strands/expectations.yaml"
SESSION = "strands-latest-required-skill-followed"
PREAMBLE = "I'll use the csv-report skill for this."


def _recorded_answer() -> str:
    scenarios = json.loads((FIXTURES / "strands" / "scenarios.json").read_text())
    (record,) = [s for s in scenarios["sessions"] if s["session_id"] == SESSION]
    answer: str = record["final_answer"]
    return answer


def _with_agent_output(output: Any, *, model_outputs: bool = True) -> list[dict[str, Any]]:
    """The session with its agent span's output messages replaced by ``output`` (and, without
    ``model_outputs``, no model call's output recorded: the agent span is the only source)."""
    requests = session_requests(FILE, SESSION)
    for request in requests:
        for span in spans(request):
            agent = span["name"].startswith("invoke_agent")
            if not agent and model_outputs:
                continue
            for event in span.get("events", ()):
                for a in event.get("attributes", ()):
                    if a["key"] == "gen_ai.output.messages" and agent:
                        a["value"]["stringValue"] = json.dumps(output)
                if not agent and span["name"] == "chat":
                    event["attributes"] = [
                        a for a in event["attributes"] if a["key"] != "gen_ai.output.messages"
                    ]
    return requests


def _answer(requests: list[dict[str, Any]], tmp_path: Path) -> str | None:
    (session,) = report_of(requests, tmp_path, EXPECTATIONS)["sessions"]
    answer: str | None = session["final_answer"]
    return answer


def _parts(*texts: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": t} for t in texts],
            "finish_reason": "end_turn",
        }
    ]


def test_one_message_holding_every_text_of_the_run(tmp_path: Path) -> None:
    answer = _recorded_answer()
    assert _answer(_with_agent_output(_parts(PREAMBLE, answer)), tmp_path) == answer


def test_the_run_concatenated_into_one_text(tmp_path: Path) -> None:
    answer = _recorded_answer()
    assert _answer(_with_agent_output(_parts(f"{PREAMBLE} {answer}")), tmp_path) == answer


FRAMEWORK_SHAPES = {
    "items": lambda text: [{"role": "assistant", "items": [{"text": text}]}],
    "content blocks": lambda text: {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
    },
    "content string": lambda text: [
        {"role": "user", "content": "Summarise data/sales.csv."},
        {"role": "assistant", "content": text},
    ],
}


@pytest.mark.parametrize("shape", sorted(FRAMEWORK_SHAPES))
def test_a_frameworks_own_message_json(shape: str, tmp_path: Path) -> None:
    """The agent span is the only place the answer was recorded (no model call's output)."""
    answer = _recorded_answer()
    requests = _with_agent_output(FRAMEWORK_SHAPES[shape](answer), model_outputs=False)
    assert _answer(requests, tmp_path) == answer


def test_a_frameworks_message_holding_every_text_of_the_run(tmp_path: Path) -> None:
    answer = _recorded_answer()
    output = [{"role": "assistant", "items": [{"text": PREAMBLE}, {"text": answer}]}]
    assert _answer(_with_agent_output(output), tmp_path) == answer


def test_a_choice_event_holding_a_frameworks_message(tmp_path: Path) -> None:
    """v1.36 events (fixtures/strands default mode): the agent span's `gen_ai.choice` message is
    a framework's own message object, and no model call's choice recorded text."""
    answer = _recorded_answer()
    session = SESSION.replace("latest", "default")
    requests = session_requests("strands/strands_default.jsonl", session)
    message = {"role": "assistant", "items": [{"$type": "TextContent", "text": answer}]}
    for request in requests:
        for span in spans(request):
            agent = span["name"].startswith("invoke_agent")
            for event in span.get("events", ()):
                if event["name"] != "gen_ai.choice" or span["name"].startswith("execute_tool"):
                    continue
                for a in event["attributes"]:
                    if a["key"] == "message":
                        a["value"]["stringValue"] = json.dumps(message) if agent else "[]"
    assert _answer(requests, tmp_path) == answer


def test_the_runs_texts_together_where_the_last_model_output_was_not_recorded(
    tmp_path: Path,
) -> None:
    """The model said the preamble beside its first tool call; the last model call's output
    was not recorded: the preamble comes off the front of the agent's message."""
    answer = _recorded_answer()
    requests = _with_agent_output(_parts(PREAMBLE, answer))
    chats = [s for r in requests for s in spans(r) if s["name"] == "chat"]
    first, last = chats[0], chats[-1]
    for event in first["events"]:
        for a in event["attributes"]:
            if a["key"] == "gen_ai.output.messages":
                (message,) = json.loads(a["value"]["stringValue"])
                message["parts"].insert(0, {"type": "text", "content": PREAMBLE})
                a["value"]["stringValue"] = json.dumps([message])
    for event in last["events"]:
        event["attributes"] = [
            a for a in event["attributes"] if a["key"] != "gen_ai.output.messages"
        ]
    assert _answer(requests, tmp_path) == answer
