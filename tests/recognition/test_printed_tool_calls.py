"""Tool calls whose arguments and results a Python framework recorded with ``str()``: the
arguments as a Python literal (``{'skill_name': 'csv-report'}``) or as a text no decoder reads,
the result as the repr of the message that carried it back to the model
(``content='…' name='load_skill' tool_call_id='call_001'``).

Metamorphic: the Agent Framework fixture file (GenAI spans, JSON arguments and results, the
model's requests with their call ids) is rewritten that way, and what the report shows of each
session (its steps, skill loads, counts and verdicts) does not move.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spanjudge.recognition.base import MESSAGE_CHARS, call_message
from tests.support.rewritten import attribute, file_requests, report_of, set_attribute, spans

FILE = ("agent_framework", "agent_framework.jsonl")
EXPECTATIONS = "agent_framework/expectations.yaml"
ARGUMENTS = "gen_ai.tool.call.arguments"
RESULT = "gen_ai.tool.call.result"
Rewrite = Callable[[dict[str, Any]], None]


def _seen(report: dict[str, Any]) -> dict[str, Any]:
    """What a user reads of each session: its steps, loads, counts and verdicts."""
    out = {}
    for session in report["sessions"]:
        steps = [
            tuple(s.get(k) for k in ("kind", "name", "skill", "skill_status", "arguments"))
            + tuple(s.get(k) for k in ("result", "error"))
            for s in session["steps"]
        ]
        verdicts = sorted(
            (v["evaluator"], v["outcome"], v["label"], v["explanation"])
            for v in session["verdicts"]
        )
        out[session["session_id"]] = (steps, session["skill_loads"], session["stats"], verdicts)
    return out


def _rewritten(tmp_path: Path, rewrite: Rewrite) -> tuple[dict[str, Any], dict[str, Any], int]:
    """(the report as recorded, the report with ``rewrite`` applied to every tool span, the
    number of tool spans rewritten)."""
    before = _seen(report_of(file_requests(*FILE), tmp_path, EXPECTATIONS))
    requests = file_requests(*FILE)
    changed = 0
    for request in requests:
        for span in spans(request):
            if span["name"].startswith("execute_tool "):
                rewrite(span)
                changed += 1
    return before, _seen(report_of(requests, tmp_path, EXPECTATIONS)), changed


def _printed_arguments(span: dict[str, Any]) -> None:
    recorded = attribute(span, ARGUMENTS)
    if recorded is not None:
        set_attribute(span, ARGUMENTS, str(json.loads(recorded)))


def _printed_results(span: dict[str, Any]) -> None:
    recorded = attribute(span, RESULT)
    if recorded is not None:
        name = attribute(span, "gen_ai.tool.name")
        call_id = attribute(span, "gen_ai.tool.call.id")
        printed = f"content={recorded!r} name={name!r} tool_call_id={call_id!r}"
        set_attribute(span, RESULT, printed)


def _unreadable_arguments(span: dict[str, Any]) -> None:
    """Arguments printed as an object's repr, which holds a value no literal reads."""
    recorded = attribute(span, ARGUMENTS)
    if recorded is not None:
        fields = ", ".join(f"{k}={v!r}" for k, v in json.loads(recorded).items())
        set_attribute(span, ARGUMENTS, f"ToolInput({fields}, at=datetime.now())")


def test_arguments_printed_as_a_python_literal_read_as_json(tmp_path: Path) -> None:
    """``{'skill_name': 'csv-report'}`` is the mapping it prints: the load is named by its value
    (before: by the whole text), and no other step or verdict moves."""
    before, after, changed = _rewritten(tmp_path, _printed_arguments)
    assert changed > 30
    assert after == before


def test_arguments_no_decoder_reads_give_way_to_the_requested_ones(tmp_path: Path) -> None:
    """Arguments kept as a text that is neither JSON nor a literal: the tool span takes the
    arguments the model asked for under its call id, and the session reads as recorded."""
    before, after, _ = _rewritten(tmp_path, _unreadable_arguments)
    assert after == before


def test_a_result_printed_as_its_message_is_the_messages_content(tmp_path: Path) -> None:
    """A result recorded as the repr of this call's tool message: its content is the result
    (a SKILL.md body, an error envelope on an OK span: `maf-tool-error-retry` keeps its failed
    `write_file` and its retry)."""
    before, after, _ = _rewritten(tmp_path, _printed_results)
    assert after["maf-tool-error-retry"][2]["errors"] == 1
    assert after == before


def test_both_printed_read_as_recorded(tmp_path: Path) -> None:
    def both(span: dict[str, Any]) -> None:
        _printed_arguments(span)
        _printed_results(span)

    before, after, _ = _rewritten(tmp_path, both)
    assert after == before


def test_a_message_of_another_call_is_not_unwrapped() -> None:
    printed = "content='done' name='write_file' tool_call_id='call_002'"
    assert call_message(printed, call_id="call_002", tool="other") == {
        "content": "done",
        "name": "write_file",
        "tool_call_id": "call_002",
    }
    assert call_message(printed, call_id="call_001", tool="write_file") is not None
    assert call_message(printed, call_id="call_001", tool="read_csv") is None
    assert (
        call_message("content=f(1) tool_call_id='call_002'", call_id="call_002", tool=None) is None
    )
    assert call_message("x content='a' tool_call_id='c'", call_id="c", tool=None) is None


def test_reading_a_message_repr_is_linear_and_bounded() -> None:
    hostile = [
        "content='" + "\\'" * 60_000,
        "content='a' " + "k=1 " * 60_000,
        "content='a' " + " " * 200_000 + "k",
        "content=" + "'a' " * 60_000,
    ]
    started = time.perf_counter()
    for text in hostile:
        assert call_message(text, call_id="c", tool="t") is None
    assert time.perf_counter() - started < 2.0
    assert (
        call_message("content='a' tool_call_id='c'" + " " * MESSAGE_CHARS, call_id="c", tool=None)
        is None
    )
