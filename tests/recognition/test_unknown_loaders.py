"""A loader nobody named: a call whose argument names a catalogue skill is a load attempt, and
its result decides loaded or failed, whatever the tool, its argument or its refusal are called.

Each case is a real Strands session (fixtures/strands) with its `skills` loader renamed
`fetch_playbook`, its `skill_name` argument renamed `topic`, the loader's description and
schema removed and its refusals reworded ("Playbook 'x' does not exist"): nothing is left that
names a loader. Then one more change, the one the case is about.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.recognition.agent_spans import Call, Say, agent_run, loads, trajectory_of
from tests.support.rewritten import (
    attribute,
    drop_spans,
    report_of,
    session_requests,
    set_attribute,
    spans,
    verdict,
)

FILE = "strands/strands_latest.jsonl"
EXPECTATIONS = "strands/expectations.yaml"
# `skills` as a whole JSON string, quoted plainly or inside an encoded JSON string
_LOADER = re.compile(r'(?<=[\\"])skills(?=\\*")')
_ARGUMENTS = re.compile(r'\{(\\*)"topic\\*": \\*"csv-report\\*"\}')


def _unnamed_loader(session_id: str, *, bare: bool = False) -> list[dict[str, Any]]:
    """The session, its loader unnamed; ``bare``: its argument the skill's name alone, in the
    model's requests too (`"csv-report"`, not `{"topic": "csv-report"}`)."""
    out = []
    for request in session_requests(FILE, session_id):
        text = json.dumps(request)
        text = _LOADER.sub("fetch_playbook", text)
        text = text.replace("execute_tool skills", "execute_tool fetch_playbook")
        text = text.replace("skill_name", "topic").replace("Skill '", "Playbook '")
        text = text.replace(" not found", " does not exist")
        if bare:
            text = _ARGUMENTS.sub(r'\1"csv-report\1"', text)
        rewritten = json.loads(text)
        for span in spans(rewritten):
            for key in ("gen_ai.tool.description", "gen_ai.tool.json_schema"):
                set_attribute(span, key, None)
        out.append(rewritten)
    assert "fetch_playbook" in json.dumps(out)
    return out


def _loader_spans(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for r in requests for s in spans(r) if s["name"] == "execute_tool fetch_playbook"]


def _skill_loaded(requests: list[dict[str, Any]], tmp_path: Path) -> dict[str, Any]:
    (session,) = report_of(requests, tmp_path, EXPECTATIONS)["sessions"]
    return verdict(session, "skill_loaded")


def test_an_unnamed_loader_that_errs_is_a_failed_load(tmp_path: Path) -> None:
    requests = _unnamed_loader("strands-latest-load-failed-exception")
    assert _loader_spans(requests)[0]["status"]["code"] == 2  # the file was gone: ERROR
    got = _skill_loaded(requests, tmp_path)
    assert (got["outcome"], got["label"]) == ("fail", "load_failed")


def test_an_unnamed_loader_whose_argument_is_the_bare_name(tmp_path: Path) -> None:
    requests = _unnamed_loader("strands-latest-load-failed-exception", bare=True)
    assert "topic" not in json.dumps(requests)
    got = _skill_loaded(requests, tmp_path)
    assert (got["outcome"], got["label"]) == ("fail", "load_failed")
    assert "csv-report" in got["explanation"]


def test_an_unnamed_loader_that_returns_nothing_loaded_nothing(tmp_path: Path) -> None:
    requests = _unnamed_loader("strands-latest-required-skill-followed")
    (loader,) = _loader_spans(requests)
    set_attribute(loader, "gen_ai.tool.call.result", "")
    for event in loader.get("events", ()):
        event["attributes"] = [
            a for a in event.get("attributes", ()) if a["key"] != "gen_ai.output.messages"
        ]
    # nor does the body reach the model any other way
    for request in requests:
        for span in spans(request):
            for event in span.get("events", ()):
                for a in event.get("attributes", ()):
                    text = a["value"].get("stringValue") or ""
                    if "# CSV report" in text:
                        a["value"]["stringValue"] = re.sub(
                            r"# CSV report.*?SKILL\.md", "", text, flags=re.S
                        )
    got = _skill_loaded(requests, tmp_path)
    assert (got["outcome"], got["label"]) == ("fail", "load_failed")


def test_an_unnamed_loader_refused_before_it_ran_in_a_trace_without_call_ids(
    tmp_path: Path,
) -> None:
    """The same, where tool spans record no call id: the request no execution answers is the
    one refused (the loader ran later, for the retry)."""
    requests = _unnamed_loader("strands-latest-load-failed-error-status")
    first, _ = _loader_spans(requests)
    drop_spans(requests, lambda s: s is first)
    for request in requests:
        for span in spans(request):
            set_attribute(span, "gen_ai.tool.call.id", None)
    (session,) = report_of(requests, tmp_path, EXPECTATIONS)["sessions"]
    # what happened (fixtures/strands/scenarios.json): a failed attempt, then the load
    assert [(x["skill"], x["status"]) for x in session["skill_loads"]] == [
        ("csv-report", "failed"),
        ("csv-report", "loaded"),
    ]


