"""Pydantic AI with pydantic-ai-harness Skills (fixtures/pydantic_ai/): a catalogue of
deferred capabilities, a loader (`load_capability`) whose argument is `id`, and a misspelt id
that only the tool's own schema says was a skill to load."""

from __future__ import annotations

import json

from spanjudge.recognition.catalogue import parse_catalogue
from spanjudge.recognition.reconcile import reconcile
from spanjudge.recognition.registry import RecogniserRegistry
from spanjudge.spans.files import read_input
from spanjudge.spans.record import SpanRecord
from tests.conftest import FIXTURES

FOLDER = FIXTURES / "pydantic_ai"


def _session(session_id: str) -> list[SpanRecord]:
    spans = [s for c in read_input(str(FOLDER / "pydantic_ai.jsonl")) for s in c.spans]
    return [s for s in spans if s.attributes.get("gen_ai.conversation.id") == session_id]


def _record(session_id: str) -> dict[str, object]:
    records = json.loads((FOLDER / "scenarios.json").read_text())["sessions"]
    found: dict[str, object] = next(r for r in records if r["session_id"] == session_id)
    return found


def test_the_deferred_capabilities_list_is_a_catalogue() -> None:
    chat = next(s for s in _session("pydantic-ai-skill-followed") if s.name.startswith("chat"))
    (instructions,) = json.loads(str(chat.attributes["gen_ai.system_instructions"]))
    assert "can be loaded using the `load_capability` tool" in instructions["content"]
    entries = {e.name: e.description for e in parse_catalogue(instructions["content"])}
    skills = sorted(p.parent.name for p in (FIXTURES / "skills").glob("*/SKILL.md"))
    assert sorted(entries) == skills
    assert entries["csv-report"] == (
        "Summarise a CSV file of sales figures into a markdown report with totals per region."
    )


def _loads(session_id: str) -> list[tuple[str | None, str | None]]:
    spans = _session(session_id)
    steps = reconcile(RecogniserRegistry.default().recognise_session(spans), spans)
    return [(s.skill, s.skill_status) for s in steps if s.kind == "skill_load"]


def test_a_misspelt_id_is_a_failed_load_because_the_schema_says_what_it_names() -> None:
    record = _record("pydantic-ai-load-failed-refusal")
    expected = [(x["skill"], x["status"]) for x in record["skill_loads"]]  # type: ignore[attr-defined]
    assert expected == [("csv-reports", "failed")]
    assert _loads("pydantic-ai-load-failed-refusal") == expected


def test_a_successful_call_of_a_non_loader_is_no_load() -> None:
    assert _loads("pydantic-ai-write-then-delete") == []


def test_the_body_that_arrives_in_the_next_request_completes_the_load() -> None:
    spans = _session("pydantic-ai-skill-followed")
    loader = next(s for s in spans if s.name == "execute_tool load_capability")
    assert "Read the CSV file" not in str(loader.attributes.get("gen_ai.tool.call.result"))
    steps = reconcile(RecogniserRegistry.default().recognise_session(spans), spans)
    (load,) = [s for s in steps if s.kind == "skill_load"]
    assert (load.skill, load.skill_status, load.skill_body_source) == (
        "csv-report",
        "loaded",
        "trace",
    )
    skill_md = (FIXTURES / "skills" / "csv-report" / "SKILL.md").read_text(encoding="utf-8")
    assert skill_md.split("---", 2)[2].strip() in (load.skill_body or "")
