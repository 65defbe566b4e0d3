"""A tool span that names only its tool and call id (its arguments and result logged with the
model calls, as AutoGen's `execute_tool` spans are) is the same call as one that recorded them:
the model output that asked for that id gives its arguments, the result sent back with the id
its result, and the load or failure is decided on those."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.metamorphic.transforms import tool_content_only_in_messages
from tests.support.rewritten import FIXTURES, file_requests, report_of

# what a report says of each call
_KEYS = ("kind", "name", "tool_call_id", "arguments", "skill", "skill_status", "error")


def _session(report: dict[str, Any], session_id: str) -> dict[str, Any]:
    [session] = [s for s in report["sessions"] if s["session_id"] == session_id]
    return session


def _calls(session: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        tuple(s.get(k) for k in _KEYS)
        for s in session["steps"]
        if s["kind"] in ("tool_call", "skill_load")
    ]


@pytest.mark.parametrize(
    "session_id",
    ["maf-required-skill-followed", "maf-tool-error-retry", "maf-load-failed-unknown-skill"],
)
def test_a_tool_span_without_its_content_reads_it_by_call_id(
    session_id: str, tmp_path: Path
) -> None:
    requests = file_requests("agent_framework", "agent_framework.jsonl")
    before = _session(report_of(requests, tmp_path), session_id)
    tool_content_only_in_messages(requests)
    after = _session(report_of(requests, tmp_path), session_id)
    assert _calls(after) == _calls(before)
    assert all(s["arguments"] is not None for s in after["steps"] if s["kind"] == "tool_call")
    # the SKILL.md that came back is the load's body, not a skill pinned into the prompt
    assert "pinned_skill" not in {s["name"] for s in after["steps"]}
    assert after["stats"] == before["stats"]


def test_a_described_loader_decided_on_arguments_found_by_call_id(tmp_path: Path) -> None:
    # The tool's own description says it fetches a playbook: refused a name no catalogue
    # holds, it is a failed load of that name, whether the span or the model's request
    # recorded the name.
    text = (FIXTURES / "autogen" / "autogen.jsonl").read_text()
    misspelt = text.replace('topic\\": \\"csv-report', 'topic\\": \\"csv-reprot')
    assert misspelt != text
    requests = [json.loads(line) for line in misspelt.splitlines() if line.strip()]
    session = _session(report_of(requests, tmp_path), "autogen-unnamed-loader-refused")
    [load] = [s for s in session["steps"] if s["name"] == "fetch_playbook"]
    assert load["kind"] == "skill_load" and load["arguments"] == {"topic": "csv-reprot"}
    assert (load["skill"], load["skill_status"]) == ("csv-reprot", "failed")


def test_call_ids_counted_again_each_run_are_matched_in_time(tmp_path: Path) -> None:
    # A framework that numbers its call ids from one in every run: the second turn's load
    # reuses the id of the first turn's call, whose request and result the second turn's
    # model calls repeat as history.
    session_id = "autogen-multi-turn"
    text = (FIXTURES / "autogen" / "autogen.jsonl").read_text()
    before = _session(report_of(_parsed(text), tmp_path), session_id)
    for n in range(2, 6):
        text = text.replace(f"call_00{n}", f"call_00{n - 1}")
    after = _session(report_of(_parsed(text), tmp_path), session_id)
    ids = [s["tool_call_id"] for s in after["steps"] if s["kind"] in ("tool_call", "skill_load")]
    assert ids.count("call_001") == 2
    calls = [s for s in after["steps"] if s["kind"] in ("tool_call", "skill_load")]
    known = [s for s in before["steps"] if s["kind"] in ("tool_call", "skill_load")]
    assert [(s["name"], s["arguments"]) for s in calls] == [
        (s["name"], s["arguments"]) for s in known
    ]
    # the second call_001's result is not the first's: it is its own or left unknown
    assert all(
        s.get("result") in (None, k.get("result")) for s, k in zip(calls, known, strict=True)
    )


def _parsed(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
