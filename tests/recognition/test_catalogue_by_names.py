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
