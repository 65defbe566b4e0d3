"""The JavaScript agent fixture sets (Vercel AI SDK, Mastra) against their scenario records.

Their spans follow conventions spanjudge does not read by name, so the default acceptance
(`test_fixtures_acceptance.py`) expects them to fail until recognition reads such spans from their
shape. Here each set is read with the `conventions:` a user would declare for it (the README's
"Teaching spanjudge a new framework"), and every session must then match what the scenario did:
this shows that the traces hold the facts the records say they hold, and that a user can read
them today.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES
from tests.support.fixture_reports import (
    RECORDS,
    assert_matches_record,
    assert_steps_match_call_log,
    configured_report,
    session_report,
)

CONVENTIONS: dict[str, dict[str, Any]] = {
    "vercel_ai": {
        "session_key": "session.id",
        "claims": "ai.*",
        "turn": {
            "span_name": "ai.generateText",
            "request": "ai.prompt#messages[role=user][-1].content",
            "answer": "ai.response.text",
        },
        "model_call": {
            "span_name": "ai.generateText.doGenerate",
            "model": "ai.model.id",
            "input_tokens": "ai.usage.inputTokens",
            "output_tokens": "ai.usage.outputTokens",
            "text": "ai.response.text",
            "finish_reason": "ai.response.finishReason",
            "catalogue": "ai.prompt.messages#[role=system][*].content",
        },
        "tool_call": {
            "span_name": "ai.toolCall",
            "tool_name": "ai.toolCall.name",
            "arguments": "ai.toolCall.args",
            "result": "ai.toolCall.result",
            "call_id": "ai.toolCall.id",
        },
    },
    "mastra": {
        "session_key": "session.id",
        # the run's generation span and the stream's chunks are no step of their own
        "claims": ["chat *", "chunk: *"],
        "turn": {
            "attributes": {"mastra.span.type": "agent_run"},
            "request": "input#[role=user][-1].content",
            "answer": "output#text",
        },
        "model_call": {
            "attributes": {"mastra.span.type": "model_step"},
            "model": "modelId",
            "input_tokens": "body#usage.prompt_tokens",
            "output_tokens": "body#usage.completion_tokens",
            "text": "output#text",
        },
        "tool_call": {
            "attributes": {"mastra.span.type": "tool_call"},
            "tool_name": "gen_ai.tool.name",
            "arguments": "gen_ai.tool.input",
            "result": "gen_ai.tool.output",
        },
    },
}

JS_RECORDS = [
    pytest.param(d, r, id=r["session_id"]) for d, r in RECORDS if Path(d).name in CONVENTIONS
]


# Mastra's trace holds the system instructions, and with them the skill catalogue, only in the
# run's generation span and in each step's raw request body (a JSON string inside a JSON value,
# which a declared path does not read into), so there the user points spanjudge at the skills.
SKILLS = {"mastra": {"paths": [str(FIXTURES / "skills")]}}


def _config(directory: str) -> str:
    name = Path(directory).name
    config: dict[str, Any] = {"conventions": {name: CONVENTIONS[name]}}
    if name in SKILLS:
        config["skills"] = SKILLS[name]
    return json.dumps(config)


def _scenarios(name: str) -> set[str]:
    return {r["scenario"] for d, r in RECORDS if Path(d).name == name}


def test_both_sets_run_the_scenarios_of_the_python_sets() -> None:
    """The scripted world's scenarios: Haystack runs them with the custom loader, OpenLLMetry
    with the raising one; the JavaScript sets run all of them."""
    python_sets = _scenarios("haystack") | _scenarios("openllmetry")
    assert len(python_sets) == 13
    for name in CONVENTIONS:
        assert _scenarios(name) == python_sets, name


@pytest.mark.parametrize(("directory", "record"), JS_RECORDS)
def test_declared_conventions_read_what_the_scenario_did(
    directory: str, record: dict[str, Any]
) -> None:
    got = session_report(directory, record["session_id"], _config(directory))
    assert_matches_record(got, record)
    assert_steps_match_call_log(got, record)


@pytest.mark.parametrize("name", sorted(CONVENTIONS))
def test_the_sets_come_from_node_with_the_frameworks_own_tracing(name: str) -> None:
    """Every line is an OTLP export from the Node SDK (or Mastra's exporter, which says so)."""
    languages = set()
    for line in (FIXTURES / name / f"{name}.jsonl").read_text().splitlines():
        for resource_spans in json.loads(line)["resourceSpans"]:
            attributes = {
                a["key"]: next(iter(a["value"].values()))
                for a in resource_spans["resource"]["attributes"]
            }
            languages.add(attributes.get("telemetry.sdk.language"))
    assert languages == {"nodejs"}


def test_the_declared_reports_judge_the_skill_loads() -> None:
    """With the declarations, the sessions that loaded their required skill pass skill_loaded
    and the ones that never did fail it: the verdicts follow the records."""
    for name in CONVENTIONS:
        directory = str(FIXTURES / name)
        report = configured_report(directory, _config(directory))
        records = {r["session_id"]: r for d, r in RECORDS if d == directory}
        for session in report["sessions"]:
            record = records[session["session_id"]]
            loaded = {x["skill"] for x in record["skill_loads"] if x["status"] == "loaded"}
            for verdict in session["verdicts"]:
                if verdict["evaluator"] != "skill_loaded" or not record["expected_skills"]:
                    continue
                want = "pass" if verdict["target"]["skill"] in loaded else "fail"
                assert verdict["outcome"] == want, (session["session_id"], verdict)
