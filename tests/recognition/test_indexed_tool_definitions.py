"""Tool definitions flattened into indexed attributes are the tools offered, as their JSON list.

Every session of a real trace whose model calls record the tools they offered as
`gen_ai.tool.definitions` (fixtures/lmnr: a hand-written OpenAI tool loop) is rewritten the way
older model-client instrumentations record them: one attribute per field of each tool,
`gen_ai.request.functions.N.name` / `.description` / `.parameters` (the JSON schema as text), and
no `gen_ai.tool.definitions`. The arguments the tools were called with are checked against
those schemas as before: the report must find the same steps, skill loads, answers and verdicts
(trajectory validity included) as for the original sessions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.rewritten import attribute, file_requests, file_truth, report_of, spans

FILE = ("lmnr", "lmnr.jsonl")
EXPECTATIONS = "lmnr/expectations.yaml"
BASE = "gen_ai.request.functions"


def _indexed(span: dict[str, Any]) -> bool:
    """The span's tool definitions as indexed attributes; whether it had any."""
    recorded = attribute(span, "gen_ai.tool.definitions")
    if recorded is None:
        return False
    kept = [a for a in span["attributes"] if a["key"] != "gen_ai.tool.definitions"]
    for n, item in enumerate(json.loads(recorded)):
        function = item["function"]
        fields = {
            "name": function["name"],
            "description": function.get("description"),
            "parameters": json.dumps(function["parameters"]),
        }
        kept += [
            {"key": f"{BASE}.{n}.{field}", "value": {"stringValue": value}}
            for field, value in fields.items()
            if value is not None
        ]
    span["attributes"] = kept
    return True


def _rewritten() -> list[dict[str, Any]]:
    requests = file_requests(*FILE)
    changed = [_indexed(span) for request in requests for span in spans(request)]
    assert any(changed)
    assert "gen_ai.tool.definitions" not in json.dumps(requests)
    return requests


def _what_happened(session: dict[str, Any]) -> dict[str, Any]:
    return {
        "steps": [(s["kind"], s["name"], s.get("arguments")) for s in session["steps"]],
        "skill_loads": [(x["skill"], x["status"]) for x in session["skill_loads"]],
        "catalogue": session["coverage"]["catalogue_source"],
        "final_answer": session["final_answer"],
        "verdicts": [(v["evaluator"], v["outcome"], v["label"]) for v in session["verdicts"]],
    }


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    original_dir: Path = tmp_path_factory.mktemp("original")
    original = report_of(file_requests(*FILE), original_dir, EXPECTATIONS)
    indexed_dir: Path = tmp_path_factory.mktemp("indexed")
    indexed = report_of(_rewritten(), indexed_dir, EXPECTATIONS)
    return (
        {s["session_id"]: s for s in original["sessions"]},
        {s["session_id"]: s for s in indexed["sessions"]},
    )


@pytest.mark.parametrize("session_id", sorted(file_truth(*FILE)))
def test_steps_and_verdicts_do_not_move(
    session_id: str, reports: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    original, indexed = reports
    assert _what_happened(indexed[session_id]) == _what_happened(original[session_id])


def test_the_arguments_were_checked_against_the_schemas(
    reports: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    _, indexed = reports
    outcomes = {
        v["outcome"]
        for session in indexed.values()
        for v in session["verdicts"]
        if v["evaluator"] == "trajectory_validity"
    }
    assert "pass" in outcomes
