"""Skill catalogues in every form harnesses record them."""

from __future__ import annotations

import json

import pytest

from spanjudge.recognition.catalogue import parse_catalogue, tool_catalogue

CODEX = """You are a coding agent.

## Skills
A skill is a set of local instructions stored in a SKILL.md file.
### Available skills
- csv-report: Summarise a CSV file into a report. (file: .agents/csv-report/SKILL.md)
- incident-triage: Triage a production incident. (file: /home/me/.agents/incident-triage/SKILL.md)

### How to use skills
- Read the SKILL.md before starting.
"""
DEEP_AGENTS = """## Skills System

**Available Skills:**

- **csv-report**: Summarise a CSV file into a report.
  -> Read `/skills/csv-report/SKILL.md` for full instructions

- **incident-triage**: Triage a production incident.
  -> Read `/skills/incident-triage/SKILL.md` for full instructions

**How to Use Skills:**
"""
XML = (
    "<available_skills><skill><name>csv-report</name><description>Summarise a CSV file into a "
    "report.</description></skill><skill><name>incident-triage</name>"
    "<description>Triage a production incident.</description></skill></available_skills>"
)
TOOL_DESCRIPTION = (
    "Load a skill's full instructions.\n\nAvailable skills:\n"
    "- csv-report: Summarise a CSV file into a report.\n"
    "- incident-triage: Triage a production incident."
)
WANT = [
    ("csv-report", "Summarise a CSV file into a report."),
    ("incident-triage", "Triage a production incident."),
]


@pytest.mark.parametrize("text", [CODEX, DEEP_AGENTS, XML, TOOL_DESCRIPTION])
def test_a_catalogue_is_read_in_every_recorded_form(text: str) -> None:
    assert [(e.name, e.description) for e in parse_catalogue(text)] == WANT


def test_skills_listed_in_a_loader_tool_description_are_a_catalogue() -> None:
    definitions = json.dumps(
        [
            {
                "type": "function",
                "function": {"name": "load_skill", "description": TOOL_DESCRIPTION},
            },
            {"name": "read_csv", "description": "Read a CSV file."},
        ]
    )
    assert [(e.name, e.description) for e in tool_catalogue(definitions)] == WANT


def test_a_list_under_another_heading_is_no_catalogue() -> None:
    assert parse_catalogue("### How to use skills\n- read: the SKILL.md first\n") == ()


def test_haystack_catalogue_descriptions_carry_no_python_repr() -> None:
    from spanjudge.recognition.haystack import HaystackRecogniser
    from spanjudge.spans.files import read_input
    from tests.conftest import FIXTURES

    spans = [s for c in read_input(str(FIXTURES / "haystack" / "haystack.jsonl")) for s in c.spans]
    models = [s for s in spans if s.name == "haystack.agent.step.llm"]
    entries = {
        e
        for s in models
        for step in HaystackRecogniser().recognise(s) or []
        for e in step.catalogue
    }
    skills = {p.name for p in (FIXTURES / "skills").iterdir()}
    assert {e.name for e in entries} == skills
    assert all(e.description and "parameters=" not in e.description for e in entries)
