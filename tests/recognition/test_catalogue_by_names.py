"""A catalogue nothing calls "skills": a list of named entries in the prompt is the catalogue when
its names are skills the session shows elsewhere (the skills directory, a SKILL.md's front matter,
a load). Each real fixture session's catalogue is re-rendered under a heading that names no skill,
and the verdicts that read the catalogue must not move."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from spanjudge.config import parse_config
from spanjudge.emit.report import JsonReportWriter
from spanjudge.engine import Engine
from spanjudge.expectations import ExpectationResolver, load_expectations_file
from spanjudge.offline import run_offline
from tests.metamorphic.transforms import map_strings, rerender_catalogue
from tests.support import catalogue_layouts

FIXTURES = Path(__file__).parents[2] / "fixtures"
SKILLS = FIXTURES / "skills"
FILES = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*.jsonl"))
# the evaluators that read the catalogue
READS_CATALOGUE = ("skill_selection", "skill_omission")


def _playbooks(skills: catalogue_layouts.Skills) -> str:
    return "## Playbooks\n\n" + "\n".join(f"- {n}: {d}" for n, d in skills)


def _procedures(skills: catalogue_layouts.Skills) -> str:
    rows = "\n".join(f"| {n} | {d} |" for n, d in skills)
    return f"Procedures you may follow:\n\n| Procedure | Use it when |\n|---|---|\n{rows}"


UNANNOUNCED = {"playbooks": _playbooks, "procedures": _procedures}


def _report(path: Path, settings: dict[str, Any], tmp: Path, requests: Any = None) -> Any:
    engine = Engine(parse_config(settings))
    expectations = path.parent / "expectations.yaml"
    if expectations.exists():
        engine.add_expectations(ExpectationResolver(load_expectations_file(str(expectations))))
    source = path
    if requests is not None:
        source = tmp / f"{path.parent.name}-{path.name}"
        source.write_text("".join(json.dumps(r) + "\n" for r in requests))
    buf = io.StringIO()
    run_offline([str(source)], engine, JsonReportWriter(buf))
    return json.loads(buf.getvalue())


def _catalogue(report: Any) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    for session in report["sessions"]:
        for entry in session["catalogue"]:
            found.setdefault(entry["name"], entry["description"] or "")
    return tuple(found.items())


def _reading(session: Any) -> list[tuple[str, str, str | None]]:
    return sorted(
        (v["evaluator"], v["outcome"], v["reason"])
        for v in session["verdicts"]
        if v["evaluator"] in READS_CATALOGUE
    )


def _loads(session: Any) -> bool:
    """Whether the session loaded one of its catalogue's skills (a failed load of a misspelt
    name shows no skill)."""
    offered = {entry["name"] for entry in session["catalogue"]}
    return any(
        step["kind"] == "skill_load"
        and step.get("skill_status") == "loaded"
        and step.get("skill") in offered
        for step in session["steps"]
    )


def _rerendered(name: str, layout: str, entries: Any) -> list[Any]:
    requests = [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line]
    change = rerender_catalogue("markdown_list", entries)
    rendered = UNANNOUNCED[layout](entries)
    original = catalogue_layouts.render("markdown_list", entries)

    def unannounced(text: str) -> str:
        return change(text).replace(original, rendered)

    for request in requests:
        map_strings(request, unannounced, span_names=False)
    heading = rendered.split("\n", 1)[0]
    if heading not in json.dumps(requests):
        pytest.skip(f"{name}: its catalogue is not in a region the rewrite finds")
    return requests


CASES = [(layout, name) for i, name in enumerate(FILES) for layout in [sorted(UNANNOUNCED)[i % 2]]]


@pytest.mark.parametrize(("layout", "name"), CASES)
def test_a_list_naming_a_loaded_skill_is_the_catalogue(
    layout: str, name: str, tmp_path: Path
) -> None:
    before = _report(FIXTURES / name, {}, tmp_path)
    entries = _catalogue(before)
    if not entries:
        pytest.skip(f"{name} records no catalogue")
    requests = _rerendered(name, layout, entries)
    after = _report(FIXTURES / name, {}, tmp_path, requests)
    by_id = {s["session_id"]: s for s in after["sessions"]}
    checked = 0
    for session in before["sessions"]:
        if not session["catalogue"] or not _loads(session):
            continue  # nothing else in the session names a skill
        moved = by_id[session["session_id"]]
        assert moved["catalogue"], f"{layout}: {name}: {session['session_id']}: no catalogue"
        assert _reading(moved) == _reading(session), (
            f"catalogue as {layout} moved {session['session_id']} ({name})"
        )
        checked += 1
    if not checked:
        pytest.skip(f"{name}: no session both offers a catalogue and loads a skill")


@pytest.mark.parametrize(("layout", "name"), CASES)
def test_with_a_skills_directory_every_session_keeps_its_catalogue(
    layout: str, name: str, tmp_path: Path
) -> None:
    settings = {"skills": {"paths": [str(SKILLS)]}}
    before = _report(FIXTURES / name, settings, tmp_path)
    entries = _catalogue(before)
    if not entries:
        pytest.skip(f"{name} records no catalogue")
    if not {n for n, _ in entries} & {p.name for p in SKILLS.iterdir()}:
        pytest.skip(f"{name}: its catalogue names no skill of the directory")
    after = _report(FIXTURES / name, settings, tmp_path, _rerendered(name, layout, entries))
    by_id = {s["session_id"]: s for s in after["sessions"]}
    for session in before["sessions"]:
        if session["catalogue"]:
            moved = by_id[session["session_id"]]
            assert _reading(moved) == _reading(session), (
                f"catalogue as {layout} moved {session['session_id']} ({name})"
            )


# Fixture files whose model calls are offered a loader described as one ("Loads a skill by
# name"): there a list in the system text needs no word that says it lists skills.
BESIDE_A_LOADER = ("adk/adk.jsonl", "mcp/mcp_openllmetry.jsonl", "mcp/mcp_openinference.jsonl")


def _rewritten(name: str, replace_with: Any) -> tuple[Any, list[Any]]:
    """The file's report, and its requests with the catalogue's text replaced by
    ``replace_with(entries)``."""
    before = _report(FIXTURES / name, {}, Path("/nonexistent"))
    entries = _catalogue(before)
    requests = [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line]
    change = rerender_catalogue("markdown_list", entries)
    original = catalogue_layouts.render("markdown_list", entries)
    rendered = replace_with(entries)
    for request in requests:
        map_strings(
            request, lambda text: change(text).replace(original, rendered), span_names=False
        )
    assert rendered.split("\n", 1)[0] in json.dumps(requests)
    return before, requests


@pytest.mark.parametrize("name", BESIDE_A_LOADER)
def test_a_list_beside_a_loader_is_the_catalogue_when_nothing_is_loaded(
    name: str, tmp_path: Path
) -> None:
    """Sessions that load no skill (skill omitted, answered without one) and call their list
    "Playbooks": the loader offered beside the list says what it lists, so omission and
    selection are judged as before (before: no catalogue)."""
    before, requests = _rewritten(name, _playbooks)
    after = _report(FIXTURES / name, {}, tmp_path, requests)
    by_id = {s["session_id"]: s for s in after["sessions"]}
    checked = 0
    for session in before["sessions"]:
        if not session["catalogue"] or _loads(session):
            continue
        moved = by_id[session["session_id"]]
        assert [e["name"] for e in moved["catalogue"]] == [e["name"] for e in session["catalogue"]]
        assert _reading(moved) == _reading(session), session["session_id"]
        checked += 1
    assert checked >= 4


# a file whose loader's own description lists nothing (the list is in the system text only)
GUARDED = "mcp/mcp_openllmetry.jsonl"


def _tool_list(entries: catalogue_layouts.Skills) -> str:
    return (
        "## Tools\n\n- read_csv: Read a CSV file and return its rows.\n"
        "- write_file: Write text to a file in the workspace.\n"
        "- calculate: Evaluate an arithmetic expression."
    )


def _examples(entries: catalogue_layouts.Skills) -> str:
    return "Name your notes like these examples:\n\n" + "\n".join(f"- {n}: {d}" for n, d in entries)


@pytest.mark.parametrize("replacement", [_tool_list, _examples])
def test_a_tool_list_or_examples_beside_a_loader_are_no_catalogue(
    replacement: Any, tmp_path: Path
) -> None:
    """The catalogue replaced by a list of the agent's own tools, or by the same entries given
    as examples: a loader offered beside them does not make either a catalogue."""
    _, requests = _rewritten(GUARDED, replacement)
    after = _report(FIXTURES / GUARDED, {}, tmp_path, requests)
    offered = {e["name"] for s in after["sessions"] for e in s["catalogue"]}
    assert not offered & {"read_csv", "write_file", "calculate"}
    if replacement is _examples:
        unloaded = [s for s in after["sessions"] if not s["skill_loads"]]
        assert unloaded
        assert all(not s["catalogue"] for s in unloaded)


def _instructions_listing(requests: list[Any], rendered: str, tools: list[str]) -> None:
    """Beside the prompt holding the catalogue, the agent's instructions (an attribute of
    their own) list the session's tools for working with skills."""
    listed = "\n".join(
        f"- {tool}: {'list available skills' if i == 0 else f'call {tool}'}"
        for i, tool in enumerate(tools)
    )
    instructions = f"You can manage skills.\n\nFor skills:\n{listed}"
    for request in requests:
        for resource in request.get("resourceSpans", ()):
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    if rendered.split("\n", 1)[0] in json.dumps(span.get("attributes")):
                        span["attributes"].append(
                            {
                                "key": "acme.agent.instructions",
                                "value": {"stringValue": instructions},
                            }
                        )