def test_an_unnamed_loader_refused_before_it_ran(tmp_path: Path) -> None:
    """The framework's argument validation refused the call: no tool span exists, only the
    model's request in its output and the error the agent sent back."""
    requests = _unnamed_loader("strands-latest-load-failed-exception")
    drop_spans(requests, lambda s: s["name"] == "execute_tool fetch_playbook")
    assert "fetch_playbook" in json.dumps(requests)  # still in the model's output
    got = _skill_loaded(requests, tmp_path)
    assert (got["outcome"], got["label"]) == ("fail", "load_failed")


def test_an_ordinary_tool_taking_a_skill_name_as_data_is_no_load(tmp_path: Path) -> None:
    """`read_csv` reads ordinary paths in this session; asked for a path that happens to be a
    skill's name, and failing, it is still reading data, not loading a skill."""
    requests = _unnamed_loader("strands-latest-required-skill-followed")
    readers = [s for r in requests for s in spans(r) if s["name"] == "execute_tool read_csv"]
    (reader,) = readers
    failed = json.loads(json.dumps(reader))
    failed["spanId"] = "00000000000000aa"
    set_attribute(failed, "gen_ai.tool.call.id", "tooluse_extra")
    set_attribute(failed, "gen_ai.tool.call.arguments", json.dumps({"path": "incident-triage"}))
    set_attribute(failed, "gen_ai.tool.call.result", json.dumps([{"text": "Error: not a CSV"}]))
    failed["events"] = []
    requests[-1]["resourceSpans"][0]["scopeSpans"][0]["spans"].append(failed)
    assert attribute(reader, "gen_ai.tool.call.arguments") == json.dumps({"path": "data/sales.csv"})
    (session,) = report_of(requests, tmp_path, EXPECTATIONS)["sessions"]
    assert [(x["skill"], x["status"]) for x in session["skill_loads"]] == [("csv-report", "loaded")]


def test_a_loader_its_description_announces_refusing_a_misspelt_name(tmp_path: Path) -> None:
    """A name no catalogue holds (`csv-reports`): the tool's own description ("Load a skill's
    instructions (its SKILL.md) by name.") says it is a loader, so the refused call is a failed
    load of that name (fixtures/mcp, OpenInference; loader renamed, argument `topic`)."""
    session = "mcp-openinference-load-failed-refusal"
    requests = []
    for request in session_requests("mcp/mcp_openinference.jsonl", session):
        text = re.sub(r"\bload_skill\b", "fetch_playbook", json.dumps(request))
        text = re.sub(r'(\\*)"name\\*": (\\*)"csv-reports', r'\1"topic\1": \2"csv-reports', text)
        requests.append(json.loads(text))
    loader = [s for r in requests for s in spans(r) if s["name"] == "fetch_playbook"]
    assert attribute(loader[0], "input.value") == json.dumps({"topic": "csv-reports"})
    (got,) = report_of(requests, tmp_path, "mcp/expectations.yaml")["sessions"]
    # what happened (fixtures/mcp/scenarios.json)
    assert [(x["skill"], x["status"]) for x in got["skill_loads"]] == [("csv-reports", "failed")]


def test_a_loader_only_the_models_tool_definitions_describe(tmp_path: Path) -> None:
    """The same, where the tool span carries no description: only the tool definitions the
    model was given (`llm.tools.N.tool.json_schema`) say the tool loads a skill."""
    session = "mcp-openinference-load-failed-refusal"
    requests = []
    for request in session_requests("mcp/mcp_openinference.jsonl", session):
        text = re.sub(r"\bload_skill\b", "fetch_playbook", json.dumps(request))
        text = re.sub(r'(\\*)"name\\*": (\\*)"csv-reports', r'\1"topic\1": \2"csv-reports', text)
        requests.append(json.loads(text))
    for span in [s for r in requests for s in spans(r)]:
        set_attribute(span, "tool.description", None)
    assert "Load a skill's instructions" in json.dumps(requests)  # in the definitions only
    (got,) = report_of(requests, tmp_path, "mcp/expectations.yaml")["sessions"]
    # what happened (fixtures/mcp/scenarios.json)
    assert [(x["skill"], x["status"]) for x in got["skill_loads"]] == [("csv-reports", "failed")]


DESCRIBED = {"gen_ai.tool.description": "Fetch the playbook for a topic, by its name."}


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        # refused: a failed load of the name it was given
        (
            Call(
                "ops_guide",
                {"topic": "csv-reports"},
                "Playbook 'csv-reports' does not exist.",
                attrs=DESCRIBED,
            ),
            [("csv-reports", "failed")],
        ),
        # answered with instructions: loaded
        (
            Call(
                "ops_guide", {"topic": "csv-report"}, "# CSV\n\n1. Read.\n2. Sum.", attrs=DESCRIBED
            ),
            [("csv-report", "loaded")],
        ),
        # answered with data: the description alone loads nothing
        (Call("ops_guide", {"topic": "weekly"}, "42 calls this week", attrs=DESCRIBED), []),
        # no description saying it loads anything: an ordinary failed call
        (Call("ops_guide", {"topic": "csv-reports"}, "Playbook 'csv-reports' does not exist."), []),
    ],
)
def test_a_tool_its_description_announces_as_a_loader(
    call: Call, expected: list[tuple[str, str]]
) -> None:
    trajectory = trajectory_of(lambda t: agent_run(t, "Build the report.", [call, Say(text=".")]))
    assert loads(trajectory) == expected
