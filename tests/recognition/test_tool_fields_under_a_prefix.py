"""A span that says it executes a tool (`gen_ai.operation.name` `execute_tool`) but keeps the
call's arguments, result and id under its framework's own prefix (`<prefix>.tool.call.arguments`,
`.result`, `.id`, as Spring AI's observations write them) is the same call as one that kept them
under `gen_ai.`: the same loads, the same tool calls, the same verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.rewritten import file_requests, report_of, spans

FIELDS = ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.tool.call.id")
# what a report says of each call
_KEYS = ("kind", "name", "tool_call_id", "arguments", "result", "skill", "skill_status", "error")


def _under_own_prefix(requests: list[dict[str, Any]], prefix: str) -> int:
    moved = 0
    for request in requests:
        for span in spans(request):
            attributes = span.get("attributes", [])
            if not any(
                a["key"] == "gen_ai.operation.name"
                and a["value"].get("stringValue") == "execute_tool"
                for a in attributes
            ):
                continue
            for a in attributes:
                if a["key"] in FIELDS:
                    a["key"] = prefix + a["key"].removeprefix("gen_ai.")
                    moved += 1
    return moved


def _calls(session: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        tuple(s.get(k) for k in _KEYS)
        for s in session["steps"]
        if s["kind"] in ("tool_call", "skill_load")
    ]


def _verdicts(session: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(v["evaluator"], v["outcome"], v["label"], v["reason"]) for v in session["verdicts"]]


@pytest.mark.parametrize(
    ("framework", "prefix"),
    [("genai_manual", "acme.agents."), ("agent_framework", "shop_ops.")],
)
def test_tool_fields_under_a_framework_prefix_read_as_the_conventions_fields(
    framework: str, prefix: str, tmp_path: Path
) -> None:
    name = f"{framework}.jsonl"
    expectations = f"{framework}/expectations.yaml"
    requests = file_requests(framework, name)
    before = {s["session_id"]: s for s in report_of(requests, tmp_path, expectations)["sessions"]}
    assert _under_own_prefix(requests, prefix) > 0
    after = {s["session_id"]: s for s in report_of(requests, tmp_path, expectations)["sessions"]}
    assert after.keys() == before.keys()
    for session_id, was in before.items():
        now = after[session_id]
        assert _calls(now) == _calls(was), session_id
        assert now["skill_loads"] == was["skill_loads"], session_id
        assert _verdicts(now) == _verdicts(was), session_id
        assert now["stats"] == was["stats"], session_id