@pytest.mark.parametrize(("layout", "name"), CASES)
def test_a_list_of_the_sessions_tools_is_no_catalogue(
    layout: str, name: str, tmp_path: Path
) -> None:
    """The catalogue called "Playbooks", and beside it the agent's instructions listing its
    tools for skills (one of them a tool the session calls): the catalogue is the list naming
    a loaded skill, never the tools, and the verdicts that read it do not move."""
    before = _report(FIXTURES / name, {}, tmp_path)
    entries = _catalogue(before)
    tools = sorted(
        {
            step["name"]
            for session in before["sessions"]
            for step in session["steps"]
            if step["kind"] in ("tool_call", "skill_load")
        }
    )
    if not entries or len(tools) < 2:
        pytest.skip(f"{name} records no catalogue or too few tools")
    requests = _rerendered(name, layout, entries)
    _instructions_listing(requests, UNANNOUNCED[layout](entries), tools)
    after = _report(FIXTURES / name, {}, tmp_path, requests)
    by_id = {s["session_id"]: s for s in after["sessions"]}
    checked = 0
    for session in before["sessions"]:
        if not session["catalogue"] or not _loads(session):
            continue
        moved = by_id[session["session_id"]]
        offered = {e["name"] for e in moved["catalogue"]}
        assert offered.isdisjoint(set(tools) - {n for n, _ in entries}), session["session_id"]
        assert _reading(moved) == _reading(session), session["session_id"]
        checked += 1
    if not checked:
        pytest.skip(f"{name}: no session both offers a catalogue and loads a skill")


def _skill_tools_instructions(tools: list[str]) -> Any:
    def instructions(entries: catalogue_layouts.Skills) -> str:
        listed = "\n".join(
            f"- {tool}: {'list available skills' if i == 0 else f'call {tool} for a skill'}"
            for i, tool in enumerate(tools)
        )
        return f"You can manage workspace skills.\n\nUse these tools:\n{listed}"

    return instructions


@pytest.mark.parametrize("name", FILES)
def test_a_list_led_in_as_tools_is_no_catalogue(name: str, tmp_path: Path) -> None:
    """The catalogue replaced by the agent's instructions for skills: "Use these tools:" and
    its tools, the first described as listing the available skills. The list is of tools, not
    skills, whatever words about skills stand around it."""
    before = _report(FIXTURES / name, {}, tmp_path)
    if not _catalogue(before):
        pytest.skip(f"{name} records no catalogue")
    tools = sorted(
        {
            step["name"]
            for session in before["sessions"]
            for step in session["steps"]
            if step["kind"] in ("tool_call", "skill_load")
        }
    )
    if len(tools) < 2:
        pytest.skip(f"{name} records too few tools")
    try:
        _, requests = _rewritten(name, _skill_tools_instructions(tools))
    except AssertionError:
        pytest.skip(f"{name}: its catalogue is not in a region the rewrite finds")
    after = _report(FIXTURES / name, {}, tmp_path, requests)
    offered = {e["name"] for s in after["sessions"] for e in s["catalogue"]}
    assert not offered & set(tools)
